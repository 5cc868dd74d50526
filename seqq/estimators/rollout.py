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


def sample_categorical(logits: Tensor, generator: torch.Generator) -> Tensor:
    """One draw per row from softmax(logits) by inverting the CDF (one uniform per row, float64
    sums); -inf entries are never drawn."""
    probs = torch.softmax(logits.double(), dim=-1)
    cdf = probs.cumsum(-1)
    u = torch.rand(len(logits), 1, generator=generator, device=logits.device, dtype=torch.float64)
    drawn = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)[:, 0]
    return drawn.clamp_max(logits.shape[-1] - 1)


def restrict(log_probs: Tensor, domain: Tensor) -> tuple[Tensor, Tensor]:
    """Masked logits and log p(V_k | prefix) for each row; rows whose whole domain underflowed
    fall back to uniform sampling within the domain (their weight is then zero anyway)."""
    masked = log_probs.masked_fill(~domain, -float("inf"))
    log_mass = torch.logsumexp(masked, dim=-1)
    dead = torch.isneginf(log_mass)
    if dead.any():
        masked[dead] = torch.zeros_like(masked[dead]).masked_fill(~domain[dead], -float("inf"))
    return masked, log_mass


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
        masked, log_mass = restrict(log_probs, domain)
        logits = masked if policy == "proposal" else torch.zeros_like(masked).masked_fill(
            ~domain, -float("inf"))
        drawn = sample_categorical(logits, batch.generator)
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
