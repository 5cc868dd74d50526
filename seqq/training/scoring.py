"""Held-out log-likelihood of any `SequenceModel`, on the windows the LSTMs are evaluated on, so
models of different families (LSTM, HPYP, the authors' LSTMs) are compared on the same symbols;
and a pretrained LM's next-token accuracy and perplexity (`score_lm`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from seqq.data.base import SequenceDataset
from seqq.errors import DataError
from seqq.models.protocol import SequenceModel
from seqq.training.trainer import eval_pairs

if TYPE_CHECKING:
    from seqq.models.hf import HFCausalLM  # transformers: only where an LM is scored


def held_out_windows(sequences: Sequence[Sequence[int]], window: int, bos: int | None,
                     limit: int = 10**9) -> list[list[int]]:
    """Non-overlapping windows of `window` symbols, each after a fresh `<BOS>` as in training;
    without a `<BOS>` the whole sequences."""
    if bos is None:
        return [list(s) for s in sequences if len(s) > 1]
    return [[bos, *sequences[i][1 + s:1 + s + window]]
            for i, s in eval_pairs(sequences, window, limit).tolist()]


@torch.inference_mode()
def nats_per_symbol(model: SequenceModel, windows: Sequence[Sequence[int]],
                    batch_size: int = 1024) -> tuple[float, int]:
    """Mean −log p(x_t | x_<t) over every symbol after each window's first, and their count."""
    total, count = 0.0, 0
    for k in range(0, len(windows), batch_size):
        chunk = windows[k:k + batch_size]
        T = max(len(w) for w in chunk)
        symbols = torch.full((len(chunk), T), -1, dtype=torch.long)
        for i, w in enumerate(chunk):
            symbols[i, :len(w)] = torch.as_tensor(list(w), dtype=torch.long)
        log_probs, state = model.initial_state([w[:1] for w in chunk])
        for t in range(1, T):
            real = symbols[:, t] >= 0
            picked = log_probs.double().cpu().gather(1, symbols[:, t:t + 1].clamp_min(0))[:, 0]
            total -= picked[real].sum().item()
            count += int(real.sum())
            if t + 1 < T:
                log_probs, state = model.step(state, symbols[:, t].clamp_min(0).to(log_probs.device))
    return total / max(count, 1), count


@torch.inference_mode()
def score_lm(lm: HFCausalLM, ds: SequenceDataset, window: int, limit: int) -> dict:
    """Next-token accuracy and perplexity of a pretrained LM on `limit` test blocks of `window`
    tokens: a check that the right weights and tokenizer were loaded."""
    tokens = len(lm.tokenizer) if lm.tokenizer is not None else lm.vocab_size
    if ds.bos_id is not None or ds.vocab_size != tokens:
        raise DataError(f"{ds.name} ({ds.vocab_size} symbols) is not tokenised for this LM "
                        f"({tokens} tokens); use dataset=wikitext with the model's tokenizer, "
                        "e.g. dataset.options.tokenizer=smollm2")
    window = min(window, lm.context_length)
    blocks = [ds.test[i][s:s + window] for i, s in eval_pairs(ds.test, window - 1, limit)]
    nll, correct, count = 0.0, 0, 0
    for block in blocks:
        logits = lm.model(torch.tensor([block], device=lm.device)).logits[0, :-1].float()
        target = torch.tensor(block[1:], device=lm.device)
        nll += torch.nn.functional.cross_entropy(logits, target, reduction="sum").item()
        correct += int((logits.argmax(-1) == target).sum())
        count += len(target)
    return dict(test_blocks=len(blocks), tokens_scored=count, accuracy=correct / count,
                perplexity=math.exp(nll / count))
