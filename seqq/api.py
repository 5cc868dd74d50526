"""The public entry points: `estimate`, `estimate_many`, `exact`, `hitting_time_distribution`.

A method name is either a registered method, run by the driver, or a chooser (`auto`) that picks
a registered method per task and runs it through the driver: `CHOOSERS` says which.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from seqq.errors import ConfigError, QueryError
from seqq.estimators import Estimate, auto, driver, registry
from seqq.estimators.auto import Chooser
from seqq.estimators.driver import check_method
from seqq.models.protocol import SequenceModel
from seqq.queries import Query, Symbols, Vocabulary, hitting_time

__all__ = ["CHOOSERS", "check_method", "estimate", "estimate_many", "exact",
           "hitting_time_distribution"]

CHOOSERS: dict[str, Chooser] = {chooser.name: chooser for chooser in (auto.AUTO,)}


def estimate_many(
    model: SequenceModel,
    histories: Sequence[Sequence[int]],
    queries: Sequence[Query] | Query,
    method: str,
    budget: int | Sequence[int] | None = None,
    seed: int | None = None,
    level: float = 0.95,
    replicates: int | None = None,
    **options,
) -> list[Estimate]:
    """Estimate p(query_i | history_i) for every pair, all pairs sharing batched model calls.

    `budget` (model calls, one for all or one per pair) makes each method do the most it can
    within it (docs/decisions.md §2). `options` are the method's (`seqq.estimators.METHODS[
    method].option_names()`; the README's table lists them); `surrogate` (a
    `ContextAutomaton`, e.g. from `seqq.estimators.surrogates.fit_surrogate`) twists the
    proposal of every method that takes one.

    `replicates` sets how many independent copies of each task a method with dependent draws
    (smc, randomized_beam, hindsight_gumbel) runs inside the budget (default 8); their mean is
    the estimate and their spread its interval. Every estimate carries a `level` confidence
    interval (`ci_low`, `ci_high`; others from
    `Estimate.interval(level)`), its weights' diagnostics (effective sample size, Pareto k̂)
    and a one-sentence `warning` when they say it may be far off. `method="auto"` picks a
    method per task and says why in each estimate's `note` (`seqq.estimators.auto`).
    """
    check_arguments(budget, options)
    if method in CHOOSERS:
        return CHOOSERS[method].estimate_many(model, histories, queries, budget, seed, level,
                                              replicates, **options)
    return driver.estimate_many(model, histories, queries, method, budget, seed, level,
                                replicates, **options)


def check_arguments(budget: object, options: dict) -> None:
    """Both `samples` and `budget` is a mistake (a budget buys as many samples as it can,
    docs/decisions.md §2, so one of them would be ignored): refused in one line."""
    if budget is not None and options.get("samples") is not None:
        raise ConfigError("give samples= or budget=, not both: a budget buys as many samples as "
                          "it can")


def estimate(model: SequenceModel, history: Sequence[int], query: Query, method: str,
             budget: int | None = None, seed: int | None = None, level: float = 0.95,
             replicates: int | None = None, **options) -> Estimate:
    """Estimate p(X_{1:K} ∈ query | history) with one method."""
    return estimate_many(model, [history], [query], method, budget, seed, level, replicates,
                         **options)[0]


def exact(model: SequenceModel, history: Sequence[int], query: Query) -> float:
    """The exact answer: forward DP when the model offers it (Markov models), else enumeration."""
    if hasattr(model, "log_probability"):
        return math.exp(model.log_probability(history, query))
    return estimate(model, history, query, registry.exact_method().name).value


def hitting_time_distribution(model: SequenceModel, history: Sequence[int], a: Symbols, K: int,
                              samples: int | None = 1000, seed: int | None = None,
                              vocab: Vocabulary | None = None, method: str = "importance",
                              budget: int | None = None, level: float = 0.95
                              ) -> list[Estimate]:
    """p(τ(A) = k | history) for k = 1..K, each with its interval, from one pass of `method`
    (one that declares `horizons`: importance, naive or uniform MC; `seqq.estimators.horizons`):
    `samples` paths, or as many as `budget` calls buy. Every estimate reports the pass's calls,
    paid once."""
    if registry.get(method).horizons is None:
        shared = sorted(n for n, m in registry.METHODS.items() if m.horizons)
        raise QueryError(f"every horizon from one pass needs a method that answers every K "
                         f"from one pass ({', '.join(shared)}); {method!r} does not")
    options = {} if budget is not None or samples is None else {"samples": samples}
    return estimate_many(model, [history] * K, [hitting_time(a, k, vocab) for k in range(1, K + 1)],
                         method, budget, seed, level, **options)
