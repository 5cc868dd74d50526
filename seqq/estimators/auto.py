"""`method="auto"`: per task, the method the calibration benchmark found calibrated for the
query's horizon and budget and for whether a surrogate is at hand, and why in words.

In order: the exact answer where enumerating the query costs no more than the budget (priced
from the query's lattice after encoding the history, one call); else, with a surrogate, SMC
twisted by it; else sampling without replacement up to `LONG_HORIZON` steps from `WOR_BUDGET`
calls, and SMC otherwise (benchmarks/RESULTS.md (h) and (j), docs/decisions.md §44).
`seqq ask --method auto` is this with one history; each estimate's `note` carries the reason
its method line prints.

`auto` is not a registered method but a `Chooser` above the driver: the public API
(`seqq.api.CHOOSERS`) hands it the whole request, and it runs each group of tasks through the
driver with the registered method it picked, spending what that method's declarations say (a
cost cap, else a budget).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from seqq.errors import QueryError
from seqq.estimators import driver, registry
from seqq.estimators.engine.batch import prepare, tree_calls
from seqq.estimators.estimate import Estimate
from seqq.models.automaton import ContextAutomaton
from seqq.models.protocol import SequenceModel
from seqq.queries import Query

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


@dataclass(frozen=True)
class Chooser:
    """A way to answer that picks a registered method per task and says why in each estimate's
    `note`; `seqq.api` dispatches to it above the driver, by its name."""

    name: str
    default_budget: int  # calls an estimate may spend without a budget (pricing excluded)
    estimate_many: Callable[..., list[Estimate]]  # seqq.estimate_many's arguments, but method


def choose(horizon: int, enumeration_calls: float, limit: int, surrogate: bool) -> Pick:
    """The method for one task: exact within `limit` calls (the pricing call included), else by
    surrogate and horizon."""
    if enumeration_calls + PRICING_CALLS <= limit:
        return Pick(registry.exact_method().name, False,
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
                  queries: Sequence[Query] | Query, budget: int | Sequence[int] | None = None,
                  seed: int | None = None, level: float = 0.95, replicates: int | None = None,
                  surrogate: ContextAutomaton | None = None,
                  **options: object) -> list[Estimate]:
    """Every task answered by its `choose` pick, tasks with the same pick in one batch, in
    the given order. A budget bounds each task's calls, the pricing call included; without
    one, enumeration is allowed AUTO_EXACT_CALLS and an estimator AUTO_BUDGET."""
    queries, budgets = driver.check_inputs(model, histories, queries, level, budget)
    if replicates is not None:
        raise QueryError("method 'auto' sets its own replicates; drop replicates= or name "
                         "a method")
    if options:
        raise QueryError(f"method 'auto' picks its own options; drop {sorted(options)} or name "
                         "a method (seqq.estimators.METHODS lists them)")
    limits = budgets or [AUTO_EXACT_CALLS] * len(histories)
    with torch.inference_mode():
        cost = tree_calls(prepare(model, histories, queries, seed)).tolist()
    picks = [choose(q.horizon, c, limit, surrogate is not None)
             for q, c, limit in zip(queries, cost, limits, strict=True)]
    out: list[Estimate | None] = [None] * len(histories)
    for method, twisted in dict.fromkeys((p.method, p.twisted) for p in picks):
        tasks = [i for i, p in enumerate(picks) if (p.method, p.twisted) == (method, twisted)]
        cap = registry.get(method).cost_cap  # a method without a budget: the limit caps it
        calls = [(limits if cap or budgets else [AUTO_BUDGET] * len(limits))[i]
                 - PRICING_CALLS for i in tasks]
        spend = {cap: max(calls)} if cap else {"budget": calls}
        twist = {"surrogate": surrogate} if twisted else {}
        answered = driver.estimate_many(model, [histories[i] for i in tasks],
                                        [queries[i] for i in tasks], method, seed=seed,
                                        level=level, **spend, **twist)
        for i, e in zip(tasks, answered, strict=True):
            out[i] = dataclasses.replace(e, model_calls=e.model_calls + PRICING_CALLS,
                                         note=picks[i].why)
    return out  # type: ignore[return-value]


AUTO = Chooser("auto", AUTO_BUDGET, estimate_many)
