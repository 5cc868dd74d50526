"""Batched ancestral sampling along products: the inner loop of every sampling estimator.

Rows are independent paths, each tied to a branch (one product of one task). Per step the rows
draw one symbol, accumulate log p, log q and the importance weight log Π_k p(V_k | x_<k), and only
rows that still have restricted positions ahead pay for another model call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import torch
from torch import Tensor

from seqq.estimators.batch import Batch
from seqq.models.protocol import State

Policy = Literal["proposal", "uniform"]


@dataclass
class Paths:
    tokens: Tensor  # [R, K] sampled symbols, -1 where a row had stopped
    log_p: Tensor  # [R] float64, log p of the sampled symbols
    log_q: Tensor  # [R] float64, log q of the sampled symbols under the proposal that drew them
    log_weight: Tensor  # [R] float64, log p - log q (Σ_k log p(V_k | x_<k) without a twist)


class Twist(Protocol):
    """Per-row log-factors log ψ(x) on the next symbol: the proposal becomes ∝ p·1[V_k]·ψ.

    Stepped alongside the model like a model state (twisted proposals, `twisted.py`)."""

    def log_values(self, depth: int) -> Tensor:
        """[R, V] float64 log ψ of every symbol at `depth` for the current rows; finite."""
        ...

    def select(self, index: Tensor) -> Twist:
        """The rows picked by `index` (a device tensor), as `SequenceModel.select`."""
        ...

    def advance(self, drawn: Tensor) -> Twist:
        """The rows after appending one drawn symbol each."""
        ...


def sample_from_cdf(cdf: Tensor, generator: torch.Generator) -> Tensor:
    """One draw per row from an unnormalised float64 CDF [R, V], one uniform per row; entries
    with zero mass are never drawn (rows with no mass at all get an arbitrary symbol)."""
    u = torch.rand(len(cdf), 1, generator=generator, device=cdf.device, dtype=torch.float64)
    drawn = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)[:, 0]
    return drawn.clamp_max(cdf.shape[-1] - 1)


def _cdf_in_place(logits: Tensor) -> tuple[Tensor, Tensor]:
    """Cumulative exp(logits − max) in float64 and the max; overwrites `logits` (saves a pass
    and an allocation on the hot path). Rows of −inf get an all-zero CDF."""
    top = logits.amax(-1, keepdim=True)
    top = torch.where(torch.isneginf(top), 0.0, top)
    return logits.sub_(top).exp_().cumsum(-1, dtype=torch.float64), top[:, 0]


def restrict(log_probs: Tensor, domain: Tensor) -> tuple[Tensor, Tensor]:
    """Masked log-probs and log p(V_k | prefix) per row (−inf where the domain has no mass)."""
    masked = torch.where(domain, log_probs, -torch.inf)
    return masked, torch.logsumexp(masked, -1)


def restricted_cdf(log_probs: Tensor, domain: Tensor) -> tuple[Tensor, Tensor]:
    """log p(V_k | prefix) and the unnormalised CDF of q(· | prefix) per row, from one pass of
    exp. A row whose domain has no mass gets −inf, so its importance weight is exactly zero; no
    data-dependent branches, so nothing here waits for the device."""
    cdf, top = _cdf_in_place(torch.where(domain, log_probs, -torch.inf))
    return top + cdf[:, -1].log(), cdf


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
    twist: Twist | None = None,
) -> Paths:
    """Sample positions start+1..length of every row; `log_probs`/`state` sit at depth `start`.

    `branch` indexes `masks` [N, K, V] and `lengths` [N] (the batch's products by default).
    A `twist` ψ (rows as `branch`) draws from q̃ ∝ p·1[V_k]·ψ instead of the restricted proposal;
    each step's weight p/q̃ is then Z/ψ(x) with Z = Σ_{V_k} p·ψ, exact whatever ψ is.
    """
    masks = batch.masks if masks is None else masks
    lengths = (batch.lengths if lengths is None else lengths)[branch]  # CPU: steers the loop
    device, (R, K) = log_probs.device, (len(branch), masks.shape[1])
    tokens = torch.full((R, K), -1, dtype=torch.long, device=device)
    log_p, log_q, log_weight = (torch.zeros(R, dtype=torch.float64, device=device)
                                for _ in range(3))
    running = torch.arange(R)  # output rows still sampling (CPU copy for control flow)
    rows, branch = running.to(device), branch.to(device)
    one_branch = bool((branch == branch[0]).all()) if R else False
    for depth in range(start, K):
        domain = (masks[branch[0], depth].expand(len(rows), -1) if one_branch
                  else masks[branch[rows], depth])
        guide = None if twist is None else twist.log_values(depth)
        log_mass, cdf = restricted_cdf(log_probs if guide is None else log_probs + guide, domain)
        if policy == "uniform":
            cdf = domain.cumsum(-1, dtype=torch.float64)
        drawn = sample_from_cdf(cdf, batch.generator)
        picked = log_probs.gather(1, drawn[:, None])[:, 0].double()
        step_weight = log_mass.double()  # log p(x)/q(x) of this step
        if guide is not None:
            step_weight = step_weight - guide.gather(1, drawn[:, None])[:, 0]
        tokens[rows, depth] = drawn
        log_p[rows] += picked
        log_q[rows] += torch.where(torch.isneginf(step_weight), 0.0, picked - step_weight)
        log_weight[rows] += step_weight
        going_on = lengths[running] > depth + 1
        if not going_on.any():
            break
        if not going_on.all():
            keep = going_on.nonzero().flatten()
            running, keep = running[keep], keep.to(device)
            rows, drawn = rows[keep], drawn[keep]
            state = batch.counter.select(state, keep)
            twist = None if twist is None else twist.select(keep)
        log_probs, state = batch.counter.step(state, drawn)
        twist = None if twist is None else twist.advance(drawn)
    return Paths(tokens.cpu(), log_p.cpu(), log_q.cpu(), log_weight.cpu())
