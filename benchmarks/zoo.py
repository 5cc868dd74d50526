"""The models the benchmarks run on, by name. Random weights unless stated: speed does not
depend on what the weights are, only on the architecture and the vocabulary size. The
authors' Shakespeare LSTM and SmolLM2 are the real, trained models (skipped when absent)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from seqq.errors import ModelLoadError
from seqq.models import LSTMModel, LSTMNet
from seqq.models.protocol import SequenceModel

LSTM_VOCAB = 100  # a mid-size event vocabulary, as in the paper's datasets


@dataclass(frozen=True)
class BenchModel:
    name: str
    model: SequenceModel | None  # None: skipped, `note` says why
    note: str
    large_vocab: bool = False  # a transformer LM: benchmarked with `Plan.lm_samples`


def lstm(hidden: int, vocab: int = LSTM_VOCAB, device: str | None = None) -> LSTMModel:
    torch.manual_seed(0)
    return LSTMModel(LSTMNet(vocab, hidden_size=hidden, num_layers=2, dropout=0.0), device=device)


def _lstm(hidden: int, vocab: int = LSTM_VOCAB) -> Callable[[str | None], BenchModel]:
    def build(device: str | None) -> BenchModel:
        return BenchModel(f"lstm-{hidden}", lstm(hidden, vocab, device),
                          f"2-layer LSTM, hidden {hidden}, V = {vocab}, random weights")
    return build


def _authors(dataset: str, about: str) -> Callable[[str | None], BenchModel]:
    """The paper authors' trained LSTM (`model=authors`, seqq/resources/models/authors/)."""
    def build(device: str | None) -> BenchModel:
        from seqq.models.loading import load_model

        name = f"authors-{dataset}"
        try:
            model = load_model({"type": "authors", "dataset": dataset, "device": device})
        except ModelLoadError as error:
            return BenchModel(name, None, f"skipped: {str(error).splitlines()[0]}")
        return BenchModel(name, model, f"the paper authors' trained LSTM: {about}")
    return build


def _gpt2(layers: int, width: int, vocab: int, name: str) -> Callable[[str | None], BenchModel]:
    def build(device: str | None) -> BenchModel:
        from transformers import GPT2Config, GPT2LMHeadModel

        from seqq.models.hf import HFCausalLM

        torch.manual_seed(0)
        config = GPT2Config(n_layer=layers, n_head=2, n_embd=width, vocab_size=vocab,
                            n_positions=256, bos_token_id=vocab - 1,
                            eos_token_id=vocab - 1)
        return BenchModel(name, HFCausalLM(GPT2LMHeadModel(config), None, device),
                          f"GPT-2 architecture, {layers} layers of width {width}, V = {vocab}, "
                          "random weights, through the HF adapter", large_vocab=vocab > 1000)
    return build


def smollm2(device: str | None) -> BenchModel:
    from seqq.models.loading import load_model

    try:
        return BenchModel("smollm2", load_model({"type": "smollm2", "device": device}),
                          "SmolLM2-135M (pretrained, GGUF de-quantised)", large_vocab=True)
    except ModelLoadError as error:
        return BenchModel("smollm2", None, f"skipped: {str(error).splitlines()[0]}")


ZOO: dict[str, Callable[[str | None], BenchModel]] = {
    "lstm-tiny": _lstm(8, 12),
    "lstm-128": _lstm(128),
    "lstm-512": _lstm(512),
    "authors-shakespeare": _authors("shakespeare", "one-hot input, 2×128, V = 68"),
    "authors-moocs": _authors("moocs", "one-hot input, 2×128, V = 98"),
    "gpt2-micro": _gpt2(1, 8, 40, "gpt2-micro"),
    "gpt2-tiny": _gpt2(2, 64, 50257, "gpt2-tiny"),
    "smollm2": smollm2,
}


def build(name: str, device: str | None) -> BenchModel:
    return ZOO[name](device)
