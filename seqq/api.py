"""The public entry points: `estimate`, `estimate_many`, `exact`."""

from __future__ import annotations

import inspect
import math
import operator
from collections.abc import Mapping, Sequence

import torch

from seqq.errors import QueryError
from seqq.estimators import BY_PART, METHODS, Estimate
from seqq.estimators.batch import prepare
from seqq.models.protocol import SequenceModel, check_protocol
from seqq.queries import Query


def check_method(method: str, options: Mapping[str, object]) -> None:
    """Refuse an unknown method or an option it does not take (before any model call)."""
    if method not in METHODS:
        raise QueryError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    allowed = set(inspect.signature(METHODS[method]).parameters) - {"batch", "budgets"}
    unknown = set(options) - allowed
    if unknown:
        raise QueryError(f"method {method!r} takes no option {sorted(unknown)[0]!r}; "
                         f"it takes {sorted(allowed) or 'none'}")
    _check_option_values(method, options)


def estimate_many(
    model: SequenceModel,
    histories: Sequence[Sequence[int]],
    queries: Sequence[Query] | Query,
    method: str,
    budget: int | Sequence[int] | None = None,
    seed: int | None = None,
    **options,
) -> list[Estimate]:
    """Estimate p(query_i | history_i) for every pair, all pairs sharing batched model calls.

    `budget` (model calls, one for all or one per pair) makes each method do the most it can
    within it (docs/decisions.md §2). Options: `samples` (importance/naive/uniform samples per
    product; mixture/klm samples per part of a union; hybrid tail samples; wor head draws;
    hindsight_gumbel draws), `tail_samples`
    (wor), `repeats` (hindsight_gumbel), `beam_width` (beam), `alpha` (coverage_beam),
    `max_width` (tail_beam/hybrid), `surrogate` (twisted, wor, hybrid, smc, randomized_beam: a
    `ContextAutomaton`, e.g. from `seqq.estimators.twisted.fit_surrogate`). Each method's
    docstring in `seqq.estimators` says more.
    """
    check_method(method, options)
    check_protocol(model)
    if isinstance(queries, Query):
        queries = [queries] * len(histories)
    _check_queries(queries)
    _check_histories(histories, model.vocab_size)
    budgets = None
    if budget is not None:
        budgets = [budget] * len(histories) if _is_int(budget) else list(budget)
        if len(budgets) != len(histories):
            raise QueryError(f"got {len(budgets)} budgets for {len(histories)} queries")
        if all(b is None for b in budgets):
            budgets = None  # "no budget" for every pair, as a sweep's budget level 0 says
        else:
            for b in budgets:
                _check_positive_int("budget", b, "model calls")
    with torch.inference_mode():
        batch = prepare(model, histories, queries, seed, by_part=method in BY_PART)
        return METHODS[method](batch, budgets, **options)


# Options every method shares the meaning of: positive integers, and probabilities in (0, 1].
POSITIVE_INT_OPTIONS = {"samples", "beam_width", "max_width", "max_calls", "particles", "repeats",
                        "tail_samples"}
COUNT_OPTIONS = {"top", "sampled"}  # may be 0
UNIT_INTERVAL_OPTIONS = {"alpha"}


def _is_int(x: object) -> bool:
    """Integers of any kind (Python, NumPy, 0-d integer tensors), but not bools."""
    if isinstance(x, bool):
        return False
    try:
        operator.index(x)
    except TypeError:
        return False
    return True


def _check_positive_int(name: str, value: object, unit: str) -> None:
    if not _is_int(value) or value < 1:
        raise QueryError(f"{name} must be a positive integer ({unit}), got {value!r}")


def _check_option_values(method: str, options: Mapping[str, object]) -> None:
    for name, value in options.items():
        if value is None:
            continue
        if name in POSITIVE_INT_OPTIONS:
            _check_positive_int(f"{method} option {name}", value, "a count")
        elif name in COUNT_OPTIONS and not (_is_int(value) and value >= 0):
            raise QueryError(f"{method} option {name} must be an integer ≥ 0, got {value!r}")
        elif name in UNIT_INTERVAL_OPTIONS and not (
                isinstance(value, (int, float)) and 0 < value <= 1):
            raise QueryError(f"{method} option {name} must lie in (0, 1], got {value!r}")


def _check_queries(queries: Sequence[object]) -> None:
    for q in queries:
        if not isinstance(q, Query):
            raise QueryError(f"expected a seqq Query (e.g. seqq.queries.hitting_time(a, K)), "
                             f"got {type(q).__name__} {q!r:.60}")


def _check_histories(histories: Sequence[Sequence[int]], vocab_size: int) -> None:
    for i, history in enumerate(histories):
        if isinstance(history, (str, bytes)) or not all(_is_int(s) for s in history):
            raise QueryError(f"history {i} must be a sequence of integer symbol ids, got "
                             f"{history!r:.60}; map tokens to ids with the model's vocabulary")
        bad = [int(s) for s in history if not 0 <= operator.index(s) < vocab_size]
        if bad:
            raise QueryError(f"history {i} holds symbol {bad[0]}, outside the model's vocabulary "
                             f"of size {vocab_size}; use ids in 0..{vocab_size - 1}")


def estimate(model: SequenceModel, history: Sequence[int], query: Query, method: str,
             budget: int | None = None, seed: int | None = None, **options) -> Estimate:
    """Estimate p(X_{1:K} ∈ query | history) with one method."""
    return estimate_many(model, [history], [query], method, budget, seed, **options)[0]


def exact(model: SequenceModel, history: Sequence[int], query: Query) -> float:
    """The exact answer: forward DP when the model offers it (Markov models), else enumeration."""
    if hasattr(model, "log_probability"):
        return math.exp(model.log_probability(history, query))
    return estimate(model, history, query, "exact").value
