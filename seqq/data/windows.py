"""Fixed-length training windows cut from whole sequences, `<BOS>` prepended (docs/decisions.md §8).

A window of length W is `<BOS>` followed by W consecutive symbols of one sequence; the model
reads window[:-1] and predicts window[1:]. Windows never cross sequences, so they inherit the
user/block split.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from seqq.errors import DataError

IGNORE = -100  # target id that cross-entropy and accuracy skip (padding of short sequences)


def window_starts(sequences: Sequence[Sequence[int]], window: int, stride: int,
                  rng: np.random.Generator | None = None) -> np.ndarray:
    """(sequence, start) pairs [N, 2]; starts are `stride` apart from a random phase when `rng`
    is given (training), from 0 otherwise (evaluation). A short sequence yields one window."""
    if window < 1 or stride < 1:
        raise DataError(f"window and stride must be positive, got {window} and {stride}")
    pairs = []
    for i, seq in enumerate(sequences):
        last = max(0, len(seq) - 1 - window)  # symbols exclude the sequence's own <BOS>
        phase = int(rng.integers(min(stride, last + 1))) if rng is not None else 0
        starts = np.arange(phase, last + 1, stride)
        pairs.append(np.stack([np.full(len(starts), i), starts], 1))
    return np.concatenate(pairs) if pairs else np.zeros((0, 2), dtype=np.int64)


def make_batch(sequences: Sequence[Sequence[int]], pairs: np.ndarray, window: int,
               bos: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs [B, W] and targets [B, W] for the windows `pairs`; short ones padded with IGNORE."""
    inputs = torch.full((len(pairs), window), bos, dtype=torch.long)
    targets = torch.full((len(pairs), window), IGNORE, dtype=torch.long)
    for row, (i, s) in enumerate(pairs):
        symbols = torch.as_tensor(sequences[i][1 + s: 1 + s + window], dtype=torch.long)
        n = len(symbols)
        targets[row, :n] = symbols
        inputs[row, 1:n] = symbols[:n - 1]
    return inputs, targets


def batches(sequences: Sequence[Sequence[int]], pairs: np.ndarray, window: int, bos: int,
            batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    for k in range(0, len(pairs), batch_size):
        yield make_batch(sequences, pairs[k:k + batch_size], window, bos)
