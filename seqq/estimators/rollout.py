"""Batched ancestral sampling along products: the inner loop of every sampling estimator.

Rows are independent paths, each tied to a branch (one product of one task). Per step the rows
draw one symbol, accumulate log p, log q and the importance weight log Π_k p(V_k | x_<k), and only
rows that still have restricted positions ahead pay for another model call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from seqq.estimators.batch import Batch
from seqq.models.protocol import State

Policy = Literal["proposal", "uniform"]


@dataclass
class Paths:
    tokens: Tensor  # [R, K] sampled symbols, -1 where a row had stopped
    log_p: Tensor  # [R] float64, log p of the sampled symbols
    log_q: Tensor  # [R] float64, log q of the sampled symbols under the restricted proposal
    log_weight: Tensor  # [R] float64, Σ_k log p(V_k | x_<k) = log p - log q


def sample_weighted(weights: Tensor, generator: torch.Generator) -> Tensor:
    """One draw per row with probability ∝ weights (≥ 0), by inverting a float64 CDF with one
    uniform per row; zero-weight entries are never drawn."""
    cdf = weights.double().cumsum(-1)
    u = torch.rand(len(weights), 1, generator=generator, device=weights.device, dtype=torch.float64)
    drawn = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)[:, 0]
    return drawn.clamp_max(weights.shape[-1] - 1)


def sample_categorical(logits: Tensor, generator: torch.Generator) -> Tensor:
    """One draw per row from softmax(logits); -inf entries are never drawn."""
    return sample_weighted(torch.exp(logits - logits.amax(-1, keepdim=True)), generator)


def restrict(log_probs: Tensor, domain: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Masked log-probs, log p(V_k | prefix), and weights ∝ q(· | prefix) for each row.

    Rows whose whole domain underflowed get uniform weights over the domain (their importance
    weight is zero anyway), so sampling never fails.
    """
    masked = log_probs.masked_fill(~domain, -float("inf"))
    top = masked.amax(-1, keepdim=True)
    dead = torch.isneginf(top[:, 0])
    if dead.any():
        top = torch.where(dead[:, None], torch.zeros_like(top), top)
    weights = torch.exp(masked - top)
    if dead.any():
        weights[dead] = domain[dead].to(weights.dtype)
    log_mass = top[:, 0] + weights.sum(-1).log()
    if dead.any():
        log_mass[dead] = -float("inf")
    return masked, log_mass, weights


def conditional(masked: Tensor, log_mass: Tensor) -> Tensor:
    """log q(· | prefix) = masked log p − log p(V_k | prefix), in float64; −inf for dead rows."""
    safe = torch.where(torch.isneginf(log_mass), 0.0, log_mass)
    return masked.double() - safe.double()[:, None]


def rollout(
    batch: Batch,
    branch: Tensor,
    log_probs: Tensor,
    state: State,
    start: int = 0,
    policy: Policy = "proposal",
    masks: Tensor | None = None,
    lengths: Tensor | None = None,
) -> Paths:
    """Sample positions start+1..length of every row; `log_probs`/`state` sit at depth `start`.

    `branch` indexes `masks` [N, K, V] and `lengths` [N] (the batch's products by default).
    """
    masks = batch.masks if masks is None else masks
    lengths = (batch.lengths if lengths is None else lengths)[branch]
    R, K = len(branch), masks.shape[1]
    tokens = torch.full((R, K), -1, dtype=torch.long)
    log_p, log_q, log_weight = (torch.zeros(R, dtype=torch.float64) for _ in range(3))
    rows = torch.arange(R)  # which output rows are still running
    for depth in range(start, K):
        domain = masks[branch[rows].to(batch.device), depth]
        _, log_mass, weights = restrict(log_probs, domain)
        drawn = sample_weighted(weights if policy == "proposal" else domain, batch.generator)
        picked = log_probs.gather(1, drawn[:, None])[:, 0].double().cpu()
        tokens[rows, depth] = drawn.cpu()
        log_p[rows] += picked
        log_mass = log_mass.double().cpu()
        log_q[rows] += torch.where(torch.isneginf(log_mass), 0.0, picked - log_mass)
        log_weight[rows] += log_mass
        going_on = lengths[rows] > depth + 1
        if not going_on.any():
            break
        if not going_on.all():
            keep = going_on.nonzero().flatten()
            rows, drawn = rows[keep], drawn[keep.to(drawn.device)]
            state = batch.counter.select(state, keep.to(drawn.device))
        log_probs, state = batch.counter.step(state, drawn)
    return Paths(tokens, log_p, log_q, log_weight)
