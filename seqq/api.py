"""The public entry points: `estimate`, `estimate_many`, `exact`."""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence

import torch

from seqq.errors import QueryError
from seqq.estimators import METHODS, Estimate
from seqq.estimators.batch import prepare
from seqq.models.protocol import SequenceModel
from seqq.queries import Query


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
    within it (decisions.md §2). Options: `samples` (importance/naive/uniform samples per
    product; hybrid tail samples; wor head draws; hindsight_gumbel draws), `tail_samples`
    (wor), `repeats` (hindsight_gumbel), `beam_width` (beam), `alpha` (coverage_beam),
    `max_width` (tail_beam/hybrid). Each method's docstring in `seqq.estimators` says more.
    """
    if method not in METHODS:
        raise QueryError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    function = METHODS[method]
    allowed = set(inspect.signature(function).parameters) - {"batch", "budgets"}
    unknown = set(options) - allowed
    if unknown:
        raise QueryError(f"method {method!r} takes no option {sorted(unknown)[0]!r}; "
                         f"it takes {sorted(allowed) or 'none'}")
    if isinstance(queries, Query):
        queries = [queries] * len(histories)
    budgets = None
    if budget is not None:
        budgets = [budget] * len(histories) if isinstance(budget, int) else list(budget)
        if len(budgets) != len(histories):
            raise QueryError(f"got {len(budgets)} budgets for {len(histories)} queries")
    with torch.inference_mode():
        batch = prepare(model, histories, queries, seed)
        return function(batch, budgets, **options)


def estimate(model: SequenceModel, history: Sequence[int], query: Query, method: str,
             budget: int | None = None, seed: int | None = None, **options) -> Estimate:
    """Estimate p(X_{1:K} ∈ query | history) with one method."""
    return estimate_many(model, [history], [query], method, budget, seed, **options)[0]


def exact(model: SequenceModel, history: Sequence[int], query: Query) -> float:
    """The exact answer: forward DP when the model offers it (Markov models), else enumeration."""
    if hasattr(model, "log_probability"):
        return math.exp(model.log_probability(history, query.masks(model.vocab_size)))
    return estimate(model, history, query, "exact").value
