"""Figs 7–9: MOOCs estimates vs ground truth at S = 10, 100, 1000 (Figs 5/6's rows)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from seqq.reports import figures
from seqq.reports.reproduction.claims import NO, PARTLY, YES, Check, share, table, verdict
from seqq.reports.reproduction.experiments import fig5
from seqq.reports.reproduction.figure import with_n
from seqq.reports.reproduction.markdown import histories
from seqq.reports.reproduction.panels import SETTER, ModelRun
from seqq.reports.reproduction.stats import (
    above_truth,
    iqr,
    log_ratios,
    methods_in,
    spread_ks,
)
from seqq.reports.tables import to_markdown

SCATTER = {10: "fig7", 100: "fig8", 1000: "fig9"}  # the paper's figure per budget level S


def figure(runs: Sequence[ModelRun]) -> dict[str, Figure]:
    """Figs 7–9: estimate vs ground truth, one figure per model and budget level S."""
    out = {}
    for run in runs:
        for stem, fig in figures.scatter(run.rows).items():
            level = int(stem.rsplit("_S", 1)[1])
            out[f"{SCATTER.get(level, f'scatter_S{level}')}_{run.dataset}"] = with_n(fig, [run])
    return out


def caption(runs: Sequence[ModelRun]) -> str:
    levels = sorted({s for r in runs for s in r.levels})
    return (f"*Figs 7, 8, 9: estimate vs ground truth at S = {', '.join(map(str, levels))} "
            "(one figure each), columns K = 3, 5, 7, 9, 11, rows the methods, the truths' "
            f"histogram underneath; {histories(runs)}. Zero estimates sit on the dotted floor "
            "line.*")


def section(run: ModelRun, csv: str) -> list[str]:
    ks = spread_ks(run)
    rows = run.rows[run.rows.K.isin(ks)]
    out = []
    for s in run.levels:
        for method in methods_in(rows):
            cells = []
            for k in ks:
                cell = rows[(rows.budget_level == s) & (rows.method == method)
                            & (rows["K"] == k)]
                cells.append(f"{iqr(log_ratios(cell)):.2f} · "
                             f"{(cell.estimate < cell.truth).mean():.0%} · "
                             f"{(cell.estimate <= 0).mean():.0%}")
            out.append([s, method, *cells])
    shown = pd.DataFrame(out, columns=["S", "method", *[f"K = {k}" for k in ks]])
    return [f"N = {run.n:,} histories: the rows of {csv} at K = "
            f"{', '.join(map(str, ks))}. Per S, method and K: the spread of the estimates "
            "around the truth (interquartile range of log10 p̂/p over the nonzero estimates) · "
            "the share under the truth · the share p̂ = 0:", "", to_markdown(shown), ""]


def checks(run: ModelRun) -> list[Check]:
    """Figs 7–9: beam search under the truth, more so at larger K; the sampling estimates
    closer to the diagonal as S grows."""
    ks = spread_ks(run)
    rows = run.rows[run.rows.K.isin(ks)]
    beam = rows[rows.method == "beam"]
    over = int(above_truth(beam).sum())
    levels = run.levels
    tighter, said = [], []
    for method in (SETTER, "importance"):
        for k in ks:
            spreads = [iqr(log_ratios(rows[(rows.method == method) & (rows["K"] == k)
                                           & (rows.budget_level == s)])) for s in levels]
            tighter.append(bool(np.all(np.diff(spreads) < 0)))
            if k == ks[len(ks) // 2]:
                said.append(f"{method} at K = {k}: " + " → ".join(f"{x:.2f}" for x in spreads))
    ratio = beam.assign(r=beam.estimate / beam.truth).groupby(["budget_level", "K"]).r.median()
    falls = [s for s in levels if ratio[s].iloc[-1] < ratio[s].iloc[0]]
    return [
        Check("beam search never overestimates: its points lie on or under the diagonal",
              "beam search's sum is a lower bound (§4)",
              f"{over} of {len(beam):,} beam estimates above the truth by more than 3 of the "
              "truth's standard errors", YES if over == 0 else PARTLY if over <= 0.01 * len(beam)
              else NO, "count of beam estimates above the truth by more than 3 of its standard "
              "errors: yes at none, partly at ≤ 1%"),
        Check("the sampling estimates close in on the diagonal as S grows (Fig. 7 → 9)",
              "the figures (no values in the text)",
              f"spread (IQR of log10 p̂/p) narrower at every larger S for {sum(tighter)} of "
              f"{len(tighter)} (method, K); " + "; ".join(said)
              + f" (S = {' → '.join(map(str, levels))})", share(sum(tighter), len(tighter)),
              "per (method, K): the IQR narrower at every larger S (no interval)"),
        Check("beam search falls further under the truth as K grows",
              "the figures; §5 (Fig. 3)",
              "median p̂/p of beam search, K = " + f"{ks[0]} → {ks[-1]}: "
              + ", ".join(f"{ratio[s].iloc[0]:.2f} → {ratio[s].iloc[-1]:.2f} (S = {s})"
                          for s in levels), share(len(falls), len(levels)),
              "per S: the median p̂/p lower at the largest K than at the smallest (no interval)"),
    ]


EXPERIMENT = dataclasses.replace(
    fig5.EXPERIMENT, name="fig7-9", title="Figs 7–9", block="fig7-9", csv=fig5.EXPERIMENT.name,
    datasets=("moocs",), figure=figure, caption=caption, section=section,
    claims=table(checks, "Figs 7–9"), verdict=verdict(checks))
