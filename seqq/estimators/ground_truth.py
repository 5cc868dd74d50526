"""Ground truth for benchmarks (docs/decisions.md §6), the cheapest sound answer per query, its
origin recorded in `GroundTruth.method`:

- `dp`: the model's own exact answer (`log_probability`, e.g. Markov models' forward DP);
- `enumeration`: the exact method (`registry.exact_method`) when enumerating costs at most
  `exact_max_calls` model calls;
- otherwise an estimate: under `rule="relative"`, the method that samples until a relative
  standard error (`registry.until_method`, `wor`: sum-and-sample over a growing WOR head in the
  prefix trie, until the relative standard error is below `rel_tol`; exact if the head exhausts
  Q), recorded by its name; under `rule="twisted"` the same, head and tail drawn from the
  proposal twisted by a surrogate distilled from the model (docs/decisions.md §43), recorded as
  `twisted_<its name>`; under `rule="absolute"`, the method whose samplers stop on their own
  error (`registry.adaptive_method`, `importance`, recorded by its name): the paper's adaptive
  IS with its Eq. 66 rule, its samples drawn through the prefix trie so shared prefixes are paid
  once; or, under `rule="sampled"`, the same method until the relative standard error is below
  `rel_tol`: the judge for a large vocabulary, where no surrogate can be distilled; its trie
  holds its rows (V floats per prefix) within a byte cap, dropping the least recently used
  (docs/decisions.md §6, "A judge for a large vocabulary").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Literal

import torch

from seqq.estimators.driver import plan, run
from seqq.estimators.engine.batch import Batch, prepare, subset, tree_calls
from seqq.estimators.engine.memory import consecutive_groups
from seqq.estimators.engine.summary import to_estimates
from seqq.estimators.engine.twist import (
    MESSAGE_VALUES,
    Messages,
    check_surrogate,
    message_loads,
)
from seqq.estimators.estimate import GroundTruth
from seqq.estimators.horizons import families
from seqq.estimators.registry import adaptive_method, exact_method, until_method
from seqq.estimators.surrogates import model_surrogate
from seqq.models.automaton import ContextAutomaton
from seqq.models.protocol import SequenceModel
from seqq.progress import progress_bar
from seqq.queries import Query

RULES = ("absolute", "relative", "twisted", "sampled")
TRIE_CALLS = 2**21  # worst-case calls of the WOR estimate's tasks sharing one trie (about 4.5 GB
# of states for an LSTM-128; each group's trie is freed before the next)
TWISTED_GROUP = 16  # tasks of the twisted rule's first pass sharing a trie, each capped at
# TRIE_CALLS / TWISTED_GROUP calls (128k: its truths need a median of 1k–30k at K = 5..11 on the
# authors' LSTMs); one that runs out is computed again alone under the full cap
TWISTED_MIN_TAIL = 1000  # tail draws a twisted truth's error needs before it may stop: with 400,
# 1.4 % of 1,000 K = 4 truths on the authors' Shakespeare LSTM were beyond 3 SE of the exact
# answer, two 6–7 SE; with 1,000, 0.2–0.3 % (docs/decisions.md §43)
TWISTED_FLOOR = 0.05  # defensive twist: no symbol's twist below this share of its step's largest


@torch.inference_mode()
def ground_truth_many(
    model: SequenceModel,
    histories: Sequence[Sequence[int]],
    queries: Sequence[Query] | Query,
    seed: int | None = None,
    exact_max_calls: float = 2_000_000,
    rule: Literal["absolute", "relative", "twisted", "sampled"] = "absolute",
    delta: float = 1e-7,
    rel_tol: float = 0.01,
    s_low: int = 10_000,
    s_step: int = 1_000,
    s_high: int = 100_000,
    progress: bool | None = None,
    surrogate: ContextAutomaton | None = None,
) -> list[GroundTruth]:
    """The model's exact answer if it has one; else exact enumeration where it costs
    ≤ `exact_max_calls`; else an estimate: under `rule="relative"`, WOR sum-and-sample until
    the relative standard error < `rel_tol` (at most s_high·(K−1) calls per query); under
    `rule="twisted"` the same with head and tail drawn from the proposal twisted by
    `surrogate` (default: one distilled from the model, `model_surrogate`, paid once per
    model and kept in seqq's cache); under `rule="absolute"` (the paper's), IS with S_low
    samples, then +S_step until the per-sample weight variance (Eq. 66) < δ, or S_high
    samples; under `rule="sampled"`, IS from S_low samples in rounds until the relative
    standard error < `rel_tol`, or S_high samples. `progress` shows a bar (default: when some
    query needs an estimate)."""
    if rule not in RULES:
        raise ValueError(f"ground-truth rule must be one of {', '.join(map(repr, RULES))}, "
                         f"got {rule!r}")
    if not rel_tol > 0:
        raise ValueError(f"ground-truth rel_tol must be positive, got {rel_tol!r}")
    for name, value in (("s_low", s_low), ("s_step", s_step), ("s_high", s_high)):
        if value < 1:
            raise ValueError(f"ground-truth {name} must be at least 1 sample, got {value}")
    if isinstance(queries, Query):
        queries = [queries] * len(histories)
    if hasattr(model, "log_probability"):
        return [_model_exact(model, h, q) for h, q in zip(histories, queries, strict=True)]
    batch = prepare(model, histories, queries, seed)
    no_paths = torch.bincount(batch.branch_task, minlength=batch.num_tasks) == 0  # exactly 0
    cheap = (tree_calls(batch) <= exact_max_calls) | no_paths
    results: list[GroundTruth | None] = [None] * batch.num_tasks
    bar = progress_bar(total=batch.num_tasks, desc="ground truth", unit="query",
                       disable=not (progress if progress is not None
                                    else bool((~cheap).any())))
    if cheap.any():
        tasks = cheap.nonzero().flatten()
        before = batch.counter.calls.clone()
        exact = run(plan(exact_method().name, [queries[t] for t in tasks.tolist()], None, {}),
                    subset(batch, tasks))
        for t, est in zip(tasks.tolist(), exact, strict=True):
            results[t] = GroundTruth(est.value, est.log_value, "exact", 0, 0.0,
                                     int(batch.counter.calls[t] - before[t] + 1), est.entropy,
                                     "enumeration")
        bar.update(len(tasks))
    hard = (~cheap).nonzero().flatten()
    if len(hard) and rule == "relative":
        _wor_estimate(batch, hard, results, rel_tol, s_high, bar)
    elif len(hard) and rule == "twisted":
        judge = surrogate if surrogate is not None else model_surrogate(model, histories)
        if judge is not None:
            check_surrogate(batch, judge)
        _twisted_estimate(batch, hard, results, rel_tol, s_high, judge, bar)
    elif len(hard) and rule == "sampled":
        grouped = families([histories[t] for t in hard.tolist()],
                           [queries[t] for t in hard.tolist()])
        sampler = adaptive_method()
        if grouped is None:
            sampler.adaptive.sampled(subset(batch, hard), hard, results, rel_tol, s_low, s_step,
                                     s_high, bar, sampler.name)
        else:
            sampler.adaptive.horizons(prepare(model, grouped.histories, grouped.queries, seed),
                                      grouped, hard, results, rel_tol, s_low, s_step, s_high,
                                      bar, sampler.name)
    elif len(hard):
        _importance_estimate(batch, hard, results, delta, s_low, s_step, s_high, bar)
    bar.close()
    return results  # type: ignore[return-value]


def ground_truth(model: SequenceModel, history: Sequence[int], query: Query,
                 seed: int | None = None, **options) -> GroundTruth:
    return ground_truth_many(model, [history], [query], seed=seed, **options)[0]


def _model_exact(model, history: Sequence[int], query: Query) -> GroundTruth:
    """The model's own exact answer (forward DP), and H(q) where it offers that too."""
    log_value = model.log_probability(history, query)
    entropy = None
    if hasattr(model, "restricted_entropy") and math.isfinite(log_value):
        entropy = model.restricted_entropy(history, query)
    return GroundTruth(math.exp(log_value), log_value, "exact", 0, 0.0, 0, entropy, "dp")


