"""The one memory policy: how much one batched step may hold at once.

Every chunk and group size in the estimators derives from `seqq.models.batching.MAX_ELEMENTS`
(float32 values of one step's largest tensor): rows × V of log-probabilities, particles of a
group, twist messages (float64, so half as many), candidates laid out for a beam's choice.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from seqq.models.batching import MAX_ELEMENTS

FLOAT32_BYTES = 4
FLOAT64_BYTES = 8


def values_within(itemsize: int = FLOAT32_BYTES) -> int:
    """Values of `itemsize` bytes that one step may hold: MAX_ELEMENTS float32 values' worth."""
    return MAX_ELEMENTS * FLOAT32_BYTES // itemsize


def rows_within(width: int, itemsize: int = FLOAT32_BYTES) -> int:
    """Rows of `width` values that one step may hold (at least one)."""
    return max(1, values_within(itemsize) // max(1, width))


def consecutive_groups(loads: Sequence[int] | Tensor, limit: int) -> list[Tensor]:
    """Indices 0..n−1 cut into consecutive groups whose loads sum to at most `limit`; a load
    larger than the limit makes a group of its own."""
    groups, start, total = [], 0, 0
    loads = [int(x) for x in loads]
    for i, load in enumerate(loads):
        if i > start and total + load > limit:
            groups.append(torch.arange(start, i))
            start, total = i, 0
        total += load
    if start < len(loads):
        groups.append(torch.arange(start, len(loads)))
    return groups
