"""Exact answers: enumerate every path of every query, depth-first in bounded batches.

All tasks' queries are enumerated together along their lattices: each level expands all
(prefix, symbol) pairs that do not yet decide the query, in chunks, so memory stays bounded by
chunk × depth rows while every model call is a big batch across tasks. Cost per task: 1 plus
the number of prefixes that still restrict the future (`tree_calls`). The exact restricted
entropy H(q) comes out of the same pass.

Why not the prefix trie: sampling without replacement through the trie reaches the same
answers once it exhausts Q (`wor` with enough draws), but keeps every node and its [V] row;
this enumerator keeps only the current path of chunks, which is what ground truth at millions
of calls per query needs.
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
        _enumerate(batch, torch.arange(N), batch.branch_root, batch.root_log_probs[tasks],
                   batch.counter.select(batch.root_state, tasks), zero, zero.clone(),
                   log_value, entropy)
    no_gap = torch.full_like(log_value, -math.inf)
    return to_estimates(batch, "exact", BranchResult(log_value, None, None, entropy, log_value,
                                                     no_gap), False)


def _enumerate(batch: Batch, branch: Tensor, nodes: Tensor, log_probs: Tensor, state: State,
               log_p: Tensor, log_q: Tensor, log_value: Tensor, entropy: Tensor) -> None:
    """Add the log p and Σ q·(−log q) of all completions below the given prefixes (rows, each
    of its own branch, at lattice `nodes`) into `log_value` and `entropy` per branch. A symbol
    leading to a free lattice node completes a path; the others are expanded."""
    N = len(log_value)
    masked, log_mass = restrict(log_probs, batch.domain(nodes))
    joint_p = log_p.to(masked.device)[:, None] + masked  # float64, as log_p is
    joint_q = log_q.to(masked.device)[:, None] + conditional(masked, log_mass)
    children = batch.lattice.child_table(nodes)  # [n, V], −1 where not allowed
    ends = (children >= 0) & batch.lattice.free[children.clamp_min(0)]
    if ends.any():
        on_device = ends.to(masked.device)
        q = torch.where(on_device, joint_q.exp(), 0.0)
        ent = torch.where(q > 0, -q * joint_q, 0.0).sum(-1).cpu()
        entropy.index_add_(0, branch, ent)
        totals = torch.logsumexp(torch.where(on_device, joint_p, -torch.inf), -1).cpu()
        log_value.copy_(torch.logaddexp(log_value, group_logsumexp(totals, branch, N)))
    rows, tokens = ((children >= 0) & ~ends).nonzero(as_tuple=True)
    if not len(rows):
        return
    chunk = max(1, CHUNK_ELEMENTS // batch.vocab_size)
    for r, t in zip(rows.split(chunk), tokens.split(chunk), strict=True):
        dr, dt = r.to(masked.device), t.to(masked.device)
        child_probs, child_state = batch.counter.step(state, dt, rows=dr)
        _enumerate(batch, branch[r], children[r, t], child_probs, child_state,
                   joint_p[dr, dt].cpu(), joint_q[dr, dt].cpu(), log_value, entropy)
