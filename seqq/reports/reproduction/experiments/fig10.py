"""Figs 10 and 11: median and mean RAE vs the level S at K = 3, 7, 11, with uniform and
naive Monte Carlo, from the `budgets` sweep."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from seqq.reports import figures
from seqq.reports.reproduction.claims import UNKNOWN, Check, table, tallied, verdict
from seqq.reports.reproduction.figure import median_and_mean
from seqq.reports.reproduction.markdown import fmt, histories, links_line, values
from seqq.reports.reproduction.panels import PAPER_METHODS, SETTER, ModelRun
from seqq.reports.reproduction.reproduce import Experiment
from seqq.reports.reproduction.significance import (
    LEVEL,
    SUPPORTS,
    Tally,
    majority,
    median_trends,
    where,
)
from seqq.reports.reproduction.stats import (
    decade_ratios,
    loglog_slope,
    methods_in,
    pivot,
)
from seqq.reports.tables import to_markdown

PAPER_PER_DECADE = 3  # "an order of magnitude roughly corresponds to a three times reduction"
ABOUT_3 = (2.0, 4.5)  # "roughly a three times reduction": the ratios per decade that say so
FAR = 0.95  # an RAE this high is no better than an estimate of 0 (RAE 1)
AT_ONE = 0.999  # an RAE of 1 to three decimals: an estimate of 0, or next to 0
MAJORITY_TEST = (f"exact binomial test of the share of queries against one half, two-sided, "
                 f"p < {LEVEL:g} (the sign test of the median; Holm over the cells)")

figure = median_and_mean(("fig10", "fig11"), figures.rae_vs_level)  # Figs 10, 11: RAE vs S


def caption(runs: Sequence[ModelRun]) -> str:
    return ("*Fig. 10 (median) and Fig. 11 (mean) RAE of p(τ(a) = K) vs the level S "
            "(the hybrid's tail samples; every method gets the hybrid's model calls), one row "
            f"of panels per K, one column per model: {histories(runs)}.*")


def section(run: ModelRun, csv: str) -> list[str]:
    ks, levels = values(run, "K"), run.levels
    methods = methods_in(run.rows)
    median = pivot(run.rows, ["K", "budget_level"])
    mean = pivot(run.rows, ["K", "budget_level"], "mean")
    calls = run.rows[run.rows.method == SETTER].groupby(["K", "budget_level"]).model_calls.mean()
    lines = [links_line(run, csv, f"done at every K = {', '.join(map(str, ks))} and every S = "
                                   f"{levels[0]}…{levels[-1]:,} by all {len(methods)} methods"),
             "", "Median RAE (Fig. 10) (mean RAE, Fig. 11) per level S, with the mean "
             "model calls per query:", ""]
    for k in ks:
        shown = pd.DataFrame({"S": levels, "calls": [f"{calls[(k, s)]:,.0f}" for s in levels]})
        for m in methods:
            shown[m] = [f"{fmt(median.loc[(k, s), m])} ({fmt(mean.loc[(k, s), m])})"
                        for s in levels]
        lines += [f"K = {k}:", "", to_markdown(shown), ""]
    ratio = pd.DataFrame({"method": methods})
    for k in ks:
        cells = []
        for m in methods:
            per = decade_ratios(median.loc[k][m])
            slope_s = loglog_slope(levels, median.loc[k][m].reindex(levels))
            slope_c = loglog_slope([calls[(k, s)] for s in levels],
                                   median.loc[k][m].reindex(levels))
            cells.append((f"×{per.median():.2f}" if len(per) else "–")
                         + f" · {slope_s:+.2f} · {slope_c:+.2f}")
        ratio[f"K = {k}"] = cells
    return lines + ["Per method and K: how many times lower the median RAE is at 10·S than at S "
                    "(median over the decades of S; 1/√S gives ×"
                    + f"{math.sqrt(10):.2f}) · the log-log slope "
                    "of the median RAE against S · against the model calls (−0.5 is 1/√calls):",
                    "", to_markdown(ratio), ""]


def checks(run: ModelRun) -> list[Check]:
    """Figs 10 and 11: 10× the level S, about √10 ≈ 3.16× lower RAE for IS and the hybrid (the
    fitted ratio per decade with its bootstrap interval); naive MC at RAE 1 and uniform MC
    no better than that (the sign test of their median RAE per cell)."""
    median = pivot(run.rows, ["K", "budget_level"])
    checks = [_per_decade(run.rows)]
    if "naive" in median.columns:
        checks.append(_naive(run.rows, median["naive"]))
    if "uniform" in median.columns:
        checks += _uniform(run.rows, median)
    return checks


def _per_decade(rows: pd.DataFrame) -> Check:
    """Per (method, K): 10^−slope of the log10 median RAE per decade of S, with its bootstrap
    interval, inside `ABOUT_3` where the claim holds (an equivalence test)."""
    sampling = rows[rows.method.isin(["importance", SETTER])]
    said = functools.partial(
        Check, "10× the level S gives about "
        f"{PAPER_PER_DECADE}× lower RAE (1/√S) for IS and the hybrid",
        "\"increasing the computation budget by an order of magnitude roughly corresponds to a "
        "three times reduction in RAE\" (App. G.2)",
        test=f"per (method, K): 10^−slope of the log10 median RAE per decade of S, its "
             f"{1 - LEVEL:.0%} bootstrap interval over the histories inside ×{ABOUT_3[0]:g}–"
             f"×{ABOUT_3[1]:g} (Holm over the cells)")
    if sampling.budget_level.nunique() < 2:
        return said("one level S so far", UNKNOWN)
    trends = median_trends(sampling, ["method", "K"], "budget_level", math.log10, np.log10)
    ratios = {key: b.map(lambda x: 10 ** -x) for key, b in trends.items()}
    tally = Tally.of([r.cell_within(ABOUT_3) for r in ratios.values()])
    per_method = "; ".join(
        f"{method} " + ", ".join(f"×{r:.2f} [×{low:.2f}, ×{high:.2f}] (K = {k:g})"
                                 for (m, k), (r, low, high) in ratios.items() if m == method)
        for method in dict.fromkeys(m for m, _ in ratios))
    return said(f"median RAE ratio per decade of S, from the fitted slope: {per_method}; inside "
                f"×{ABOUT_3[0]:g}–×{ABOUT_3[1]:g} {tally.said('(method, K)')}", tallied(tally))


def _naive(rows: pd.DataFrame, naive: pd.Series) -> Check:
    """Per (K, S): naive MC's estimate 0 (RAE 1) on more than half of the queries beyond the
    noise (`majority`): its median RAE is 1."""
    runs = rows[rows.method == "naive"]
    zero = runs.groupby("budget_level").estimate.apply(lambda e: (e == 0).mean())
    leads = {key: majority(cell.estimate.to_numpy() == 0)
             for key, cell in runs.groupby(["K", "budget_level"])}
    tally = Tally.of(list(leads.values()))
    last = zero.index[-1]
    return Check(
        "naive MC is consistently 0: RAE of 1", "App. G.2 (Figs 10, 11)",
        f"median RAE 1 in {int((naive >= AT_ONE).sum())} of {len(naive)} (K, S), the estimate "
        f"0 on most queries {tally.said('(K, S)')}"
        + (f"; beyond the noise at {where(leads, ['K', 'budget_level'], SUPPORTS)}"
           if 0 < tally.supports < tally.cells else "") + "; "
        f"estimates of 0: {zero.iloc[0]:.0%} at S = {zero.index[0]} → {zero.iloc[-1]:.0%} at "
        f"S = {last}; median RAE at S = {last}: "
        + ", ".join(f"{fmt(naive[(k, last)])} (K = {k})" for k in naive.index.unique("K")),
        tallied(tally), f"per (K, S): {MAJORITY_TEST}: the estimate 0 (RAE 1)")


def _uniform(rows: pd.DataFrame, median: pd.DataFrame) -> list[Check]:
    """Per (K, S): uniform MC's RAE at `FAR` or above on more than half of the queries beyond
    the noise (`majority`): no better than an estimate of 0, as naive MC; and where naive MC
    ran, the two coinciding: both at RAE 1 (`AT_ONE`) on more than half of the same queries
    beyond the noise."""
    runs = rows[rows.method == "uniform"]
    leads = {key: majority(cell.rae.to_numpy() >= FAR)
             for key, cell in runs.groupby(["K", "budget_level"])}
    tally = Tally.of(list(leads.values()))
    uniform = median["uniform"]
    out = [Check(
        "uniform MC has a high variance: no better than an estimate of 0",
        "App. G.2 (Figs 10, 11)",
        f"RAE ≥ {FAR:g} on most queries {tally.said('(K, S)')}; mean RAE up to "
        f"{pivot(runs, ['K', 'budget_level'], 'mean')['uniform'].max():.2f} (median ≤ "
        f"{uniform.max():.2f}: rare large overestimates)",
        tallied(tally), f"per (K, S): {MAJORITY_TEST}: RAE ≥ {FAR:g}")]
    if "naive" not in median.columns:
        return out
    both = rows[rows.method.isin(["uniform", "naive"])].pivot_table(
        index=["K", "budget_level", "history_id"], columns="method", values="rae",
        aggfunc="first").dropna()
    zero = (both.uniform >= AT_ONE) & (both.naive >= AT_ONE)
    same = {key: majority(cell.to_numpy()) for key, cell in
            zero.groupby(level=["K", "budget_level"])}
    coincide = Tally.of(list(same.values()))
    medians = int(((median["naive"] >= AT_ONE) & (uniform >= AT_ONE)).sum())
    out.append(Check(
        "uniform MC often coincides with naive MC", "App. G.2 (Figs 10, 11)",
        f"both at RAE 1 (≥ {AT_ONE:g}) on most of the same queries "
        f"{coincide.said('(K, S)')}"
        + (f": {where(same, ['K', 'budget_level'], SUPPORTS)}" if coincide.supports else "")
        + f"; both medians at RAE 1 in {medians} of {len(uniform)}; both at RAE 1 on "
        f"{zero.mean():.0%} of all queries", tallied(coincide),
        f"per (K, S), on the queries both ran: {MAJORITY_TEST}: both RAE ≥ {AT_ONE:g}"))
    return out


EXPERIMENT = Experiment(
    name="fig10", title="Figs 10, 11", sweep="budgets", query="hitting_time",
    methods=(*PAPER_METHODS, "uniform", "naive"), levels=None, block="fig10",
    cells=("budget_level",), split="K",  # ~3.6 MB per K at N = 1000
    figure=figure, caption=caption, section=section, claims=table(checks, "Figs 10, 11"),
    verdict=verdict(checks))
