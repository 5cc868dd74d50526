"""Gumbel and top-k maths for sampling without replacement: stateless functions of tensors.

Stochastic beam search (Kool et al. 2019) draws the top k of logits + Gumbel noise top-down:
a node's children are perturbed and conditioned on the node's own perturbed value, so the
leaves kept are exactly the top k of independently perturbed leaves. These functions perturb,
condition and select; the trie supplies the logits (`without_replacement.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.estimators.engine.selection import top_k


@dataclass
class BlockLogits:
    """Rows of logits seen through blocks of `width` symbols: each block's logsumexp, and the
    logits at given symbols on demand. A top-k draw opens only a few blocks, so a caller that
    knows the block masses need not build whole rows (`without_replacement.residual_blocks`)."""
    log_mass: Tensor  # [n, B] float64 logsumexp of each block (−inf where it has no mass)
    width: int
    vocab_size: int
    logits_at: Callable[[Tensor], Tensor]  # [n, c] symbols → a fresh [n, c] float64 tensor

    @classmethod
    def of(cls, logits: Tensor, width: int) -> BlockLogits:
        """Blocks of a whole float64 [n, V] row (the last block may be shorter)."""
        n, V = logits.shape
        full = V // width * width
        log_mass = [_logsumexp_blocks(logits[:, :full].view(n, full // width, width))]
        if full < V:  # a shorter last block, padded with −inf
            last = logits.new_full((n, 1, width), -math.inf)
            last[:, 0, :V - full] = logits[:, full:]
            log_mass.append(_logsumexp_blocks(last))
        return cls(torch.cat(log_mass, 1), width, V, lambda symbols: logits.gather(1, symbols))


def top_truncated_gumbel(logits: Tensor, bound: Tensor, generator: torch.Generator, k: int
                         ) -> tuple[Tensor, Tensor | None]:
    """The k largest Gumbel(logits) perturbations of each row, conditioned on the row's maximum
    being `bound`, and their symbols; −inf stays −inf. The conditioning is increasing in each
    perturbed value, so it is applied to the top k only. Where k is over half the row, sorting
    would cost more than conditioning all V: then every value is returned, in symbol order
    (symbols None)."""
    if 2 * k > logits.shape[1]:
        g = perturb(logits, generator)
        return condition_on_max(g, g.amax(-1, keepdim=True), bound[:, None]), None
    return top_conditioned(BlockLogits.of(logits, block_width(logits.shape[1], k)), bound,
                           generator, k)


def top_conditioned(blocks: BlockLogits, bound: Tensor, generator: torch.Generator, k: int
                    ) -> tuple[Tensor, Tensor]:
    """The k largest perturbed values of each row of `blocks` and their symbols, conditioned
    on the row's maximum being `bound`."""
    g, token = top_perturbed(blocks, generator, k)
    return condition_on_max(g, g[:, :1], bound[:, None]), token


def perturb(logits: Tensor, generator: torch.Generator) -> Tensor:
    """logits + independent Gumbel noise, from float64 uniforms; −inf stays −inf."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=torch.float64)
    return logits - u.clamp_min_(1e-300).log_().neg_().log_()


def condition_on_max(g: Tensor, top: Tensor, bound: Tensor) -> Tensor:
    """Perturbed values `g` whose maximum along the last dim is `top`, turned into values
    conditioned on that maximum being `bound`, in the numerically stable form of Kool et al.
    (2019, App. B); −inf stays −inf, and the maximum becomes exactly `bound`."""
    gap = torch.sub(g, top).clamp_max_(0).expm1_().neg_().log_()  # log(1 − e^(g − max))
    v = torch.sub(bound, g).add_(gap)  # −inf at the max
    softplus = v.abs().neg_().exp_().log1p_()
    out = torch.sub(bound, v.clamp_min_(0)).sub_(softplus)
    return torch.where(torch.isneginf(g), -math.inf, out)


def top_perturbed(blocks: BlockLogits, generator: torch.Generator, k: int
                  ) -> tuple[Tensor, Tensor]:
    """The k largest logits + Gumbel noise of each row (float64, decreasing) and their symbols,
    distributed exactly as with independent noise on every symbol, but drawn top-down: a
    stochastic beam search (Kool et al. 2019) over a two-level tree of blocks and symbols.

    The largest perturbed value of a block is Gumbel(logsumexp of the block), so one draw per
    block gives every block's maximum. A block whose maximum is not among the row's k largest
    holds no value of the top k, so only the k best blocks are opened: their symbols are
    perturbed and conditioned on the block's maximum. Over GPT-2's vocabulary with k = 100
    that is about a tenth as many draws as symbols
    (docs/performance.md#stochastic-beam-search-and-residual-masses)."""
    W, V = blocks.width, blocks.vocab_size
    block_max = perturb(blocks.log_mass, generator)
    n, top_blocks = len(block_max), min(k, block_max.shape[1])
    block_key, block = block_max.topk(top_blocks, dim=-1)  # [n, b]
    columns = (block[..., None] * W + torch.arange(W, device=block.device)).flatten(1)
    inner = blocks.logits_at(columns.clamp_max(V - 1)).masked_fill_(columns >= V, -math.inf)
    inner = perturb(inner.view(n, top_blocks, W), generator)
    inner = condition_on_max(inner, inner.amax(-1, keepdim=True), block_key[..., None])
    top, position = inner.flatten(1).topk(k, dim=-1)
    return top, columns.gather(1, position).clamp_max_(V - 1)


def block_width(V: int, k: int) -> int:
    """A power of two near √(V/k): the row's blocks (V/W draws) and the opened blocks' symbols
    (k·W draws) then cost about the same."""
    return 2 ** min(8, max(1, round(math.log2(V / k) / 2)))


def _logsumexp_blocks(blocks: Tensor) -> Tensor:
    """log Σ exp over the last dim of [n, B, W] (−inf for blocks without mass)."""
    top = blocks.amax(-1, keepdim=True)
    top = torch.where(torch.isneginf(top), 0.0, top)
    return torch.sub(blocks, top).exp_().sum(-1).log_().add_(top[..., 0])


def top_per_group(values: Tensor, group: Tensor, count: Tensor) -> Tensor:
    """Indices of the `count[g]` largest finite values of each group g, grouped by g
    (ascending), each group's in decreasing order of value. One top-k over the candidates laid
    out one group per row, not a full sort of every value."""
    candidates = torch.isfinite(values).nonzero().flatten()
    g = group[candidates]
    if len(g) > 1 and not bool((g[1:] >= g[:-1]).all()):
        g, by_group = torch.sort(g, stable=True)
        candidates = candidates[by_group]
    ids, sizes = torch.unique_consecutive(g, return_counts=True)
    if not len(ids):
        return candidates
    start = torch.cumsum(sizes, 0) - sizes
    if len(ids) == 1:
        padded = values[candidates][None]
    else:
        row = torch.repeat_interleave(torch.arange(len(ids)), sizes)
        padded = torch.full((len(ids), int(sizes.max())), -math.inf, dtype=values.dtype)
        padded[row, torch.arange(len(g)) - start[row]] = values[candidates]
    wanted = count[ids]
    top, position = top_k(padded, min(int(wanted.max()), padded.shape[1]))
    keep = (torch.arange(top.shape[1]) < wanted[:, None]) & torch.isfinite(top)
    r, c = keep.nonzero(as_tuple=True)
    return candidates[start[r] + position[r, c]]
