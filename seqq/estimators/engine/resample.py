"""Systematic sampling as counts: how many of d draws land on each item, never the draws themselves.

SMC and randomized beam search only need how often each item (a prefix, a next symbol) is drawn:
equal draws are one prefix and cost one model call. Systematic sampling puts d evenly spaced
points (u + j)/d, u ~ U[0, 1), on the cumulative distribution; item i gets
⌈d·F_i − u⌉ − ⌈d·F_{i−1} − u⌉ of them. Its expected count is exactly d·w_i/Σw (what unbiased
estimators need) and it is within one of that, so it has less variance than multinomial draws.
The points are located on each row's blocked CDF (`Categorical.systematic`), never a V-wide one.
"""

from __future__ import annotations

import torch
from torch import Tensor

from seqq.estimators.engine.categorical import Categorical


def resample_groups(log_weights: Tensor, sizes: Tensor, draws: Tensor,
                    generator: torch.Generator) -> Tensor:
    """New counts of the items of consecutive groups (`sizes[g]` items each, CPU): group g
    draws `draws[g]` of its items systematically in proportion to exp(log_weights)."""
    group = torch.repeat_interleave(torch.arange(len(sizes)), sizes)
    column = torch.arange(len(group)) - (torch.cumsum(sizes, 0) - sizes)[group]
    padded = torch.full((len(sizes), int(sizes.max())), -torch.inf, dtype=torch.float64)
    padded[group, column] = log_weights.double()
    g, item, count = Categorical.from_logits(padded).systematic(draws, generator)
    counts = torch.zeros_like(padded, dtype=torch.long)
    counts[g, item] = count
    return counts[group, column]
