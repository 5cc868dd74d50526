"""Fig. 12: beams kept per step by coverage beam search at α = 0.95, 0.75, 0.5, from the
`coverage` sweep (Shakespeare)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from seqq.reports import figures
from seqq.reports.reproduction.claims import NO, PARTLY, UNKNOWN, YES, Check, table, verdict
from seqq.reports.reproduction.figure import drawn
from seqq.reports.reproduction.markdown import histories, links_line, values
from seqq.reports.reproduction.panels import ModelRun
from seqq.reports.reproduction.reproduce import Experiment
from seqq.reports.reproduction.stats import (
    alpha_of,
    beam_growth,
)
from seqq.reports.tables import to_markdown

figure = drawn("fig12", figures.beam_sizes)  # beams kept per step, per α


def caption(runs: Sequence[ModelRun]) -> str:
    return ("*Fig. 12: beams kept per step by coverage beam search on p(X_K ∈ a), one panel "
            "per K, one colour per coverage α (thin: one history; thick: the median); "
            f"{histories(runs, None)}.*")


def section(run: ModelRun, csv: str) -> list[str]:
    growth = beam_growth(run.rows)
    calls = run.rows.groupby("method").model_calls.median()
    shown = pd.DataFrame({"step": [*growth.index, "model calls"]})
    for method in growth.columns:
        shown[f"α = {alpha_of(method)}"] = ([f"{x:,.0f}" for x in growth[method]]
                                             + [f"{calls[method]:,.0f}"])
    return [links_line(run, csv, f"at K = {', '.join(map(str, values(run, 'K')))} with "
                                  f"every α"),
            "", "Median beams kept per step over the histories, and the median model calls:",
            "", to_markdown(shown), ""]


def checks(run: ModelRun) -> list[Check]:
    """Fig. 12: coverage beam search needs exponentially many beams in K, more for larger α."""
    growth = beam_growth(run.rows)
    if growth.empty:
        return [Check("the number of beams grows exponentially in K", "App. G.5 (Fig. 12)",
                      "no beam sizes recorded", UNKNOWN)]
    factors, fits = {}, {}
    for method in growth.columns:
        # the last step keeps only the paths that end in the query's set: left out of the fit
        steps = growth[method].dropna().iloc[:-1] if len(growth) > 2 else growth[method]
        slope, r2 = _log_fit(steps)
        factors[method], fits[method] = math.exp(slope), r2
    alphas = [alpha_of(m) for m in growth.columns]
    exponential = all(f > 1.5 and fits[m] >= 0.9 for m, f in factors.items())
    last = growth.iloc[-2] if len(growth) > 2 else growth.iloc[-1]
    return [
        Check("the number of beams grows exponentially in K", "App. G.5 (Fig. 12)",
              "median beams per step, steps 1…K−1: "
              + "; ".join(f"α = {a}: ×{factors[m]:.1f} per step (R² of the log-linear fit "
                          f"{fits[m]:.2f})" for a, m in zip(alphas, growth.columns, strict=True)),
              YES if exponential else PARTLY if all(f > 1 for f in factors.values()) else NO,
              "per α: log-linear fit of the median beams per step, ×1.5 or more per step "
              "with R² ≥ 0.9"),
        Check("a larger α needs more beams", "Fig. 12 (α = 0.95, 0.75, 0.5)",
              f"median beams at step {last.name}: "
              + ", ".join(f"{last[m]:,.0f} (α = {a})"
                          for a, m in zip(alphas, growth.columns, strict=True)),
              YES if np.all(np.diff(last.to_numpy()) <= 0) else NO,
              "the median beams at the last full step ordered by α"),
    ]


def _log_fit(values: pd.Series) -> tuple[float, float]:
    """Slope and R² of log(values) against their index (steps)."""
    values = values[values > 0]
    if len(values) < 2:
        return math.nan, math.nan
    x, y = values.index.to_numpy(float), np.log(values.to_numpy(float))
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    total = ((y - y.mean()) ** 2).sum()
    return float(slope), float(1 - (residual ** 2).sum() / total) if total > 0 else 1.0


EXPERIMENT = Experiment(
    name="fig12", title="Fig. 12", sweep="coverage", query="event_at",
    methods=("coverage_beam",), levels=None, block="fig12",
    columns=("history_id", "K", "method", "alpha", "model_calls", "estimate", "beam_sizes"),
    figure=figure, caption=caption, section=section, claims=table(checks, "Fig. 12"),
    verdict=verdict(checks))
