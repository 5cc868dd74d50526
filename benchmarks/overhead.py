"""(g) Where an estimate's time goes: the model's share of one query's wall time as the samples
S (or beam width) grow, and the estimator's own time outside the model split into a fixed cost
per estimate and a cost per model call. Each estimate runs through a `StepRecorder`, which times
every model `step` (a GPU's work waited for), so the model's share is measured inside the run
itself; the rest (the trie's bookkeeping, drawing, selecting states, the history's encoding) is
the estimator's. Fitting both by least squares over S, time ≈ fixed + per call · calls, gives
the share a large enough S tends to, per call in the model / (that + per call outside): a
fixed cost shrinks with more rows per step, a per-call cost does not. Where that limit is above
0.9, the table also says how many model calls per estimate reach a 0.9 share."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import seqq
from benchmarks.plans import Plan
from benchmarks.report import Section, describe, table
from benchmarks.throughput import HISTORY_LENGTH, method_options, random_histories
from benchmarks.timing import StepRecorder, median, model_device, timed
from benchmarks.zoo import BenchModel, build
from seqq import queries as Q

TARGET_SHARE = 0.9  # issue 9's target for sampling estimators


@dataclass(frozen=True)
class Point:
    samples: int
    calls: int  # model calls (rows stepped) per estimate
    seconds: float  # wall time per estimate (median)
    model_seconds: float  # of which inside the model's steps (median)

    @property
    def share(self) -> float:
        return self.model_seconds / self.seconds


@dataclass(frozen=True)
class Split:
    """time ≈ fixed + per_call·calls, fitted separately inside and outside the model."""

    fixed_outside: float  # seconds per estimate outside the model, whatever its size
    per_call_outside: float  # seconds per model call outside the model
    per_call_model: float  # seconds per model call inside it

    @property
    def limit_share(self) -> float:
        """The model's share as calls per estimate grow without bound (nan: no cost per call
        measured at all, as on a model too small for its time to grow over the sizes tried)."""
        total = self.per_call_model + self.per_call_outside
        return self.per_call_model / total if total > 0 else math.nan

    def calls_for(self, share: float, fixed_model: float) -> float:
        """Model calls per estimate from which the model's share is at least `share` (inf:
        never; 0 where the fixed costs alone give it)."""
        outside = share / (1 - share)  # model time must be this many times the outside time
        short = outside * self.fixed_outside - fixed_model  # model time missing at no calls
        gain = self.per_call_model - outside * self.per_call_outside
        if short <= 0:
            return 0.0
        return math.inf if gain <= 0 else short / gain


def line_fit(x: list[float], y: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y ≈ a + b·x with a ≥ 0 and b ≥ 0: neither a fixed
    cost nor a cost per call is negative. Where the free line would fall (a cost too small to
    grow above the noise over the sizes tried) it is flat at the mean; where it would cross
    zero above x = 0 (cost growing faster than linearly, or noise) it goes through the origin."""
    mx, my = sum(x) / len(x), sum(y) / len(y)
    spread = sum((u - mx) ** 2 for u in x)
    if spread == 0:  # one size only (or calls that never grew): no slope to fit
        return my, 0.0
    b = sum((u - mx) * (v - my) for u, v in zip(x, y, strict=True)) / spread
    if b < 0:
        return my, 0.0
    if my - b * mx >= 0:
        return my - b * mx, b
    return 0.0, sum(u * v for u, v in zip(x, y, strict=True)) / sum(u * u for u in x)


def split(points: list[Point]) -> tuple[Split, float]:
    """The fitted split, and the model's fixed seconds per estimate (its first small steps)."""
    calls = [float(p.calls) for p in points]
    fixed_outside, per_call_outside = line_fit(calls, [p.seconds - p.model_seconds
                                                      for p in points])
    fixed_model, per_call_model = line_fit(calls, [p.model_seconds for p in points])
    return Split(fixed_outside, per_call_outside, per_call_model), fixed_model


def measure(bench: BenchModel, method: str, samples: int, query: Q.Query, history: list[int],
            repeats: int) -> Point:
    """One query at `samples`: a warm-up, then `repeats` timed estimates (medians)."""
    options = method_options(method, bench, samples)
    device = model_device(bench.model)
    seconds, model_seconds, calls = [], [], 0
    for repeat in range(repeats + 1):
        recorder = StepRecorder(bench.model)
        wall, estimates = timed(device, lambda r=recorder, s=repeat: seqq.estimate_many(
            r, [history], query, method, seed=s, **options))
        if repeat:  # the first run warms up
            seconds.append(wall)
            model_seconds.append(recorder.seconds)
            calls = estimates[0].model_calls
    return Point(samples, calls, median(seconds), median(model_seconds))


def run(plan: Plan, device: str | None) -> Section:
    query = Q.hitting_time(1, plan.K)
    body = [describe(__doc__), "",
            f"One query: hitting time p(τ(1) = K), K = {plan.K}, a random history of "
            f"{HISTORY_LENGTH} symbols; medians of {plan.repeats} runs after a warm-up. "
            "`calls for 0.9`: model calls per estimate at which the fit puts the model's share "
            "at 0.9.", ""]
    points_rows, fit_rows = [], []
    for name in plan.overhead_models:
        bench = build(name, device)
        if bench.model is None:
            fit_rows.append([name, "-", "-", "-", "-", "-", f"skipped: {bench.note}"])
            continue
        history = random_histories(bench.model.vocab_size, 1)[0]
        sizes = plan.overhead_lm_samples if bench.large_vocab else plan.overhead_samples
        for method in plan.overhead_methods:
            print(f"  {bench.name}: {method}", file=sys.stderr, flush=True)
            points = [measure(bench, method, s, query, history, plan.repeats) for s in sizes]
            points_rows += [[bench.name, method, p.samples, f"{p.calls:,}",
                             f"{p.seconds * 1e3:.1f}", f"{(p.seconds - p.model_seconds) * 1e3:.1f}",
                             f"{p.share:.2f}"] for p in points]
            fit, fixed_model = split(points)
            calls = fit.calls_for(TARGET_SHARE, fixed_model)
            fit_rows.append([bench.name, method, f"{fit.fixed_outside * 1e3:.1f}",
                             f"{fit.per_call_outside * 1e6:.2f}",
                             f"{fit.per_call_model * 1e6:.2f}",
                             "-" if math.isnan(fit.limit_share) else f"{fit.limit_share:.2f}",
                             "never" if math.isinf(calls) else f"{calls:,.0f}"])
    body += table(["model", "method", "fixed ms outside the model",
                   "µs per call outside", "µs per call in the model", "share limit",
                   "calls for 0.9"], fit_rows)
    body += ["", "Measured points:", ""]
    body += table(["model", "method", "S", "model calls", "wall ms", "ms outside the model",
                   "model share"], points_rows)
    return Section("g", "Where an estimate's time goes", body)
