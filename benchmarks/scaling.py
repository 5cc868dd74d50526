"""(c) How cost grows with N (pairs per estimate_many call), S (samples per query), K (horizon)
and V (vocabulary): seconds and model calls along each axis with the others fixed, and the
least-squares slope of log cost against log size. Linear cost means a slope of 1."""

from __future__ import annotations

import math
import sys

import torch

import seqq
from benchmarks.plans import Plan
from benchmarks.report import Section, describe, table
from benchmarks.throughput import HISTORY_LENGTH, method_options
from benchmarks.timing import median, model_device, timed
from benchmarks.zoo import BenchModel, lstm
from seqq import queries as Q


def slope(sizes: list[float], costs: list[float]) -> float:
    """Least-squares exponent b of cost ≈ a·size^b."""
    x = [math.log(s) for s in sizes]
    y = [math.log(c) for c in costs]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    return (sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
            / sum((a - mx) ** 2 for a in x))


def _point(models: dict[int, BenchModel], method: str, N: int, S: int, K: int, V: int,
           seed: int) -> tuple[float, int]:
    bench = models[V]
    generator = torch.Generator().manual_seed(2)
    histories = torch.randint(V, (N, HISTORY_LENGTH), generator=generator).tolist()
    options = method_options(method, bench, S)
    seconds, estimates = timed(model_device(bench.model), lambda: seqq.estimate_many(
        bench.model, histories, Q.hitting_time(1, K), method, seed=seed, **options))
    return seconds, sum(e.model_calls for e in estimates)


def run(plan: Plan, device: str | None) -> Section:
    base = plan.scaling_base
    vocabularies = sorted({base["V"], *plan.scaling["V"]})
    models = {V: BenchModel(f"lstm-{plan.scaling_hidden}-V{V}", lstm(plan.scaling_hidden, V, device),
                            "") for V in vocabularies}
    body = [describe(__doc__), "",
            f"2-layer LSTM, hidden {plan.scaling_hidden}, random weights; base point "
            + ", ".join(f"{k} = {v}" for k, v in base.items())
            + f"; hitting-time queries; median of {plan.repeats} repeats, points interleaved. "
            "S also sets the beam width of beam-based methods.", ""]
    rows = []
    for method in plan.scaling_methods:
        for axis, values in plan.scaling.items():
            points = [{**base, axis: v} for v in values]
            for p in points:  # warm-up (allocations, first-call checks)
                _point(models, method, p["N"], p["S"], p["K"], p["V"], seed=0)
            seconds: list[list[float]] = [[] for _ in points]
            calls = [0] * len(points)
            for repeat in range(plan.repeats):
                for i, p in enumerate(points):
                    s, calls[i] = _point(models, method, p["N"], p["S"], p["K"], p["V"], repeat + 1)
                    seconds[i].append(s)
            times = [median(s) for s in seconds]
            exponent = slope(list(values), times)
            print(f"  {method}: time ∝ {axis}^{exponent:.2f}", file=sys.stderr, flush=True)
            rows.append([method, axis, ", ".join(map(str, values)),
                         ", ".join(f"{t:.3g}" for t in times), ", ".join(f"{c:,}" for c in calls),
                         f"{exponent:.2f}", f"{slope(list(values), calls):.2f}"])
    body += table(["method", "axis", "values", "seconds", "model calls", "exponent (time)",
                   "exponent (calls)"], rows)
    return Section("c", "Scaling in N, S, K and V", body)
