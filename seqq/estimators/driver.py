"""The one driver every estimate goes through: look the method up, validate its inputs and
options, prepare the batch, build the surrogate's twist once per task group, run, name results,
and give each its uncertainty (`uncertainty.py`).

Methods whose draws are dependent (SMC, randomized beam, Hindsight-Gumbel) declare
`replicates`: the driver runs that many independent copies of each task in the same batch, each
with an equal share of the task's budget, and reports their mean with a Student-t interval.

Twisting is a property of the proposal, not of a method: any method that takes a surrogate gets
the twist (`Messages`) from here, and its answer loses what a twist voids — 1 − q̃(S) does not
bound p(Q∖S) as 1 − q(S) does (its lower bound p(S) holds), and −log q̃ does not average to H(q).
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from seqq.errors import BudgetError, QueryError
from seqq.estimators.engine.batch import Batch, prepare, replicated, subset
from seqq.estimators.engine.memory import consecutive_groups
from seqq.estimators.engine.summary import to_estimates
from seqq.estimators.engine.twist import (
    MESSAGE_VALUES,
    Messages,
    check_surrogate,
    message_loads,
)
from seqq.estimators.estimate import REPLICATED, Estimate, IntervalKind
from seqq.estimators.horizons import Families, families
from seqq.estimators.method import Answer, Method, Options, is_int
from seqq.estimators.registry import get
from seqq.estimators.uncertainty import with_uncertainty
from seqq.models.automaton import ContextAutomaton
from seqq.models.protocol import SequenceModel, check_protocol
from seqq.queries import Query


def check_method(method: str, options: Mapping[str, Any]) -> Options:
    """The method's options, or a one-line error, before any model call (a sweep checks its
    configuration with this before loading anything; `surrogate` may be a name there)."""
    return get(method).parse_options(options, twisted=options.get("surrogate") is not None)


def estimate_many(model: SequenceModel, histories: Sequence[Sequence[int]],
                  queries: Sequence[Query] | Query, method: str,
                  budget: int | Sequence[int] | None = None, seed: int | None = None,
                  level: float = 0.95, replicates: int | None = None,
                  **options: Any) -> list[Estimate]:
    """Estimate p(query_i | history_i) for every pair with `method`, all pairs sharing batched
    model calls, each with a `level` confidence interval (see `seqq.estimate_many`)."""
    queries, budgets = check_inputs(model, histories, queries, level, budget)
    planned = plan(method, queries, budgets, options, replicates)
    grouped = (families(histories, queries, planned.budgets)
               if planned.method.horizons is not None and planned.surrogate is None else None)
    if grouped is not None:
        return _every_horizon(planned, model, grouped, seed, level)
    with torch.inference_mode():
        batch = prepare(model, histories, queries, seed, by_part=planned.method.by_part)
    return run(planned, batch, level)


@dataclass(frozen=True)
class Plan:
    """A request checked before any model call: the method, its options, each task's budget
    (None: no budget) and how many copies of each task a replicate method runs (none: [])."""

    method: Method
    options: Options
    surrogate: ContextAutomaton | None  # twists the draws
    budgets: list[int] | None
    copies: list[int]
    replicates: int | None  # as asked: the pooled warning words a single copy by it


def plan(method: str, queries: Sequence[Query], budgets: list[int] | None,
         options: Mapping[str, Any], replicates: int | None = None) -> Plan:
    """The plan for running `method` on these tasks, or a one-line error about its options or
    replicates. A method that spends no budget but declares a cost cap takes the budget as
    that cap."""
    declared = get(method)
    if budgets is not None and declared.cost_cap:  # spends no budget: the budget caps it
        if declared.cost_cap in options:
            raise QueryError(f"{method}: give budget= or {declared.cost_cap}=, not both (a "
                             f"budget is its {declared.cost_cap})")
        options, budgets = {**options, declared.cost_cap: max(budgets)}, None
    surrogate = options.get("surrogate")
    return Plan(declared, declared.parse_options(options, twisted=surrogate is not None),
                surrogate, budgets, _replicates(declared, queries, budgets, replicates),
                replicates)


def run(planned: Plan, batch: Batch, level: float = 0.95) -> list[Estimate]:
    """The planned method on a batch prepared for its tasks (by parts where the method answers
    by parts): `estimate_many` prepares one, `auto` hands over the batch it priced, so a
    history is encoded once however the request is answered."""
    method, copies = planned.method, planned.copies
    estimates = _run_planned(planned, batch, planned.budgets, copies, level)
    return (_pooled(estimates, copies, level, planned.replicates, method.interval_kind) if copies
            else estimates)


def _run_planned(planned: Plan, batch: Batch, budgets: list[int] | None, copies: list[int],
                 level: float) -> list[Estimate]:
    """The planned run, on each task's copies where the method replicates (not yet pooled)."""
    method = planned.method
    with torch.inference_mode():
        if copies:  # independent copies of every task, each with an equal share of its budget
            batch = replicated(batch, copies)
            budgets = None if budgets is None else [
                b // n for b, n in zip(budgets, copies, strict=True) for _ in range(n)]
        if planned.surrogate is None:
            estimates = _answered(method, batch, budgets, planned.options, None, level,
                                  method.replicates)
        else:
            check_surrogate(batch, planned.surrogate)
            estimates = []
            for tasks in consecutive_groups(message_loads(batch, planned.surrogate),
                                            MESSAGE_VALUES):
                part = subset(batch, tasks)
                part_budgets = None if budgets is None else [budgets[t] for t in tasks.tolist()]
                estimates += _answered(method, part, part_budgets, planned.options,
                                       Messages.of(part, planned.surrogate), level,
                                       method.replicates)
    return estimates


def check_inputs(model: SequenceModel, histories: Sequence[Sequence[int]],
                 queries: Sequence[Query] | Query, level: float,
                 budget: int | Sequence[int] | None) -> tuple[list[Query], list[int] | None]:
    """One query and one budget per history (None: no budget), or a one-line error about the
    model, the level, a query, a history or a budget, before any model call."""
    check_protocol(model)
    if not 0 < level < 1:
        raise QueryError(f"level must lie in (0, 1), e.g. 0.95, got {level!r}")
    queries = [queries] * len(histories) if isinstance(queries, Query) else list(queries)
    _check_queries(queries)
    _check_histories(histories, model.vocab_size)
    return queries, budgets_per_task(budget, len(histories))


def _run(method: Method, batch: Batch, budgets: Sequence[int] | None, options: Options,
         twist: Messages | None) -> Answer:
    try:
        return method.run(batch, budgets, options, twist)
    except BudgetError as err:
        raise BudgetError(f"{method.name}: {err}") from None


def _named(method: Method, batch: Batch, answer: Answer) -> list[Estimate]:
    return to_estimates(batch, method.name, answer.result, answer.is_lower_bound, answer.extras)


def _every_horizon(planned: Plan, model: SequenceModel, grouped: Families, seed: int | None,
                   level: float) -> list[Estimate]:
    """One pass per family of hitting times, answering each of its horizons (`horizons.py`)."""
    method = planned.method
    with torch.inference_mode():
        batch = prepare(model, grouped.histories, grouped.queries, seed)
        answers = method.horizons(batch, grouped.budgets, planned.options)
        return grouped.spread([_finished(method, batch, answer, None, level, 0)
                               for answer in answers])


def _answered(method: Method, batch: Batch, budgets: Sequence[int] | None, options: Options,
              twist: Messages | None, level: float, replicates: int) -> list[Estimate]:
    """Run, name, and give every estimate its interval (replicates get theirs when pooled)."""
    return _finished(method, batch, _run(method, batch, budgets, options, twist), twist, level,
                     replicates)


def _finished(method: Method, batch: Batch, answer: Answer, twist: Messages | None,
              level: float, replicates: int) -> list[Estimate]:
    """Name a run's answer and give every estimate its interval."""
    if twist is not None:
        answer = _untwisted_claims_dropped(answer)
    estimates = _named(method, batch, answer)
    if replicates:
        return estimates
    weights = _task_weights(batch, answer)
    kind = method.interval_kind
    return [with_uncertainty(e, "exact" if e.interval_kind == "exact" else
                             "none" if e.is_lower_bound else kind, level, w)
            for e, w in zip(estimates, weights, strict=True)]


def _task_weights(batch: Batch, answer: Answer) -> list[torch.Tensor | None]:
    """Each task's draws' log weights (its branches pooled), or None without draws."""
    if answer.weights is None:
        return [None] * batch.num_tasks
    row_branch, log_w = answer.weights
    task = batch.branch_task[row_branch]
    order = torch.argsort(task, stable=True)  # one pass, not a mask per task
    sizes = torch.bincount(task, minlength=batch.num_tasks).tolist()
    return list(log_w[order].split(sizes))


def _replicates(method: Method, queries: Sequence[Query], budgets: Sequence[int] | None,
                requested: int | None) -> list[int]:
    """Copies of each task a replicate method runs: `requested` or its `replicates`, fewer
    where a budget would leave a copy less than two paths' worth of calls (2·(K + 1))."""
    if requested is not None:
        if not method.replicates:
            raise QueryError(f"method {method.name!r} takes no replicates; its interval comes "
                             "from its own draws")
        if not is_int(requested) or requested < 1:
            raise QueryError(f"replicates must be a positive integer, got {requested!r}")
    if not method.replicates:
        return []
    wanted = requested or method.replicates
    if budgets is None:
        return [wanted] * len(queries)
    return [min(wanted, max(1, b // (2 * (q.horizon + 1))))
            for q, b in zip(queries, budgets, strict=True)]


def _pooled(estimates: list[Estimate], copies: Sequence[int], level: float,
            requested: int | None, kind: IntervalKind) -> list[Estimate]:
    """The mean of each task's replicates, with its standard error and t interval (none from a
    single copy: its budget was too small to split)."""
    pooled, starts = [], [sum(copies[:i]) for i in range(len(copies))]
    for start, R in zip(starts, copies, strict=True):
        group = estimates[start:start + R]
        values = [e.value for e in group]
        mean = sum(values) / R
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (R - 1)) if R > 1 else math.nan
        first = group[0]
        diagnostics = {"replicates": float(R),
                       "replicate_rel_se": sd / math.sqrt(R) / mean if mean > 0 else 0.0}
        stderr = sd / math.sqrt(R) if R > 1 else None
        samples = [e.num_samples for e in group]
        bounded = all(e.lower is not None for e in group)  # each holds: so does their overlap
        estimate = Estimate(
            method=first.method, value=mean, log_value=math.log(mean) if mean > 0 else -math.inf,
            # the copies share one encoding of the history (`replicated`): counted once
            stderr=stderr, model_calls=sum(e.model_calls for e in group) - (R - 1),
            is_lower_bound=first.is_lower_bound, note=first.note,
            num_samples=None if None in samples else sum(samples),
            lower=max(e.lower for e in group) if bounded else None,
            upper=min(e.upper for e in group) if bounded else None,
            extras={"replicates": values, **first.extras})
        pooled_kind = "none" if first.is_lower_bound else kind
        if all(e.interval_kind == "exact" for e in group):
            pooled_kind = "exact"
        answered = with_uncertainty(estimate, pooled_kind, level, dof=R - 1,
                                    diagnostics=diagnostics)
        if R == 1 and pooled_kind in REPLICATED:
            answered = dataclasses.replace(answered, warning=(
                f"a single run of {first.method} gives no interval; ask for replicates "
                "(replicates=8)" if requested == 1 else
                f"the budget was too small to split into replicates, so {first.method} gives no "
                "interval; raise the budget or use method='wor'"))
        pooled.append(answered)
    return pooled


def _untwisted_claims_dropped(answer: Answer) -> Answer:
    """A twisted answer without entropy and the upper bound's gap, which hold for the
    restricted q only: its certain lower bound p(S), the exact sum of the paths it enumerated,
    holds under any proposal (and keeps intervals honest where heavy draws miss the rest:
    issue 51), and a gap of 0 still means it exhausted Q; any other gap becomes 1."""
    result = answer.result
    gap = None if result.log_gap is None else torch.where(
        torch.isneginf(result.log_gap), -math.inf, 0.0).to(result.log_gap)
    result = dataclasses.replace(result, entropy=None, log_gap=gap)
    return dataclasses.replace(answer, result=result)


def budgets_per_task(budget: int | Sequence[int] | None, n: int) -> list[int] | None:
    """One budget per pair (None: no budget)."""
    if budget is None:
        return None
    budgets = [budget] * n if is_int(budget) else list(budget)
    if len(budgets) != n:
        raise QueryError(f"got {len(budgets)} budgets for {n} queries")
    if all(b is None for b in budgets):
        return None  # "no budget" for every pair, as a sweep's level S = 0 says
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
        if (isinstance(history, (str, bytes)) or not hasattr(history, "__iter__")
                or not all(is_int(s) for s in history)):
            raise QueryError(f"history {i} must be a sequence of integer symbol ids, got "
                             f"{history!r:.60}; map tokens to ids with the model's vocabulary")
        bad = [int(s) for s in history if not 0 <= operator.index(s) < vocab_size]
        if bad:
            raise QueryError(f"history {i} holds symbol {bad[0]}, outside the model's vocabulary "
                             f"of size {vocab_size}; use ids in 0..{vocab_size - 1}")
