"""`method="auto"`: per task, the method the calibration benchmark found calibrated for the
query's horizon and budget and for whether a surrogate is at hand, and why in words.

In order: the exact answer where enumerating the query costs no more than the budget (priced
from the query's lattice after encoding the history, one call); else, with a surrogate, SMC
twisted by it; else sampling without replacement up to `LONG_HORIZON` steps from `WOR_BUDGET`
calls, and SMC otherwise (benchmarks/RESULTS.md (h) and (j), docs/decisions.md §39).
`seqq ask --method auto` is this with one history; each estimate's `note` carries the reason
its method line prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from seqq.errors import QueryError
from seqq.estimators.engine.batch import prepare, tree_calls
from seqq.estimators.estimate import Estimate
from seqq.estimators.registry import exact_method
from seqq.models.automaton import ContextAutomaton
from seqq.models.protocol import SequenceModel
from seqq.queries import Query

AUTO = "auto"
AUTO_EXACT_CALLS = 20_000  # without a budget: enumerate up to this many calls …
AUTO_BUDGET = 2_000  # … else estimate within this many
LONG_HORIZON = 10  # beyond this many steps SMC rather than sampling without replacement …
WOR_BUDGET = 1_000  # … and below this many calls (a WOR head too small to pay for itself)
PRICING_CALLS = 1  # encoding the history to price enumeration (counted in model_calls)


@dataclass(frozen=True)
class Pick:
    """A task's method, whether it is twisted by the surrogate, and why."""

    method: str
    twisted: bool
    why: str


def choose(horizon: int, enumeration_calls: float, limit: int, surrogate: bool) -> Pick:
    """The method for one task: exact within `limit` calls (the pricing call included), else by
    surrogate and horizon."""
    if enumeration_calls + PRICING_CALLS <= limit:
        return Pick(exact_method().name, False,
                    f"enumerating every continuation fits the {limit:,} calls allowed")
    cost = (f"{enumeration_calls:,.0f}" if enumeration_calls < 1e9
            else f"{enumeration_calls:.1e}".replace("e+", "e"))
    priced = f"enumeration would cost {cost} calls, more than {limit:,}; "
    if surrogate:
        return Pick("smc", True, priced + "SMC twisted by the surrogate resamples toward the "
                    "paths that can still satisfy the query: the most accurate on rare events "
                    "in benchmarks/RESULTS.md (j), and the best calibrated in (h)")
    if horizon > LONG_HORIZON:
        return Pick("smc", False, priced + f"K = {horizon} > {LONG_HORIZON}: SMC resamples "
                    "toward the paths that can still satisfy the query, the most accurate "
                    "method on rare long-horizon events in benchmarks/RESULTS.md (j)")
    if limit < WOR_BUDGET:
        return Pick("smc", False, priced + f"{limit:,} calls < {WOR_BUDGET:,}: too few for "
                    "sampling without replacement's head to pay; SMC's intervals covered more "
                    "often and were flagged less at 200 calls in benchmarks/RESULTS.md (h)")
    return Pick("wor", False, priced + f"K = {horizon} ≤ {LONG_HORIZON}: sampling without "
                "replacement is unbiased, with bounds that hold with certainty, and exact once "
                "its draws exhaust the query")


def estimate_many(model: SequenceModel, histories: Sequence[Sequence[int]],
                  queries: Sequence[Query], budget: int | Sequence[int] | None,
                  seed: int | None, level: float, surrogate: ContextAutomaton | None = None,
                  **options: object) -> list[Estimate]:
    """Every task answered by its `choose` pick, tasks with the same pick in one batch, in
    the given order. A budget bounds each task's calls, the pricing call included; without
    one, enumeration is allowed AUTO_EXACT_CALLS and an estimator AUTO_BUDGET."""
    from seqq.estimators import driver

    if options:
        raise QueryError(f"method 'auto' picks its own options; drop {sorted(options)} or name "
                         "a method (seqq.estimators.METHODS lists them)")
    budgets = driver.budgets_per_task(budget, len(histories))
    limits = budgets or [AUTO_EXACT_CALLS] * len(histories)
    with torch.inference_mode():
        cost = tree_calls(prepare(model, histories, queries, seed)).tolist()
    picks = [choose(q.horizon, c, limit, surrogate is not None)
             for q, c, limit in zip(queries, cost, limits, strict=True)]
    exact = exact_method().name
    out: list[Estimate | None] = [None] * len(histories)
    for method, twisted in dict.fromkeys((p.method, p.twisted) for p in picks):
        tasks = [i for i, p in enumerate(picks) if (p.method, p.twisted) == (method, twisted)]
        calls = [(limits if method == exact or budgets else [AUTO_BUDGET] * len(limits))[i]
                 - PRICING_CALLS for i in tasks]
        spend = {"max_calls": max(calls)} if method == exact else {"budget": calls}
        twist = {"surrogate": surrogate} if twisted else {}
        answered = driver.estimate_many(model, [histories[i] for i in tasks],
                                        [queries[i] for i in tasks], method, seed=seed,
                                        level=level, **spend, **twist)
        for i, e in zip(tasks, answered, strict=True):
            out[i] = dataclasses.replace(e, model_calls=e.model_calls + PRICING_CALLS,
                                         note=picks[i].why)
    return out  # type: ignore[return-value]
