"""LSTM checkpoints: weights, architecture and vocabulary in one file, loaded back by one call.

The format belongs to the model, not to training: `seqq train` writes it, the model loader and
the trainer's resume read it.
"""

from __future__ import annotations

from pathlib import Path

import torch

from seqq.errors import CheckpointError
from seqq.models.lstm import LSTMModel, LSTMNet
from seqq.models.payload import load_payload, save_payload

FORMAT = "seqq-lstm"
VERSION = 1


def save_checkpoint(path: str | Path, net: LSTMNet, vocab: list[str], **extra) -> None:
    save_payload(path, dict(format=FORMAT, version=VERSION, model_config=dict(net.config),
                            state_dict={k: v.detach().cpu() for k, v in net.state_dict().items()},
                            vocab=list(vocab), **extra))


def read_checkpoint(path: str | Path) -> dict:
    """The checkpoint's contents, checked for format; every failure is a `CheckpointError`."""
    return load_payload(path, kind="LSTM", format=FORMAT, version=VERSION,
                        fields=("model_config", "state_dict", "vocab"),
                        remake="seqq train dataset=<name>")


def net_from_payload(payload: dict, path: str | Path) -> LSTMNet:
    config, vocab = payload["model_config"], payload["vocab"]
    if len(vocab) != config.get("vocab_size"):
        raise CheckpointError(f"{path}: vocabulary of {len(vocab)} symbols does not match the "
                              f"model's vocab_size {config.get('vocab_size')}")
    try:
        net = LSTMNet(**config)
        net.load_state_dict(payload["state_dict"])
    except (TypeError, RuntimeError) as e:
        raise CheckpointError(f"{path}: weights do not match the saved architecture: "
                              f"{str(e).splitlines()[0]}") from e
    return net


def load_checkpoint(path: str | Path, device: str | torch.device | None = None,
                    vocab: list[str] | None = None) -> tuple[LSTMModel, list[str]]:
    """The trained model (eval mode, protocol adapter) and its vocabulary.

    Pass the dataset's `vocab` to check that the model was trained on the same symbols.
    """
    payload = read_checkpoint(path)
    if vocab is not None and list(vocab) != payload["vocab"]:
        raise CheckpointError(f"{path} was trained on a different vocabulary "
                              f"({len(payload['vocab'])} symbols vs the dataset's {len(vocab)})")
    return LSTMModel(net_from_payload(payload, path), device, payload["vocab"]), payload["vocab"]
