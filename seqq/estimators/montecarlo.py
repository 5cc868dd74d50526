"""Sampling estimators: importance sampling under the restricted proposal (Eq. 5-9), drawn
through the prefix trie; naive Monte Carlo from p and uniform Monte Carlo over Q (Eq. 7), rolled
out without a trie (their paths ignore q, so a cached q-tree would not serve them).
All tasks' samples run in shared batches."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from seqq.estimators.allowance import Allowance, Charge
from seqq.estimators.batch import Batch
from seqq.estimators.draws import DEFAULT_SAMPLES, budget_rounds, cost_per_draw, iid_draws
from seqq.estimators.estimate import Estimate
from seqq.estimators.rollout import Paths, Policy, rollout
from seqq.estimators.summary import BranchResult, segment_average, segment_mean, to_estimates
from seqq.estimators.trie import Trie
from seqq.estimators.twisted import Messages, with_surrogate
from seqq.models.automaton import ContextAutomaton
from seqq.models.batching import map_row_chunks

ROW_ELEMENTS = 2**26  # rows × V per batched step at most (union.py's chunks; sample_rows' cap is
# the same, through `chunk_rows`)


def sample_rows(batch: Batch, row_branch: Tensor, policy: Policy,
                charge: Charge | None = None) -> Paths:
    """Roll out every row from the root of its branch, in row chunks sized for the device
    (which also bound memory; `seqq.models.batching`). With a `charge`, calls are paid in
    draw order (rows past their task's cut stop unaccepted)."""
    def run(part: Tensor) -> Paths:
        rows = row_branch[part]
        tasks = batch.branch_task[rows].to(batch.device)
        state = batch.counter.select(batch.root_state, tasks)
        return rollout(batch, batch.branch_root[rows], batch.root_log_probs[tasks], state,
                       policy, None if charge is None else charge.select(part))

    return Paths.cat(map_row_chunks(batch.counter, torch.arange(len(row_branch)), run))


def streamed_draws(batch: Batch, budgets: Sequence[int] | None, samples: int | None,
                   method: str, policy: Policy) -> tuple[Tensor, Paths]:
    """Rollouts per task under `policy` (`draw_in_rounds`)."""
    return draw_in_rounds(batch, budgets, samples, method,
                          lambda rows, charge: sample_rows(batch, rows, policy, charge))


def draw_in_rounds(batch: Batch, budgets: Sequence[int] | None, samples: int | None,
                   method: str, draw: Callable[[Tensor, Charge | None], Paths]
                   ) -> tuple[Tensor, Paths]:
    """Independent paths per branch, `draw(row_branch, charge)` rolling them out: `samples`
    each, or, with a budget, `budget_rounds` until it is spent (paths decided early cost less,
    so later rounds buy more; `samples` then caps the count). Returns each kept path's branch
    and the paths."""
    if budgets is None:
        rows = _per_branch_samples(batch, torch.full((batch.num_tasks,),
                                                     samples or DEFAULT_SAMPLES))
        return rows, draw(rows, None)
    cost = _calls_per_sample(batch)
    needs = torch.zeros(batch.num_tasks, dtype=torch.bool).index_fill_(0, batch.branch_task, True)

    def draw_round(per_task: Tensor, allowance: Allowance) -> tuple[Tensor, Paths]:
        rows = _per_branch_samples(batch, per_task)
        charge = allowance.charge(rows, batch.branch_task)
        paths = draw(rows, charge)
        keep = charge.kept()
        return rows[keep], paths.take(keep)

    parts = budget_rounds(batch, budgets, samples, cost, needs, lambda t: (
        f"{method}: a budget of {int(budgets[t])} model calls cannot buy one sample "
        f"(that needs {1 + int(cost[t])}); raise the budget"), draw_round)
    return (torch.cat([r for r, _ in parts]) if parts else torch.zeros(0, dtype=torch.long),
            Paths.cat([p for _, p in parts]))


def _per_branch_samples(batch: Batch, per_task: Tensor) -> Tensor:
    return torch.repeat_interleave(torch.arange(len(batch.branch_task)),
                                   per_task[batch.branch_task])


def _calls_per_sample(batch: Batch) -> Tensor:
    """At most (effective length − 1) calls buy one sample of a task (0 if its query is empty)."""
    return torch.zeros(batch.num_tasks, dtype=torch.long).index_add_(
        0, batch.branch_task, batch.lengths - 1)


def importance(batch: Batch, budgets: Sequence[int] | None, samples: int | None = None
               ) -> list[Estimate]:
    """p̂ = mean p(x)/q(x), x ~ q i.i.d.; the weight is Π_k p(V_k | x_<k).

    Paths are drawn through the prefix trie, so a prefix shared by several samples costs one
    call. `samples` per query (default 1000); with a budget, draws continue in rounds until
    the budget is spent (`samples` then caps the count), so duplicates buy extra samples.
    """
    return _trie_importance(batch, budgets, samples, "importance", None)


def twisted(batch: Batch, budgets: Sequence[int] | None, samples: int | None = None,
            surrogate: ContextAutomaton | None = None) -> list[Estimate]:
    """`importance` from the twisted proposal q̃ ∝ p·1[allowed]·β (twisted.py): the surrogate's
    chance of completing the query steers every step; weights p/q̃ stay exact. Drawn through
    the prefix trie like `importance`, so a budget buys the same or more samples."""
    return with_surrogate(batch, budgets, surrogate, "twisted", lambda part, part_budgets, m:
                          _trie_importance(part, part_budgets, samples, "twisted", m))


def _trie_importance(batch: Batch, budgets: Sequence[int] | None, samples: int | None,
                     method: str, messages: Messages | None) -> list[Estimate]:
    trie = Trie(batch, messages)
    eligible = torch.ones(len(batch.branch_task), dtype=torch.bool)
    draws = iid_draws(trie, budgets, samples, "proposal", eligible, lambda t: (
        f"{method}: a budget of {int(budgets[t])} model calls cannot buy one sample "
        f"(that needs {1 + int(cost_per_draw(trie, eligible)[t])}); raise the budget"))
    N = len(batch.branch_task)
    log_value, variance, count = segment_mean(draws.log_w, draws.row_branch, N)
    # −log q̃ averages to H(q) only for the untwisted proposal
    entropy = segment_average(-draws.log_q, draws.row_branch, N) if messages is None else None
    return to_estimates(batch, method,
                        BranchResult(log_value, variance, count.long(), entropy), False)


def uniform(batch: Batch, budgets: Sequence[int] | None, samples: int | None = None
            ) -> list[Estimate]:
    """p̂ = |Q| · mean p(x), x ~ U(Q) (Eq. 7), with |Q| counted on the query's lattice up to
    the point where each path is decided; unbiased but may exceed 1."""
    row_branch, paths = streamed_draws(batch, budgets, samples, "uniform", "uniform")
    # a uniform path's weight p(x)/q(x) is p(x)·|Q below its root|
    log_value, variance, count = segment_mean(paths.log_weight, row_branch,
                                              len(batch.branch_task))
    return to_estimates(batch, "uniform", BranchResult(log_value, variance, count.long(), None),
                        False)


def naive(batch: Batch, budgets: Sequence[int] | None, samples: int | None = None
          ) -> list[Estimate]:
    """p̂ = mean 1[x ∈ Q], x ~ p, each path sampled only until the query is decided; zero for
    rare queries."""
    row_branch, paths = streamed_draws(batch, budgets, samples, "naive", "model")
    log_w = torch.where(paths.accepted, 0.0, -torch.inf).double()
    log_value, variance, count = segment_mean(log_w, row_branch, len(batch.branch_task))
    return to_estimates(batch, "naive", BranchResult(log_value, variance, count.long(), None),
                        False)
