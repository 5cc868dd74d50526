"""The one driver every estimate goes through: look the method up, validate its inputs and
options, prepare the batch, build the surrogate's twist once per task group, run, name results.

Twisting is a property of the proposal, not of a method: any method that takes a surrogate gets
the twist (`Messages`) from here, and its answer loses what a twist voids — 1 − q̃(S) does not
bound p(Q∖S) as 1 − q(S) does, and −log q̃ does not average to H(q).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from seqq.errors import BudgetError, QueryError
from seqq.estimators.engine.batch import Batch, prepare, subset
from seqq.estimators.engine.memory import consecutive_groups
from seqq.estimators.engine.summary import to_estimates
from seqq.estimators.engine.twist import (
    MESSAGE_VALUES,
    Messages,
    check_surrogate,
    message_loads,
)
from seqq.estimators.estimate import Estimate
from seqq.estimators.method import Answer, Method, Options, is_int
from seqq.estimators.registry import get
from seqq.models.protocol import SequenceModel
from seqq.queries import Query


def check_method(method: str, options: Mapping[str, Any]) -> Options:
    """The method's options, or a one-line error, before any model call (a sweep checks its
    configuration with this before loading anything; `surrogate` may be a name there)."""
    return get(method).parse_options(options, twisted=options.get("surrogate") is not None)


def estimate_many(model: SequenceModel, histories: Sequence[Sequence[int]],
                  queries: Sequence[Query] | Query, method: str,
                  budget: int | Sequence[int] | None = None, seed: int | None = None,
                  **options: Any) -> list[Estimate]:
    """Estimate p(query_i | history_i) for every pair with `method`, all pairs sharing batched
    model calls (see `seqq.estimate_many`)."""
    declared = get(method)
    surrogate = options.get("surrogate")
    parsed = declared.parse_options(options, twisted=surrogate is not None)
    if isinstance(queries, Query):
        queries = [queries] * len(histories)
    _check_queries(queries)
    _check_histories(histories, model.vocab_size)
    budgets = _budgets(budget, len(histories))
    with torch.inference_mode():
        batch = prepare(model, histories, queries, seed, by_part=declared.by_part)
        if surrogate is None:
            return _named(declared, batch, _run(declared, batch, budgets, parsed, None))
        check_surrogate(batch, surrogate)
        estimates: list[Estimate] = []
        for tasks in consecutive_groups(message_loads(batch, surrogate), MESSAGE_VALUES):
            part = subset(batch, tasks)
            part_budgets = None if budgets is None else [budgets[t] for t in tasks.tolist()]
            answer = _run(declared, part, part_budgets, parsed, Messages.of(part, surrogate))
            estimates += _named(declared, part, _untwisted_claims_dropped(answer))
        return estimates


def run_prepared(method: str, batch: Batch, budgets: Sequence[int] | None = None,
                 **options: Any) -> list[Estimate]:
    """A method on a batch already prepared (ground truth's exact enumeration)."""
    declared = get(method)
    return _named(declared, batch, _run(declared, batch, budgets,
                                        declared.parse_options(options), None))


def _run(method: Method, batch: Batch, budgets: Sequence[int] | None, options: Options,
         twist: Messages | None) -> Answer:
    try:
        return method.run(batch, budgets, options, twist)
    except BudgetError as err:
        raise BudgetError(f"{method.name}: {err}") from None


def _named(method: Method, batch: Batch, answer: Answer) -> list[Estimate]:
    return to_estimates(batch, method.name, answer.result, answer.is_lower_bound, answer.extras)


def _untwisted_claims_dropped(answer: Answer) -> Answer:
    """A twisted answer without bounds and entropy: both hold for the restricted q only."""
    result = dataclasses.replace(answer.result, entropy=None, log_lower=None, log_gap=None)
    return dataclasses.replace(answer, result=result)


def _budgets(budget: int | Sequence[int] | None, n: int) -> list[int] | None:
    """One budget per pair (None: no budget)."""
    if budget is None:
        return None
    budgets = [budget] * n if is_int(budget) else list(budget)
    if len(budgets) != n:
        raise QueryError(f"got {len(budgets)} budgets for {n} queries")
    if all(b is None for b in budgets):
        return None  # "no budget" for every pair, as a sweep's budget level 0 says
    for b in budgets:
        if not is_int(b) or b < 1:
            raise QueryError(f"budget must be a positive integer (model calls), got {b!r}")
    return budgets


def _check_queries(queries: Sequence[object]) -> None:
    for q in queries:
        if not isinstance(q, Query):
            raise QueryError(f"expected a seqq Query (e.g. seqq.queries.hitting_time(a, K)), "
                             f"got {type(q).__name__} {q!r:.60}")


def _check_histories(histories: Sequence[Sequence[int]], vocab_size: int) -> None:
    for i, history in enumerate(histories):
        if isinstance(history, (str, bytes)) or not all(is_int(s) for s in history):
            raise QueryError(f"history {i} must be a sequence of integer symbol ids, got "
                             f"{history!r:.60}; map tokens to ids with the model's vocabulary")
        bad = [int(s) for s in history if not 0 <= operator.index(s) < vocab_size]
        if bad:
            raise QueryError(f"history {i} holds symbol {bad[0]}, outside the model's vocabulary "
                             f"of size {vocab_size}; use ids in 0..{vocab_size - 1}")
