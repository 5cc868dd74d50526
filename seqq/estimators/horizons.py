"""Every horizon of a hitting time from one set of paths (paper App. G.7, Fig. 1).

Tasks that ask when one event A first happens after one history — τ(A) = k for several k — walk
the same restricted proposal: avoid A, step after step. A path drawn for the largest k has, at
each step k, the weight of its prefix times p(A | prefix), which is exactly what a run at
horizon k alone would score; so one pass at the largest horizon answers the whole family, each
k with its own mean and interval, and every model call is paid once. A method declares this
with `horizons` (importance, naive and uniform Monte Carlo); the driver groups the tasks.

Budgets: a family is the tasks of one history, event *and budget*; its pass spends that budget
once, and every task of the family reports the pass's model calls, its `extras["horizons_pass"]`
giving the family's largest K (so a sweep can count the calls once per family). Tasks whose
budgets differ — a benchmark that sizes each K's budget apart — are never merged, so a budget
meant for one K is never stretched over paths that go deeper.

This module holds the whole of it: the families (`families`), the pass a method declares
(`every_horizon`: importance, naive or uniform paths, a sample count or a budget's rounds), and
ground truth's (`every_horizon_truths`: importance paths in rounds until each horizon's relative
standard error is met); both score the paths' horizons with `horizon_means`.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from seqq.estimators.adaptive_importance import next_round
from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.budget import draw_in_rounds
from seqq.estimators.engine.rollout import Policy, sample_rows
from seqq.estimators.engine.summary import BranchResult, segment_mean
from seqq.estimators.estimate import Estimate, GroundTruth
from seqq.estimators.method import Answer, Budgets, HorizonsRun
from seqq.queries import Query


@dataclass(frozen=True)
class Families:
    """Tasks grouped into families of one (history, event): the pass each family runs, and for
    each original task its family and horizon."""

    histories: list[Sequence[int]]  # one per family
    queries: list[Query]  # τ(A) = largest K of the family
    budgets: list[int] | None  # one per family (None: no budget)
    members: list[tuple[int, int]]  # per task: (family, its K)

    def spread(self, per_horizon: Sequence[Sequence[Estimate]]) -> list[Estimate]:
        """Each task's estimate from its family's answers at its K (`per_horizon[k − 1]`)."""
        return [dataclasses.replace(
                    per_horizon[k - 1][family],
                    extras={**per_horizon[k - 1][family].extras,
                            "horizons_pass": self.queries[family].horizon})
                for family, k in self.members]


def families(histories: Sequence[Sequence[int]], queries: Sequence[Query],
             budgets: Sequence[int] | None = None) -> Families | None:
    """The tasks as families, or None where one pass would share nothing: some query is not a
    hitting time, or no family holds two horizons. A task repeated with the same K goes to a
    new family, so repeats stay independent draws."""
    if any(q.first_passage is None for q in queries):
        return None
    seen: Counter = Counter()
    index: dict[tuple, int] = {}
    grouped = Families([], [], None if budgets is None else [], [])
    for i, (history, query) in enumerate(zip(histories, queries, strict=True)):
        budget = None if budgets is None else budgets[i]
        common = (tuple(history), query.first_passage, budget)
        key = (*common, seen[(*common, query.horizon)])
        seen[(*common, query.horizon)] += 1
        if key not in index:
            index[key] = len(grouped.queries)
            grouped.histories.append(history)
            grouped.queries.append(query)
            if grouped.budgets is not None:
                grouped.budgets.append(budget)
        family = index[key]
        if query.horizon > grouped.queries[family].horizon:
            grouped.queries[family] = query
        grouped.members.append((family, query.horizon))
    if len(grouped.queries) == len(queries):
        return None
    return grouped


def every_horizon(policy: Policy) -> HorizonsRun:
    """One pass of `policy`'s paths for a batch of hitting times τ(A) = K: an answer for every
    k = 1..K, each the mean of the paths' terms for that k (`Paths.log_passage`), with the
    same estimator as a run at horizon k alone; `samples` paths per family, or rounds that
    spend its budget."""
    def run(batch: Batch, budgets: Budgets, options: Any) -> list[Answer]:
        row_branch, paths = draw_in_rounds(
            batch, budgets, options.samples,
            lambda rows, charge: sample_rows(batch, rows, policy, charge, passages=True))
        log_mean, variance, count = horizon_means(paths.log_passage, row_branch,
                                                  len(batch.branch_task))
        return [Answer(BranchResult(log_value, var, count.long(), None),
                       weights=(row_branch, log_w))
                for log_value, var, log_w in zip(log_mean.unbind(1), variance.unbind(1),
                                                 paths.log_passage.unbind(1), strict=True)]

    return run


def every_horizon_truths(family_batch: Batch, grouped: Families, tasks: torch.Tensor,
                          results: list, rel_tol: float, s_low: int, s_step: int, s_high: int,
                          bar, origin: str) -> None:
    """`rule="sampled"` for hitting times sharing a history and an event: one set of paths per
    family (`families`) answers each of its horizons, drawn in rounds until every horizon's
    relative SE is below `rel_tol`, or S_high paths."""
    F = family_batch.num_tasks
    row_branch, log_passage = [], []
    active, drawn, count = torch.arange(F), 0, min(s_low, s_high)
    members = torch.tensor(grouped.members)  # (family, K) per task
    while len(active):
        rows = active.repeat_interleave(count)  # one branch per family: its query has paths
        row_branch.append(rows)
        log_passage.append(sample_rows(family_batch, rows, "proposal", passages=True).log_passage)
        drawn += count
        log_mean, variance, _ = horizon_means(torch.cat(log_passage), torch.cat(row_branch), F)
        mine = log_mean[members[:, 0], members[:, 1] - 1]
        rel = (variance[members[:, 0], members[:, 1] - 1].sqrt() / mine.exp()).nan_to_num(0.0)
        worst = torch.zeros(F, dtype=torch.float64).scatter_reduce(0, members[:, 0], rel, "amax")
        finished = active[((worst < rel_tol) | (drawn >= s_high))[active]]
        calls = family_batch.task_calls()
        for t in (torch.isin(members[:, 0], finished)).nonzero().flatten().tolist():
            family = int(members[t, 0])
            results[int(tasks[t])] = GroundTruth(
                math.exp(mine[t]), float(mine[t]), "estimated", drawn, float(rel[t]),
                int(calls[family]), None, origin)
            bar.update()
        active = active[~torch.isin(active, finished)]
        if len(active):
            count = next_round(worst[active], rel_tol, drawn, s_step, s_high)


def horizon_means(log_passage: Tensor, row_branch: Tensor, branches: int
                  ) -> tuple[Tensor, Tensor, Tensor]:
    """Per branch and horizon k (column k − 1): the log of the mean of the paths' terms for
    τ(A) = k (`Paths.log_passage`), the variance of that mean; and the paths per branch."""
    log_mean, variance, count = zip(*(segment_mean(column, row_branch, branches)
                                      for column in log_passage.unbind(1)), strict=True)
    return torch.stack(log_mean, 1), torch.stack(variance, 1), count[0]
