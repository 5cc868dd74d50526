"""`torch.unique(values, return_inverse=True)` for ids of a known range, by counting.

A trie walk asks every depth which nodes its walkers stand on, and which (node, symbol)
children they step to: tens of thousands of walkers on a few hundred nodes near the root.
torch sorts to answer that, which costs as much for ids on a few nodes as for distinct ones. Where
the ids lie in a range not much wider than their number, counting them in a table of that range
gives the same answer in one linear pass (docs/performance.md#ground-truth).
"""

from __future__ import annotations

import torch
from torch import Tensor

DENSE_RANGE = 2  # ids counted in a table while their range is at most this many times their number


def distinct(values: Tensor, bound: int) -> tuple[Tensor, Tensor]:
    """(the distinct values, sorted; the index of each value among them) for `values` in
    [0, bound): exactly `torch.unique(values, return_inverse=True)`. CPU int64 ids in a range
    of at most DENSE_RANGE × their number are counted in a table, others sorted."""
    if (values.device.type != "cpu" or values.dtype != torch.long
            or bound > DENSE_RANGE * len(values)):
        return torch.unique(values, return_inverse=True)
    seen = torch.bincount(values, minlength=bound) > 0
    position = seen.cumsum(0) - 1
    return seen.nonzero().flatten(), position[values]
