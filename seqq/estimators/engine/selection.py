"""The k largest entries of long rows, found among the few above a threshold.

A beam keeps the best B of its B·V candidates every step: a top-k with k ≈ 1 000 over a row of
≈ 100 000 scores, which torch runs on one core as a partial sort, a large part of a beam step's
own work beside a small model (docs/performance.md#beam-search). Most of those scores
are far below the k-th. A strided sample of the row puts a threshold just below it: the
entries above the threshold are gathered (k and a few standard deviations more), and torch's
top-k runs on those alone. The result is exact: where the sample misjudges a row (fewer than
k entries above the threshold, or too many to save anything), that call falls back to the
plain top-k.
On a GPU the plain top-k is used: it is fast there, and counting would wait for the device.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

STRIDE = 16  # one sampled score in STRIDE
MIN_WIDTH = 8192  # shorter rows: torch's top-k is cheap enough


def top_k(values: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """`values.topk(k, dim=-1)` of [r, n] rows (largest first, with their indices), faster
    where k ≪ n. Ties at the k-th value may pick other (equal) entries than torch would."""
    r, n = values.shape
    rank = threshold_rank(k)
    if values.device.type != "cpu" or r == 0 or n < MIN_WIDTH or 4 * rank * STRIDE > n:
        return values.topk(k, dim=-1)
    threshold = values[:, ::STRIDE].topk(rank, dim=-1).values[:, -1:]
    above = values >= threshold
    counts = above.sum(-1, dtype=torch.int32).long()
    if int(counts.min()) < k or 4 * int(counts.max()) > n:  # a misjudged row: no saving
        return values.topk(k, dim=-1)
    row, column = above.nonzero(as_tuple=True)
    slot = torch.arange(len(row), device=values.device) - (counts.cumsum(0) - counts)[row]
    width = int(counts.max())
    kept = values.new_full((r, width), -math.inf)
    kept[row, slot] = values[row, column]
    where = torch.zeros((r, width), dtype=torch.long, device=values.device)
    where[row, slot] = column
    top, at = kept.topk(k, dim=-1)
    return top, where.gather(1, at)


def threshold_rank(k: int) -> int:
    """The threshold's rank within the sample. The entries above the sample's j-th largest
    number about j·STRIDE, give or take √j·STRIDE: three of those above k keep a row from
    falling short but about once in a thousand rows."""
    expected = k / STRIDE
    return math.ceil(expected + 3 * math.sqrt(expected)) + 1
