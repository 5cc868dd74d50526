"""LSTM checkpoints: weights, architecture and vocabulary in one file, loaded back by one call."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from seqq.errors import CheckpointError
from seqq.models.lstm import LSTMModel, LSTMNet

FORMAT = "seqq-lstm"
VERSION = 1


def save_checkpoint(path: str | Path, net: LSTMNet, vocab: list[str], **extra) -> None:
    """Write atomically, so an interrupted save never replaces a good checkpoint with a bad one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = dict(format=FORMAT, version=VERSION, model_config=dict(net.config),
                   state_dict={k: v.detach().cpu() for k, v in net.state_dict().items()},
                   vocab=list(vocab), **extra)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def read_checkpoint(path: str | Path) -> dict:
    """The checkpoint's contents, checked for format; every failure is a `CheckpointError`."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} not found; train one with `seqq train`")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for truncated or foreign files
        raise CheckpointError(f"checkpoint {path} is corrupt or not a seqq checkpoint "
                              f"({type(e).__name__}); delete it and train again") from e
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a seqq LSTM checkpoint")
    missing = {"model_config", "state_dict", "vocab"} - payload.keys()
    if missing:
        raise CheckpointError(f"{path} lacks {sorted(missing)}; it is incomplete")
    if payload.get("version") != VERSION:
        raise CheckpointError(f"{path} has checkpoint version {payload.get('version')}; "
                              f"this seqq reads version {VERSION}")
    return payload


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
