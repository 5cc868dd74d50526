"""The sweep loop: ground truth once, the budget setter (the hybrid) fixes each query's budget,
then every other method runs at that budget (docs/decisions.md §2), one stored part per (chunk,
level S, method).
A "method" here is a `MethodRun`: a seqq method, or a labelled variant of one, whose label names
its rows, parts and seeds.

A part is the unit of both batching (one `estimate_many` call) and crash loss: a killed sweep
loses at most the part in flight, and a re-run skips every row whose key is already stored.
"""

from __future__ import annotations

import json
import math
import signal
import threading
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pandas as pd

import seqq
from seqq.errors import BudgetError, ConfigError
from seqq.estimators.estimate import GroundTruth
from seqq.models import SequenceModel
from seqq.progress import progress_bar
from seqq.results.schema import (
    BUDGET_FROM_SAMPLES,
    BUDGET_FROM_SETTER,
    BUDGET_SETTER,
    CONTEXT,
    KEY,
    LEVEL_OPTION,
    NO_BUDGET,
    QUERY,
    ResultRow,
    conform,
    key_of,
    keys_of,
    to_frame,
)
from seqq.results.store import PartStore
from seqq.sweeps.method_runs import MethodRun
from seqq.sweeps.query_specs import QuerySpec
from seqq.sweeps.truth_store import GroundTruthStore, NoGroundTruth, digest

# the budget setter's calls per query, level and repeat, in one context
BUDGET_KEY = (*QUERY, "budget_level", "repeat")


@dataclass
class SweepPlan:
    """What one sweep job runs; `tag` names its parts (dataset, model, shard) so that the jobs
    of a SLURM array never write the same file."""

    dataset: str
    model: str
    synthetic: bool
    vocab_size: int
    histories: str  # where the histories come from: test, mixture, "sampled from <model>"
    temperature: float
    runs: list[MethodRun]  # surrogates fitted (`method_runs.with_surrogates`)
    levels: list[int]
    seed: int
    chunk_size: int = 64
    tag: str = "run"
    repeats: int = 1  # independent runs per (query, method, level), each its own seed


def rae(log_estimate: float, log_truth: float) -> float:
    """|p̂ − p| / p from log values, so tiny probabilities do not underflow to 0/0."""
    if not log_truth > -math.inf:  # no ground truth (NaN) or an impossible query
        return math.nan
    if log_estimate == -math.inf:
        return 1.0
    return abs(math.expm1(log_estimate - log_truth))


def samples_budget(level: int, K: int) -> int:
    """Model calls of `level` i.i.d. IS samples at horizon K (docs/decisions.md §1): 1 + S·(K−1)."""
    return 1 + level * (K - 1)


