"""Figs 7–9: MOOCs estimates vs ground truth at S = 10, 100, 1000 (Figs 5/6's rows)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy.stats import norm

from seqq.reports import figures
from seqq.reports.reproduction.claims import (
    SLOPE_TEST,
    Check,
    share,
    table,
    tallied,
    verdict,
)
from seqq.reports.reproduction.experiments import fig5
from seqq.reports.reproduction.figure import with_n
from seqq.reports.reproduction.markdown import histories
from seqq.reports.reproduction.panels import SETTER, ModelRun
from seqq.reports.reproduction.significance import (
    CONTRADICTS,
    MULTIPLE_COMPARISONS,
    UNDECIDED,
    Cell,
    Tally,
    bootstrap,
    median_slope,
    per_history,
    slope,
    trend_said,
)
from seqq.reports.reproduction.stats import (
    above_truth,
    iqr,
    log_ratios,
    methods_in,
    spread_ks,
)
from seqq.reports.tables import to_markdown

SIGMAS = 3.0  # an estimate above its truth by more than this many of the truth's errors
SCATTER = {10: "fig7", 100: "fig8", 1000: "fig9"}  # the paper's figure per level S


def figure(runs: Sequence[ModelRun]) -> dict[str, Figure]:
    """Figs 7–9: estimate vs ground truth, one figure per model and level S."""
    out = {}
    for run in runs:
        for stem, fig in figures.scatter(run.rows).items():
            level = int(stem.rsplit("_S", 1)[1])
            out[f"{SCATTER.get(level, f'scatter_S{level}')}_{run.dataset}"] = with_n(fig, [run])
    return out


def caption(runs: Sequence[ModelRun]) -> str:
    levels = sorted({s for r in runs for s in r.levels})
    ks = {int(k) for r in runs for k in r.rows.K.unique()}
    return (f"*Figs 7, 8, 9: estimate vs ground truth at S = {', '.join(map(str, levels))} "
            f"(one figure each), columns K from {min(ks)} to {max(ks)}, rows the methods, the truths' "
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
    """Figs 7–9: beam search under the truth (a z test per estimate), more so at larger K (the
    slope of its log median p̂/p per K); the sampling estimates closer to the diagonal as S
    grows (the slope of their log spread per decade of S); the slopes with their bootstrap
    intervals over the histories."""
    ks = spread_ks(run)
    rows = run.rows[run.rows.K.isin(ks)]
    beam = rows[rows.method == "beam"]
    return [_beam_under(beam), _closing_in(rows, ks, run.levels), _beam_falls(beam)]


def _beam_under(beam: pd.DataFrame) -> Check:
    """Beam search's sum is a lower bound: an estimate above its truth beyond the truth's own
    noise breaks it (a one-sided z test per estimate against the truth's standard error, Holm
    over the estimates); every other estimate is consistent with the claim."""
    over = int(above_truth(beam, SIGMAS).sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (beam.estimate / beam.truth - 1) / beam.truth_rel_stderr.fillna(0.0)
    z = z.fillna(0.0).to_numpy()  # an estimate equal to an exact truth: z = 0
    tally = Tally.of([Cell(CONTRADICTS if x > 0 else UNDECIDED, float(norm.sf(x)))
                      for x in z])
    consistent = tally.cells - tally.contradicts
    return Check(
        "beam search never overestimates: its points lie on or under the diagonal",
        "beam search's sum is a lower bound (§4)",
        f"{tally.contradicts} of {len(beam):,} beam estimates above the truth beyond its noise "
        f"after Holm's correction ({over} by more than {SIGMAS:g} of the truth's standard "
        "errors)",
        share(consistent, tally.contradicts, tally.cells),
        f"per estimate: above its truth, one-sided z test against the truth's standard error, "
        f"{MULTIPLE_COMPARISONS}; the others count as consistent with the claim")


def _closing_in(rows: pd.DataFrame, ks: Sequence[int], levels: Sequence[int]) -> Check:
    """Per (method, K) of the sampling methods: the slope of the log spread of log10 p̂/p
    (`_spread`) per decade of S, below 0 beyond the noise where they close in."""
    wide = per_history(rows.assign(log_ratio=np.log10(rows.estimate.where(rows.estimate > 0)
                                                      / rows.truth)),
                       ["method", "K", "budget_level"], "log_ratio")
    trends, said = {}, []
    for method in (SETTER, "importance"):
        for k in ks:
            table = wide[(method, k)]
            values, decades = table.to_numpy(), np.log10(table.columns.to_numpy(float))
            with np.errstate(divide="ignore"):  # a resample of one history has no spread
                trends[(method, k)] = bootstrap(
                    lambda idx, v=values, x=decades: slope(x, np.log(_spread(v[idx]))),
                    len(values))
            if k == ks[len(ks) // 2]:
                said.append(f"{method} at K = {k}: "
                            + " → ".join(f"{x:.2f}" for x in _spread(values)))
    tally = Tally.of([b.cell(falls=True) for b in trends.values()])
    return Check(
        "the sampling estimates close in on the diagonal as S grows (Fig. 7 → 9)",
        "the figures (no values in the text)",
        "slope of the log spread (IQR of log10 p̂/p) per decade of S, per (method, K): "
        + trend_said(trends, "per decade") + f"; narrowing {tally.said('(method, K)')}; "
        + "; ".join(said) + f" (S = {' → '.join(map(str, levels))})", tallied(tally),
        SLOPE_TEST + " (below 0: closes in)")


def _spread(log_ratios: np.ndarray) -> np.ndarray:
    """The interquartile range of each column (histories × S) over its nonzero estimates."""
    low, high = np.nanpercentile(log_ratios, [25, 75], axis=0)
    return high - low


def _beam_falls(beam: pd.DataFrame) -> Check:
    """Per S: the slope of beam search's log median p̂/p per K, below 0 beyond the noise where
    it falls further under the truth."""
    wide = per_history(beam.assign(ratio=beam.estimate / beam.truth), ["budget_level", "K"],
                       "ratio")
    trends, said = {}, []
    for s in wide.columns.unique("budget_level"):
        table = wide[s]
        trends[(s,)] = median_slope(table.to_numpy(), table.columns.to_numpy(float))
        first, *_, last = np.nanmedian(table.to_numpy(), 0)
        said.append(f"{first:.2f} → {last:.2f} (S = {s:g})")
    ks = wide.columns.unique("K")
    tally = Tally.of([b.cell(falls=True) for b in trends.values()])
    return Check(
        "beam search falls further under the truth as K grows", "the figures; §5 (Fig. 3)",
        f"median p̂/p of beam search, K = {ks.min()} → {ks.max()}: " + ", ".join(said)
        + "; slope of its log per K: " + trend_said(trends, "per K")
        + f"; falling {tally.said('S')}", tallied(tally), SLOPE_TEST + ", per S (below 0: falls)")


EXPERIMENT = dataclasses.replace(
    fig5.EXPERIMENT, name="fig7-9", title="Figs 7–9", block="fig7-9", csv=fig5.EXPERIMENT.name,
    datasets=("moocs",), figure=figure, caption=caption, section=section,
    claims=table(checks, "Figs 7–9"), verdict=verdict(checks))
