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
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.errors import BudgetError
from seqq.estimators.engine.batch import Batch, tree_calls
from seqq.estimators.engine.memory import rows_within
from seqq.estimators.engine.rollout import domain_log_mass
from seqq.estimators.engine.summary import BranchResult, group_logsumexp
from seqq.estimators.method import POSITIVE, Answer, Budgets, Guarantee, Method, Options, option
from seqq.models.counting import OwnedState

DEFAULT_MAX_CALLS = 10_000_000


@dataclass(frozen=True)
class ExactOptions(Options):
    max_calls: int = option(DEFAULT_MAX_CALLS, POSITIVE, "refuse a query costing more calls")


def exact(batch: Batch, budgets: Budgets, options: ExactOptions, twist: None) -> Answer:
    """Exact p(Q) and H(q) for every task by enumeration. Its cost is known in advance, so a
    query that would need more than `max_calls` model calls is refused instead of hanging."""
    max_calls = options.max_calls
    cost = tree_calls(batch)
    if (cost > max_calls).any():
        worst = cost.max().item()
        raise BudgetError(f"enumerating this query costs {worst:.3g} model calls, more "
                          f"than max_calls={max_calls:,}; use an estimator (e.g. 'importance' or "
                          f"'hybrid') or pass a larger max_calls=")
    N = len(batch.branch_task)
    log_value = torch.full((N,), -math.inf, dtype=torch.float64)
    entropy = torch.zeros(N, dtype=torch.float64)
    if N:
        tasks = batch.branch_task.to(batch.device)
        zero = torch.zeros(N, dtype=torch.float64)
        _enumerate(batch, torch.arange(N), batch.branch_root, batch.root_log_probs[tasks],
                   [batch.counter.select(batch.root_state, tasks)], zero, zero.clone(),
                   log_value, entropy)
    no_gap = torch.full_like(log_value, -math.inf)
    return Answer(BranchResult(log_value, None, None, entropy, log_value, no_gap))


def _enumerate(batch: Batch, branch: Tensor, nodes: Tensor, log_probs: Tensor,
               states: list[OwnedState], log_p: Tensor, log_q: Tensor, log_value: Tensor,
               entropy: Tensor) -> None:
    """Add the log p and Σ q·(−log q) of all completions below the given prefixes (rows, each
    of its own branch, at lattice `nodes`; their model states are the row chunks `states`,
    in order) into `log_value` and `entropy` per branch. A symbol leading to a free lattice
    node completes a path; the others are expanded. Joint log p and log q are gathered for
    those (prefix, symbol) pairs only, never built over [n, V]; log p(V_k | prefix) is the
    mass left after a few excluded symbols where the lattice lists them (a model's rows are
    normalised, so H(q) moves by at most its normalisation error, ~1e-7 in float32)."""
    device = log_probs.device
    log_mass = domain_log_mass(log_probs, batch.domain(nodes, sparse=True)).double().cpu()
    log_mass = torch.where(torch.isneginf(log_mass), 0.0, log_mass)  # dead rows have no pairs
    children = batch.lattice.child_table(nodes)  # [n, V], −1 where not allowed
    ends = (children >= 0) & batch.lattice.free[children.clamp_min(0)]

    def joint(rows: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor]:
        step = log_probs[rows.to(device), tokens.to(device)].double().cpu()
        return log_p[rows] + step, log_q[rows] + step - log_mass[rows]

    rows, tokens = ends.nonzero(as_tuple=True)
    if len(rows):
        joint_p, joint_q = joint(rows, tokens)
        q = joint_q.exp()
        entropy.index_add_(0, branch[rows], torch.where(q > 0, -q * joint_q, 0.0))
        log_value.copy_(torch.logaddexp(log_value, group_logsumexp(joint_p, branch[rows],
                                                                    len(log_value))))
    rows, tokens = ((children >= 0) & ~ends).nonzero(as_tuple=True)
    if not len(rows):
        return
    sizes = torch.tensor([len(state.owners) for state in states])
    starts = sizes.cumsum(0) - sizes
    chunk = rows_within(batch.vocab_size)
    for r, t in zip(rows.split(chunk), tokens.split(chunk), strict=True):
        source = torch.searchsorted(starts, r, right=True) - 1  # r is sorted: so is its source
        child_probs, child_states = batch.counter.step_parts(
            states, t.to(device), (r - starts[source]).to(device), source)
        _enumerate(batch, branch[r], children[r, t], child_probs, child_states, *joint(r, t),
                   log_value, entropy)


METHODS = (Method(
    name="exact", run=exact, options=ExactOptions, guarantee=Guarantee.EXACT,
    certain_bounds=True, takes_budget=False, cost_cap="max_calls"),)
