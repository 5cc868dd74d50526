"""Systematic sampling as counts: how many of d draws land on each item, never the draws themselves.

SMC and randomized beam search only need how often each item (a prefix, a next symbol) is drawn:
equal draws are one prefix and cost one model call. Systematic sampling puts d evenly spaced
points (u + j)/d, u ~ U[0, 1), on the cumulative distribution; item i gets
⌈d·F_i − u⌉ − ⌈d·F_{i−1} − u⌉ of them. Its expected count is exactly d·w_i/Σw (what unbiased
estimators need) and it is within one of that, so it has less variance than multinomial draws.
"""

from __future__ import annotations

import torch
from torch import Tensor


def systematic_counts(cdf: Tensor, draws: Tensor, generator: torch.Generator) -> Tensor:
    """Counts [m, n] of `draws[r]` systematic draws from row r of an unnormalised float64 CDF
    [m, n]; items with zero mass get none, and rows with no mass get none at all."""
    total = cdf[:, -1:]
    d = torch.where(total > 0, draws.to(cdf.device, cdf.dtype)[:, None], 0.0)
    u = torch.rand(len(cdf), 1, generator=generator, device=generator.device,
                   dtype=cdf.dtype).to(cdf.device)
    share = torch.where(total > 0, cdf / total, 0.0)
    below = torch.minimum((d * share - u).ceil().clamp_min(0), d)  # points left of each F_i
    below[:, -1:] = d  # F_n = 1 exactly, whatever the rounding of the cumulative sum
    return torch.diff(below, dim=-1, prepend=torch.zeros_like(d)).long()


def resample_groups(log_weights: Tensor, sizes: Tensor, draws: Tensor,
                    generator: torch.Generator) -> Tensor:
    """New counts of the items of consecutive groups (`sizes[g]` items each, CPU): group g
    draws `draws[g]` of its items systematically in proportion to exp(log_weights)."""
    group = torch.repeat_interleave(torch.arange(len(sizes)), sizes)
    column = torch.arange(len(group)) - (torch.cumsum(sizes, 0) - sizes)[group]
    padded = torch.full((len(sizes), int(sizes.max())), -torch.inf, dtype=torch.float64)
    padded[group, column] = log_weights.double()
    top = padded.amax(-1, keepdim=True)
    weights = (padded - torch.where(torch.isfinite(top), top, 0.0)).exp()
    return systematic_counts(weights.cumsum(-1), draws, generator)[group, column]