def _seed(base: int, *parts: Any) -> int:
    return (base * 1_000_003 + zlib.crc32(json.dumps(parts, default=str).encode())) % 2**31


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold a Ctrl-C (or a SIGTERM) that arrives inside the block until it ends, so that "part
    written" and "part counted" happen together and the interrupt message counts what is on disk.

    Only the main thread can set signal handlers; elsewhere (and for a signal that is ignored or
    not Python's) the block runs unguarded.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    held = {s: h for s, h in previous.items() if callable(h)}
    caught: list[tuple[int, Any]] = []
    for signum in held:
        signal.signal(signum, lambda signum, frame: caught.append((signum, frame)))
    try:
        yield
    finally:
        for signum, handler in held.items():
            signal.signal(signum, handler)
    if caught:
        signum, frame = caught[0]
        held[signum](signum, frame)


class SweepRunner:
    def __init__(self, model: SequenceModel, plan: SweepPlan, results: PartStore,
                 truth: GroundTruthStore | NoGroundTruth, progress: bool = True):
        self.model, self.plan, self.results, self.truth = model, plan, results, truth
        self.progress = progress
        self.saved_parts = 0  # parts of this plan stored so far, earlier runs included
        self.context = {"dataset": plan.dataset, "model": plan.model,
                        "temperature": float(plan.temperature)}
        self.runs = {run.label: run for run in plan.runs}

    def _options(self, method: str) -> str:
        """The `options` column: a fitted surrogate is named by its repr (kind, order, size)."""
        return json.dumps(dict(self.runs[method].options), sort_keys=True, default=repr)

    @staticmethod
    def _query_fields(spec: QuerySpec) -> dict[str, Any]:
        return {"history_id": spec.history.history_id, "history_hash": spec.history.digest,
                "K": spec.K, "label": spec.label}

    def _row_key(self, spec: QuerySpec, method: str, level: int, repeat: int) -> tuple:
        return key_of({**self.context, **self._query_fields(spec), "method": method,
                       "options": self._options(method), "budget_level": level,
                       "budget_rule": self._budget_rule(level), "repeat": repeat}, KEY)

    def _budget_key(self, spec: QuerySpec, level: int, repeat: int) -> tuple:
        return key_of({**self._query_fields(spec), "budget_level": level, "repeat": repeat},
                      BUDGET_KEY)

    def _stored(self) -> tuple[set[tuple], dict[tuple, int]]:
        """Keys already stored, and the budget setter's call count per (query, level, repeat)."""
        table = self.results.read()
        if table.empty:
            return set(), {}
        self._check_labels(conform(table))
        if BUDGET_SETTER not in self.runs:
            return set(keys_of(table, KEY)), {}
        mine = table[(table[list(CONTEXT)] == pd.Series(self.context)).all(axis=1)]
        setter = mine[(mine.method == BUDGET_SETTER)
                      & (mine.options == self._options(BUDGET_SETTER))]
        calls = dict(zip(keys_of(setter, BUDGET_KEY), setter.model_calls.astype(int),
                         strict=True))
        return set(keys_of(table, KEY)), calls

    def _check_labels(self, table: pd.DataFrame) -> None:
        """A label already stored for another seqq method would resume that method's rows as
        this one's: refuse before running anything."""
        for label, run in self.runs.items():
            other = set(table.base_method[table.method == label]) - {run.method}
            if other:
                raise ConfigError(
                    f"{self.results.root} holds rows labelled {label!r} from method "
                    f"{sorted(other)[0]!r}, not {run.method!r}; give the variant another label "
                    "or the sweep another sweep.name")

    def part_count(self, specs: Sequence[QuerySpec]) -> int:
        """How many parts `run(specs)` stores: one per (chunk, level S, method, repeat)."""
        chunks = math.ceil(len(specs) / self.plan.chunk_size)
        return chunks * len(self.plan.levels) * len(self.runs) * self.plan.repeats

    def run(self, specs: Sequence[QuerySpec]) -> int:
        """Run every missing (query, method, level, repeat) row; return how many were written."""
        plan = self.plan
        methods = ([BUDGET_SETTER] if BUDGET_SETTER in self.runs else []) + [
            m for m in self.runs if m != BUDGET_SETTER
        ]
        done, setter_calls = self._stored()
        chunks = [specs[i:i + plan.chunk_size] for i in range(0, len(specs), plan.chunk_size)]
        written = 0
        bar = progress_bar(total=self.part_count(specs), disable=not self.progress,
                           desc=f"{plan.dataset}/{plan.model} T={plan.temperature}",
                           unit="part")
        for index, chunk in enumerate(chunks):
            todo = {
                (repeat, level, method): [s for s in chunk
                                          if self._row_key(s, method, level, repeat) not in done]
                for repeat in range(plan.repeats) for level in plan.levels for method in methods
            }
            if not any(todo.values()):
                bar.update(len(todo))
                self.saved_parts += len(todo)
                continue
            truths = dict(zip((s.key for s in chunk), self.truth.get(self.model, chunk),
                              strict=True))
            for (repeat, level, method), pending in todo.items():
                rows = None
                if pending:
                    budgets = [self._budget(s, level, repeat, setter_calls) for s in pending]
                    rows = self._estimate(pending, method, level, repeat, budgets, truths, index)
                    name = (f"{plan.tag}-S{level}-c{index:05d}{_repeat_tag(repeat)}-{method}-"
                            f"{digest([self._options(method), [s.key for s in pending]], 8)}")
                with interrupts_deferred():  # a part on disk is a part counted
                    if rows is not None:
                        self.results.write(rows, name)
                        written += len(rows)
                    self.saved_parts += 1
                if rows is not None and method == BUDGET_SETTER:
                    for spec, calls in zip(pending, rows.model_calls, strict=True):
                        setter_calls[self._budget_key(spec, level, repeat)] = int(calls)
                bar.update()
        bar.close()
        return written

    def _budget(self, spec: QuerySpec, level: int, repeat: int,
                setter_calls: Mapping[tuple, int]) -> int | None:
        """The query's call budget; level 0 means none (methods run on their own options)."""
        if level <= 0:
            return None
        if BUDGET_SETTER not in self.runs:
            return samples_budget(level, spec.K)
        return setter_calls.get(self._budget_key(spec, level, repeat))  # None: the setter itself

    def _budget_rule(self, level: int) -> str:
        if level <= 0:
            return NO_BUDGET
        return BUDGET_FROM_SETTER if BUDGET_SETTER in self.runs else BUDGET_FROM_SAMPLES

    def _estimate(self, specs: list[QuerySpec], method: str, level: int, repeat: int,
                  budgets: list[int | None], truths: Mapping[tuple, GroundTruth | None],
                  chunk: int) -> pd.DataFrame:
        # repeat 0 keeps the seed it had before repeats existed, so stored results still resume
        seed = _seed(self.plan.seed, chunk, level, method, [s.key for s in specs],
                     *([repeat] if repeat else []))
        run = self.runs[method]
        options = dict(run.options)
        if method == BUDGET_SETTER:
            budget: Any = None
            options[LEVEL_OPTION] = level
        else:
            budget = budgets if level > 0 else None  # level 0: the method's own options
        histories = [list(s.history.tokens) for s in specs]
        start = time.perf_counter()
        try:
            estimates: list[Any] = seqq.estimate_many(
                self.model, histories, [s.query for s in specs], run.method, budget=budget,
                seed=seed, **options)
        except BudgetError:  # one query's budget too small: answer the others one by one
            estimates = [self._one(s, run.method, b, seed, options)
                         for s, b in zip(specs, budgets, strict=True)]
        wall = (time.perf_counter() - start) / len(specs)
        return to_frame([self._row(s, method, level, repeat, b, e, truths[s.key], wall, seed)
                         for s, b, e in zip(specs, budgets, estimates, strict=True)])

    def _one(self, spec: QuerySpec, method: str, budget: int | None, seed: int,
             options: Mapping[str, Any]) -> Any:
        try:
            return seqq.estimate(self.model, list(spec.history.tokens), spec.query, method,
                                 budget=budget, seed=seed, **options)
        except BudgetError as err:
            return err

    def _row(self, spec: QuerySpec, method: str, level: int, repeat: int, budget: int | None,
             est: Any, truth: GroundTruth | None, wall: float, seed: int) -> ResultRow:
        failed = isinstance(est, Exception)
        log_est = math.nan if failed else float(est.log_value)
        calls = 0 if failed else int(est.model_calls)
        truth_log = math.nan if truth is None else truth.log_value
        entropy = truth.entropy if truth is not None and truth.entropy is not None else (
            None if failed else est.entropy)
        history = spec.history
        return ResultRow(
            **self.context, **self._query_fields(spec),
            method=method,
            base_method=self.runs[method].method,
            options=self._options(method),
            budget_level=level,
            budget_rule=self._budget_rule(level),
            budget_calls=calls if budget is None else budget,
            repeat=repeat,
            synthetic=self.plan.synthetic,
            histories=self.plan.histories,
            vocab_size=self.plan.vocab_size,
            group=history.group,
            sequence=history.sequence,
            position=history.position,
            query=spec.kind,
            model_calls=calls,
            estimate=math.nan if failed else float(est.value),
            log_estimate=log_est,
            stderr=_or_nan(None if failed else est.stderr),
            num_samples=-1 if failed or est.num_samples is None else int(est.num_samples),
            is_lower_bound=False if failed else bool(est.is_lower_bound),
            truth=math.nan if truth is None else truth.value,
            truth_log=truth_log,
            truth_kind="none" if truth is None else truth.kind,
            truth_samples=0 if truth is None else truth.samples,
            truth_rel_stderr=_or_nan(None if truth is None else truth.rel_stderr),
            truth_rule=self.truth.rule,
            rae=math.nan if failed else rae(log_est, truth_log),
            entropy=_or_nan(entropy),
            wall_s=wall,
            seed=seed,
            note=str(est) if failed else est.note,
            extras="{}" if failed else json.dumps(est.extras, default=_jsonable),
            ci_low=_or_nan(None if failed else est.ci_low),
            ci_high=_or_nan(None if failed else est.ci_high),
            ess=_or_nan(None if failed else est.diagnostics.get("ess")),
            pareto_k=_or_nan(None if failed else est.diagnostics.get("pareto_k")),
            warning="" if failed or est.warning is None else est.warning,
        )


def _repeat_tag(repeat: int) -> str:
    """Part names of repeat 0 stay as they were before repeats existed."""
    return f"-r{repeat}" if repeat else ""


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _jsonable(obj: Any) -> Any:
    """Tensors and numpy values in `Estimate.extras` (e.g. beam sizes) as plain lists/numbers."""
    return obj.tolist() if hasattr(obj, "tolist") else str(obj)
