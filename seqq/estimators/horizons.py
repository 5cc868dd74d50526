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
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from seqq.estimators.estimate import Estimate
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