def _worst_calls(batch: Batch, s_high: int) -> int:
    """An estimated truth's calls per query at most: s_high paths of L − 1 new prefixes, and the
    history."""
    return s_high * (int(batch.lengths.max()) - 1) + 1


def _wor_estimate(batch: Batch, tasks: torch.Tensor, results: list, rel_tol: float,
                  s_high: int, bar) -> None:
    """`wor_until` on groups of tasks whose worst-case calls sum to at most `TRIE_CALLS`: the
    trie keeps every prefix it evaluated (a state per prefix), so one trie for all of a
    sweep's hard queries would outgrow memory at tight tolerances."""
    before = batch.counter.calls.clone()
    max_calls = _worst_calls(batch, s_high)
    sampler = until_method()
    for part in consecutive_groups([max_calls] * len(tasks), TRIE_CALLS):
        group = tasks[part]
        sub = subset(batch, group)
        result, _ = sampler.until(sub, rel_tol, max_calls, on_stage=_stage_reporter(bar))
        _record_wor(batch, group, to_estimates(sub, sampler.name, result, False), before, results,
                    _wor_origin(twisted=False))


def _twisted_estimate(batch: Batch, tasks: torch.Tensor, results: list, rel_tol: float,
                      s_high: int, surrogate: ContextAutomaton | None, bar) -> None:
    """Twisted `wor_until` (projected stages) on groups of tasks whose messages fit
    `MESSAGE_VALUES`: first `TWISTED_GROUP` tasks to a trie, each capped at its share of
    `TRIE_CALLS`; a task that spends its share before meeting `rel_tol` is then computed
    again, with the worst-case cap, in groups bounded as the relative rule's are. The second
    run is independent of the first, whose calls are counted too. Without a surrogate the
    same runs go untwisted (`wor`)."""
    before = batch.counter.calls.clone()
    worst = _worst_calls(batch, s_high)
    first = min(worst, TRIE_CALLS // TWISTED_GROUP)
    method = _wor_origin(twisted=surrogate is not None)
    loads = (torch.zeros(len(tasks), dtype=torch.long) if surrogate is None
             else message_loads(subset(batch, tasks), surrogate))
    for part in consecutive_groups(loads, MESSAGE_VALUES):
        again = []
        for group in tasks[part].split(TWISTED_GROUP):
            estimates, met = _twisted_run(batch, group, rel_tol, first, surrogate)
            rerun = ~met & torch.tensor([e.value > 0 and first < worst for e in estimates])
            done = ~rerun
            _record_wor(batch, group[done], [e for e, d in zip(estimates, done, strict=True)
                                             if d], before, results, method)
            bar.update(int(done.sum()))
            again.append(group[rerun])
        left = torch.cat(again)
        for part_left in consecutive_groups([worst] * len(left), TRIE_CALLS):
            group = left[part_left]
            estimates, _ = _twisted_run(batch, group, rel_tol, worst, surrogate)
            _record_wor(batch, group, estimates, before, results, method)
            bar.update(len(group))


def _twisted_run(batch: Batch, tasks: torch.Tensor, rel_tol: float, max_calls: int,
                 surrogate: ContextAutomaton | None) -> tuple[list, torch.Tensor]:
    sub = subset(batch, tasks)
    twist = None if surrogate is None else replace(Messages.of(sub, surrogate),
                                                   log_floor=math.log(TWISTED_FLOOR))
    result, met = until_method().until(sub, rel_tol, max_calls, twist=twist, projected=True,
                                       min_tail=TWISTED_MIN_TAIL)
    return to_estimates(sub, _wor_origin(twisted=twist is not None), result, False), met


def _stage_reporter(bar) -> Callable[[int], None]:
    """Moves `bar` by the tasks a `wor_until` run has finished (it reports running totals)."""
    done = 0

    def report(finished: int) -> None:
        nonlocal done
        bar.update(finished - done)
        done = finished

    return report


def _wor_origin(twisted: bool) -> str:
    """The origin of a truth from the until method: its name, `twisted_` before it where a
    surrogate twisted its draws."""
    name = until_method().name
    return f"twisted_{name}" if twisted else name


def _record_wor(batch: Batch, tasks: torch.Tensor, estimates: list, before: torch.Tensor,
                results: list, method: str) -> None:
    for t, est in zip(tasks.tolist(), estimates, strict=True):
        rel = 0.0 if not est.stderr else est.stderr / est.value
        results[t] = GroundTruth(est.value, est.log_value, "exact" if est.stderr == 0.0 else
                                 "estimated", int(est.num_samples or 0), rel,
                                 int(batch.counter.calls[t] - before[t] + 1), est.entropy,
                                 method)


def _importance_estimate(batch: Batch, tasks: torch.Tensor, results: list, delta: float,
                         s_low: int, s_step: int, s_high: int, bar) -> None:
    """Adaptive IS from the restricted proposal, drawn through a prefix trie per group of
    tasks (worst-case calls at most `TRIE_CALLS` per group), so a prefix shared by several
    samples costs one call; the samples and the stopping rule are the paper's."""
    sampler = adaptive_method()
    for part in consecutive_groups([_worst_calls(batch, s_high)] * len(tasks), TRIE_CALLS):
        group = tasks[part]
        sampler.adaptive.absolute(subset(batch, group), group, results, delta, s_low, s_step,
                                  s_high, bar, sampler.name)


