"""Exact answers: enumerate every path of every product, depth-first in bounded batches.

Each level expands all (prefix, symbol) pairs of the domain in chunks, so memory stays bounded
by chunk × depth rows while every model call is a big batch. Cost per product:
1 + Σ_{d<L} Π_{k≤d} |V_k| calls. The exact restricted entropy H(q) comes out of the same pass.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from seqq.estimators.batch import Batch
from seqq.estimators.estimate import Estimate
from seqq.estimators.rollout import conditional, restrict
from seqq.estimators.summary import BranchResult, to_estimates
from seqq.models.protocol import State

CHUNK_ELEMENTS = 2**24  # rows × V per expansion step


def exact(batch: Batch, budgets=None) -> list[Estimate]:
    """Exact p(Q) and H(q) for every task by enumeration (no budget: it costs what it costs)."""
    N = len(batch.branch_task)
    log_value = torch.full((N,), -math.inf, dtype=torch.float64)
    entropy = torch.zeros(N, dtype=torch.float64)
    for b in range(N):
        task = batch.branch_task[b : b + 1].to(batch.device)
        state = batch.counter.select(batch.root_state, task)
        zero = torch.zeros(1, dtype=torch.float64)
        log_value[b], entropy[b] = _enumerate(batch, b, batch.root_log_probs[task], state, zero,
                                              zero, 0)
    no_gap = torch.full_like(log_value, -math.inf)
    return to_estimates(batch, "exact", BranchResult(log_value, None, None, entropy, log_value,
                                                     no_gap), False)


def _enumerate(batch: Batch, b: int, log_probs: Tensor, state: State, log_p: Tensor,
               log_q: Tensor, depth: int) -> tuple[float, float]:
    """(log p, Σ q·(−log q)) of all completions below the given prefixes (rows) of branch b."""
    domain = batch.masks[b, depth].expand_as(log_probs)
    masked, log_mass = restrict(log_probs, domain)
    joint_p = log_p.to(masked.device)[:, None] + masked.double()
    joint_q = log_q.to(masked.device)[:, None] + conditional(masked, log_mass)
    if depth + 1 == int(batch.lengths[b]):
        q = joint_q.exp()
        ent = torch.where(q > 0, -q * joint_q, 0.0).sum().item()
        return torch.logsumexp(joint_p.flatten(), 0).item(), ent
    rows, tokens = domain.nonzero(as_tuple=True)
    chunk = max(1, CHUNK_ELEMENTS // batch.vocab_size)
    logs, ent = [], 0.0
    for r, t in zip(rows.split(chunk), tokens.split(chunk), strict=True):
        child_probs, child_state = batch.counter.step(batch.counter.select(state, r), t)
        lp, h = _enumerate(batch, b, child_probs, child_state, joint_p[r, t].cpu(),
                           joint_q[r, t].cpu(), depth + 1)
        logs.append(lp)
        ent += h
    return torch.logsumexp(torch.tensor(logs, dtype=torch.float64), 0).item(), ent

