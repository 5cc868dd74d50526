"""Held-out log-likelihood of any `SequenceModel`, on the windows the LSTMs are evaluated on, so
models of different families (LSTM, HPYP, the authors' LSTMs) are compared on the same symbols."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from seqq.models.protocol import SequenceModel
from seqq.training.trainer import eval_pairs


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
