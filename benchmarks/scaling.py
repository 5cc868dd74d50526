"""(c) How cost grows with N (pairs per estimate_many call), S (samples per query), K (horizon)
and V (vocabulary): seconds and model calls along each axis with the others fixed, and two fitted
exponents b. The log-log one fits cost ≈ a·size^b; it reads above 1 when a fixed cost is
shared, e.g. the first step's prefixes, which every sample draws from a few distinct nodes: calls
of importance sampling grow as 2 000·K − 3 658 on the K axis, linear with a negative intercept.
The marginal one fits cost ≈ c + a·size^b, from how the cost added between neighbouring sizes
grows (exponent = 1 + the slope of log Δcost/Δsize against the log midpoint), so fixed costs
drop out. Linear cost means a marginal exponent of 1."""

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


def marginal_exponent(sizes: list[float], costs: list[float]) -> float:
    """Exponent b of cost ≈ c + a·size^b, from the increments between neighbouring sizes
    (NaN when a cost does not grow, e.g. timing noise on a flat axis)."""
    rates = [(c1 - c0) / (s1 - s0) for s0, s1, c0, c1 in zip(sizes, sizes[1:], costs, costs[1:],
                                                             strict=False)]
    if len(rates) < 2 or min(rates) <= 0:
        return math.nan
    midpoints = [math.sqrt(s0 * s1) for s0, s1 in zip(sizes, sizes[1:], strict=False)]
    return 1 + slope(midpoints, rates)


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
            sizes = list(values)
            exponent = marginal_exponent(sizes, times)
            print(f"  {method}: time ∝ {axis}^{exponent:.2f}", file=sys.stderr, flush=True)
            rows.append([method, axis, ", ".join(map(str, values)),
                         ", ".join(f"{t:.3g}" for t in times), ", ".join(f"{c:,}" for c in calls),
                         f"{slope(sizes, times):.2f} / {slope(sizes, calls):.2f}",
                         f"{exponent:.2f} / {marginal_exponent(sizes, calls):.2f}"])
    body += table(["method", "axis", "values", "seconds", "model calls",
                   "log-log exponent (time / calls)", "marginal exponent (time / calls)"], rows)
    return Section("c", "Scaling in N, S, K and V", body)
