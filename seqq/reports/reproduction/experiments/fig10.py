"""Figs 10 and 11: median and mean RAE vs the budget level S at K = 3, 7, 11, with uniform and
naive Monte Carlo, from the `budgets` sweep."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from seqq.reports import figures
from seqq.reports.reproduction.claims import Check, share, table, verdict
from seqq.reports.reproduction.figure import median_and_mean
from seqq.reports.reproduction.markdown import fmt, histories, links_line, values
from seqq.reports.reproduction.panels import PAPER_METHODS, SETTER, ModelRun
from seqq.reports.reproduction.reproduce import Experiment
from seqq.reports.reproduction.stats import (
    decade_ratios,
    loglog_slope,
    methods_in,
    pivot,
)
from seqq.reports.tables import to_markdown

figure = median_and_mean(("fig10", "fig11"), figures.rae_vs_budget)  # Figs 10, 11: RAE vs S


def caption(runs: Sequence[ModelRun]) -> str:
    return ("*Fig. 10 (median) and Fig. 11 (mean) RAE of p(τ(a) = K) vs the budget level S "
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
             "", "Median RAE (Fig. 10) (mean RAE, Fig. 11) per budget level S, with the mean "
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
                    "(median over the decades of S; 1/√budget gives ×3.16) · the log-log slope "
                    "of the median RAE against S · against the model calls (−0.5 is 1/√budget):",
                    "", to_markdown(ratio), ""]


def checks(run: ModelRun) -> list[Check]:
    """Figs 10 and 11: 10× the budget, about √10 ≈ 3.16× lower RAE for IS and the hybrid;
    naive MC at RAE 1; uniform MC erratic, often no better than naive."""
    median = pivot(run.rows, ["K", "budget_level"])
    mean = pivot(run.rows, ["K", "budget_level"], "mean")
    ks = sorted(run.rows.K.unique())
    checks = []
    ratios, said = [], []
    for method in ("importance", SETTER):
        if method not in median.columns:
            continue
        per = pd.concat([decade_ratios(median.loc[k][method]) for k in ks])
        ratios += list(per)
        if len(per):
            said.append(f"{method} ×{per.median():.2f} (×{per.min():.2f}–×{per.max():.2f})")
    checks.append(Check(
        "10× the budget gives about 3× lower RAE (1/√budget) for IS and the hybrid",
        "\"a 10× budget gives roughly a three times reduction in RAE\" (App. G.2)",
        ("median RAE at S over at 10·S, over K and decades: " + "; ".join(said)
         + f" [{len(ratios)} ratios]") if ratios else "one decade of S not yet complete",
        share(sum(2.0 <= r <= 4.5 for r in ratios), len(ratios)),
        "per (method, K, decade): the ratio of medians within ×2–×4.5 (no interval)"))
    if "naive" in median.columns:
        naive = median["naive"]
        zero = run.rows[run.rows.method == "naive"].groupby("budget_level").estimate.apply(
            lambda e: (e == 0).mean())
        at_one = naive[naive >= 0.999]
        checks.append(Check(
            "naive MC is consistently 0: RAE of 1", "App. G.2 (Figs 10, 11)",
            f"median RAE 1 in {len(at_one)} of {len(naive)} (K, S), up to S = "
            f"{max((s for _, s in at_one.index), default='–')}; estimates of 0: "
            f"{zero.iloc[0]:.0%} at S = {zero.index[0]} → {zero.iloc[-1]:.0%} at S = "
            f"{zero.index[-1]}; median RAE at S = {zero.index[-1]}: "
            + ", ".join(f"{fmt(naive[(k, zero.index[-1])])} (K = {k})" for k in ks),
            share(len(at_one), len(naive)),
            "per (K, S): the median RAE is 1 (every estimate 0 at most but a few)"))
    if "uniform" in median.columns:
        uniform = median["uniform"]
        bad = uniform[uniform >= 0.95]
        same = int(((median["naive"] >= 0.999) & (uniform >= 0.999)).sum()
                   if "naive" in median.columns else 0)
        checks.append(Check(
            "uniform MC has a high variance and often coincides with naive MC",
            "App. G.2 (Figs 10, 11)",
            f"median RAE ≥ 0.95 in {len(bad)} of {len(uniform)} (K, S); both at RAE 1 in "
            f"{same}; mean RAE up to {mean['uniform'].max():.2f} (median ≤ "
            f"{uniform.max():.2f}: rare large overestimates)",
            share(len(bad), len(uniform)),
            "per (K, S): uniform MC's median RAE ≥ 0.95"))
    return checks


EXPERIMENT = Experiment(
    name="fig10", title="Figs 10, 11", sweep="budgets", query="hitting_time",
    methods=(*PAPER_METHODS, "uniform", "naive"), levels=None, block="fig10",
    cells=("budget_level",), split="K",  # ~3.6 MB per K at N = 1000
    figure=figure, caption=caption, section=section, claims=table(checks, "Figs 10, 11"),
    verdict=verdict(checks))
