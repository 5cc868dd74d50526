"""Figs 5 and 6: median (Fig. 5) and mean (Fig. 6) RAE vs K at S = 10, 100, 1000, from the
`horizons` sweep (its S = 100 rows are Fig. 3's protocol, with H(q)); Figs 4a and 7–9 link
its CSVs."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from seqq.reports import figures
from seqq.reports.reproduction.claims import (
    MEAN_TEST,
    SIGN_TEST,
    SLOPE_TEST,
    Check,
    table,
    tallied,
    verdict,
)
from seqq.reports.reproduction.export import FIG3_COLUMNS
from seqq.reports.reproduction.figure import median_and_mean
from seqq.reports.reproduction.markdown import fmt, histories, links_line, values
from seqq.reports.reproduction.panels import PAPER_METHODS, SETTER, ModelRun
from seqq.reports.reproduction.reproduce import Experiment
from seqq.reports.reproduction.significance import (
    CONTRADICTS,
    Tally,
    beats,
    mean_lead,
    median_trends,
    sign_lead,
    trend_said,
    where,
)
from seqq.reports.reproduction.stats import (
    methods_in,
    pivot,
)
from seqq.reports.tables import to_markdown

figure = median_and_mean(("fig5", "fig6"), figures.rae_vs_k)  # Figs 5, 6: RAE vs K per S
LEVELS = (10, 100, 1000)  # the paper's levels S of Figs 5, 6


def caption(runs: Sequence[ModelRun]) -> str:
    levels = sorted({s for r in runs for s in r.levels})
    return (f"*Fig. 5 (median) and Fig. 6 (mean) RAE of p(τ(a) = K) vs K at equal model calls "
            f"(the hybrid's with S = {', '.join(map(str, levels))}; one row of panels per S), "
            f"one column per model: {histories(runs)}. The paper's figures are plots; its "
            "text gives no values, so none are drawn.*")


def section(run: ModelRun, csv: str) -> list[str]:
    ks, levels = values(run, "K"), run.levels
    methods = methods_in(run.rows)
    lines = [links_line(run, csv, f"done at every K = {ks[0]}–{ks[-1]} and S = "
                                   f"{', '.join(map(str, levels))} by all three methods"), ""]
    calls = run.rows[run.rows.method == SETTER].groupby("budget_level").model_calls.mean()
    for name, stat in (("Median RAE (Fig. 5)", "median"), ("Mean RAE (Fig. 6)", "mean")):
        table = pivot(run.rows, ["K", "budget_level"], stat)
        shown = pd.DataFrame({"K": ks})
        for s in levels:
            shown[f"S = {s}"] = [" / ".join(fmt(table.loc[(k, s), m]) for m in methods)
                                 for k in ks]
        lines += [f"{name}, {' / '.join(methods)}:", "", to_markdown(shown), ""]
    lines += ["Mean model calls per query (the hybrid's, every method's budget): "
              + ", ".join(f"{calls[s]:,.0f} at S = {s}" for s in levels) + ".", ""]
    return lines


def checks(run: ModelRun) -> list[Check]:
    """Figs 5 and 6: the hybrid lowest at every K and level S (paired tests per cell), errors
    falling with S and growing with K (fitted slopes with their intervals)."""
    rows, cells = run.rows, ["budget_level", "K"]
    paper = ("\"systematically outperforms importance sampling … across all 4 datasets and for "
             f"all values of K\" (§5); Figs 5, 6 at S = {', '.join(map(str, LEVELS))}")
    checks = []
    for stat, name, lead, test in (("median", "Fig. 5", sign_lead, SIGN_TEST),
                                   ("mean", "Fig. 6", mean_lead, MEAN_TEST)):
        table = pivot(rows, cells, stat)
        rivals = [m for m in table.columns if m != SETTER]
        lowest = int((table.idxmin(axis=1) == SETTER).sum())
        leads = beats(rows, cells, SETTER, rivals, lead)
        tally = Tally.of(list(leads.values()))
        checks.append(Check(
            f"the hybrid has the lowest {stat} RAE ({name})", paper,
            f"lowest {stat} at {lowest} of {len(table)} (S, K); lower than both rivals "
            f"{tally.said('(S, K)')}"
            + (f" (the opposite: {where(leads, cells, CONTRADICTS)})" if tally.contradicts
               else ""), tallied(tally), test + ", against IS and beam search"))
    falls = median_trends(rows, ["method", "K"], "budget_level", math.log10)
    tally = Tally.of([b.cell(falls=True) for b in falls.values()])
    checks.append(Check(
        "median RAE falls as the level S grows", "implied by Figs 5, 6 and 10, 11",
        "slope of the log median RAE per decade of S, per (method, K): "
        + trend_said(falls, "per decade") + f"; falling {tally.said('(method, K)')}",
        tallied(tally), SLOPE_TEST + " (below 0: falls)"))
    grows = median_trends(rows, ["method", "budget_level"], "K")
    tally = Tally.of([b.cell() for b in grows.values()])
    checks.append(Check(
        "median RAE grows with K at every level S", "§5 (Fig. 3), Figs 5, 6",
        "slope of the log median RAE per K, per (method, S): " + trend_said(grows, "per K")
        + f"; growing {tally.said('(method, S)')}", tallied(tally),
        SLOPE_TEST + " (above 0: grows)"))
    return checks


EXPERIMENT = Experiment(
    name="fig5", title="Figs 5, 6", sweep="horizons", query="hitting_time",
    methods=PAPER_METHODS, levels=LEVELS, block="fig5", cells=("budget_level",),
    columns=(*FIG3_COLUMNS, "entropy"), split="S",  # ~2 MB per level at N = 1000
    figure=figure, caption=caption, section=section, claims=table(checks, "Figs 5, 6"),
    verdict=verdict(checks))
