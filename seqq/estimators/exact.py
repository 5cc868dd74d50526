"""Exact answers: enumerate every path of every product, depth-first in bounded batches.

All branches (products of all tasks) are enumerated together: each level expands all
(prefix, symbol) pairs of the rows' domains in chunks, so memory stays bounded by
chunk × depth rows while every model call is a big batch across tasks. Cost per product:
1 + Σ_{d<L} Π_{k≤d} |V_k| calls. The exact restricted entropy H(q) comes out of the same pass.
Sampling without replacement through the prefix trie reaches the same answers once it exhausts
Q (`wor` with enough draws), but keeps every node; this enumerator keeps only the current path
of chunks, which is what ground truth at millions of calls per query needs.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from seqq.errors import BudgetError
from seqq.estimators.batch import Batch, tree_calls
from seqq.estimators.estimate import Estimate
from seqq.estimators.rollout import conditional, restrict
from seqq.estimators.summary import BranchResult, group_logsumexp, to_estimates
from seqq.models.protocol import State

CHUNK_ELEMENTS = 2**24  # rows × V per expansion step
DEFAULT_MAX_CALLS = 10_000_000


def exact(batch: Batch, budgets=None, max_calls: int = DEFAULT_MAX_CALLS) -> list[Estimate]:
    """Exact p(Q) and H(q) for every task by enumeration. Its cost is known in advance, so a
    query that would need more than `max_calls` model calls is refused instead of hanging."""
    cost = tree_calls(batch)
    if (cost > max_calls).any():
        worst = cost.max().item()
        raise BudgetError(f"exact enumeration of this query costs {worst:.3g} model calls, more "
                          f"than max_calls={max_calls:,}; use an estimator (e.g. 'importance' or "
                          f"'hybrid') or pass a larger max_calls=")
    N = len(batch.branch_task)
    log_value = torch.full((N,), -math.inf, dtype=torch.float64)
    entropy = torch.zeros(N, dtype=torch.float64)
    if N:
        tasks = batch.branch_task.to(batch.device)
        zero = torch.zeros(N, dtype=torch.float64)
        _enumerate(batch, torch.arange(N), batch.root_log_probs[tasks],
                   batch.counter.select(batch.root_state, tasks), zero, zero.clone(), 0,
                   log_value, entropy)
    no_gap = torch.full_like(log_value, -math.inf)
    return to_estimates(batch, "exact", BranchResult(log_value, None, None, entropy, log_value,
                                                     no_gap), False)


def _enumerate(batch: Batch, branch: Tensor, log_probs: Tensor, state: State, log_p: Tensor,
               log_q: Tensor, depth: int, log_value: Tensor, entropy: Tensor) -> None:
    """Add the log p and Σ q·(−log q) of all completions below the given prefixes (rows, each
    of its own branch) into `log_value` and `entropy` per branch."""
    N = len(log_value)
    domain = batch.masks[branch.to(batch.device), depth]
    masked, log_mass = restrict(log_probs, domain)
    joint_p = log_p.to(masked.device)[:, None] + masked.double()
    joint_q = log_q.to(masked.device)[:, None] + conditional(masked, log_mass)
    last = batch.lengths[branch] == depth + 1
    if last.any():
        rows = last.nonzero().flatten().to(masked.device)
        q = joint_q[rows].exp()
        ent = torch.where(q > 0, -q * joint_q[rows], 0.0).sum(-1).cpu()
        entropy.index_add_(0, branch[last], ent)
        totals = torch.logsumexp(joint_p[rows], -1).cpu()
        log_value.copy_(torch.logaddexp(log_value, group_logsumexp(totals, branch[last], N)))
    going = (~last).nonzero().flatten().to(domain.device)
    if not len(going):
        return
    rows, tokens = domain[going].nonzero(as_tuple=True)
    rows = going[rows]
    chunk = max(1, CHUNK_ELEMENTS // batch.vocab_size)
    for r, t in zip(rows.split(chunk), tokens.split(chunk), strict=True):
        child_probs, child_state = batch.counter.step(batch.counter.select(state, r), t)
        _enumerate(batch, branch[r.cpu()], child_probs, child_state, joint_p[r, t].cpu(),
                   joint_q[r, t].cpu(), depth + 1, log_value, entropy)
