"""Fig. 4a: per-query RAE of importance sampling and beam search against the restricted entropy
H(q), at Fig. 3's protocol (the S = 100 rows of Figs 5/6's CSVs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy.stats import spearmanr

from seqq.reports import figures
from seqq.reports.reproduction.claims import Check, one, table, verdict
from seqq.reports.reproduction.experiments import fig5
from seqq.reports.reproduction.figure import only, rows_of, with_n
from seqq.reports.reproduction.markdown import fmt, histories
from seqq.reports.reproduction.panels import ModelRun
from seqq.reports.reproduction.significance import (
    LEVEL,
    bootstrap,
    per_history,
)
from seqq.reports.reproduction.stats import (
    FIG3_LEVEL,
    entropy_fits,
)
from seqq.reports.tables import to_markdown

SPREAD = (0.1, 0.9)  # the quantiles of H(q) its section states


def figure(runs: Sequence[ModelRun]) -> dict[str, Figure]:
    """Fig. 4a: per-query RAE vs restricted entropy, IS and beam search, at Fig. 3's S."""
    rows = rows_of(runs)
    rows = rows[(rows.budget_level == FIG3_LEVEL) & rows.method.isin(("importance", "beam"))]
    return {"fig4a": with_n(only(figures.rae_vs_entropy(rows)), runs)}


def caption(runs: Sequence[ModelRun]) -> str:
    return ("*Fig. 4a: per-query RAE of importance sampling and beam search against the "
            "restricted entropy H(q) of the ground truth, with least-squares lines, at Fig. 3's "
            f"protocol (S = {FIG3_LEVEL}), one panel per model: {histories(runs)}. The paper "
            "draws this for its datasets; its text gives no values.*")


def section(run: ModelRun, csv: str) -> list[str]:
    rows = run.rows[run.rows.budget_level == FIG3_LEVEL]
    fits = entropy_fits(rows)
    h = rows.drop_duplicates(["history_id", "K"]).entropy
    shown = pd.DataFrame({
        "method": fits.method, "queries": fits.queries,
        "Pearson r": [f"{x:.2f}" for x in fits.r], "Spearman ρ": [f"{x:.2f}" for x in fits.rho],
        "fit: RAE per nat": [f"{x:+.3f}" for x in fits.slope],
        "intercept": [f"{x:+.3f}" for x in fits.intercept],
        "median RAE, lowest third of H(q)": [fmt(x) for x in fits.low],
        "highest third": [fmt(x) for x in fits.high]})
    csv = ", ".join(link for link in csv.split(", ") if f"_S{FIG3_LEVEL}.csv" in link) or csv
    return [f"N = {run.n:,} histories, the S = {FIG3_LEVEL} rows of {csv} (Fig. 3's protocol; "
            f"{len(rows):,} rows). H(q) in nats: median {h.median():.2f}, "
            f"{SPREAD[0]:.0%}–{SPREAD[1]:.0%} {h.quantile(SPREAD[0]):.2f}–"
            f"{h.quantile(SPREAD[1]):.2f}. Per-query RAE against H(q):", "",
            to_markdown(shown), ""]


def checks(run: ModelRun) -> list[Check]:
    """Fig. 4a: beam search's error rises with the restricted entropy, importance sampling's
    far less: Spearman's ρ of the per-query RAE against H(q), with bootstrap intervals."""
    rows = run.rows[run.rows.budget_level == FIG3_LEVEL]
    fits = entropy_fits(rows).set_index("method")
    rae = {m: per_history(rows[rows.method == m], ["K"]).to_numpy()
           for m in ("beam", "importance")}
    entropy = per_history(rows[rows.method == "beam"], ["K"], "entropy").to_numpy()

    def rho(method: str, idx: np.ndarray) -> float:
        return float(spearmanr(entropy[idx].ravel(), rae[method][idx].ravel(),
                               nan_policy="omit").statistic)

    beam = bootstrap(lambda idx: rho("beam", idx), len(entropy))
    gap = bootstrap(lambda idx: rho("beam", idx) - rho("importance", idx), len(entropy))

    def said(f: pd.Series) -> str:
        return (f"Spearman ρ = {f.rho:.2f}, Pearson r = {f.r:.2f}, fit {f.slope:+.3f} RAE per "
                f"nat; median RAE {fmt(f.low)} → {fmt(f.high)} from the lowest to the highest "
                "third of H(q)")

    test = f"Spearman's ρ with its {1 - LEVEL:.0%} bootstrap interval over the histories"
    return [
        Check("beam search's RAE correlates with the restricted entropy H(q)",
              "Fig. 4a (linear fits per method)",
              f"beam: {said(fits.loc['beam'])}; ρ [{beam[1]:.2f}, {beam[2]:.2f}]",
              one(beam.cell()), test + " (above 0)"),
        Check("…more than importance sampling's", "Fig. 4a: IS vs beam",
              f"importance: {said(fits.loc['importance'])}; ρ(beam) − ρ(importance) = "
              f"{gap[0]:+.2f} [{gap[1]:+.2f}, {gap[2]:+.2f}]",
              one(gap.cell()),
              test + ", of the difference (above 0)"),
    ]


EXPERIMENT = dataclasses.replace(
    fig5.EXPERIMENT, name="fig4a", title="Fig. 4a", block="fig4a", csv=fig5.EXPERIMENT.name,
    levels_read=(FIG3_LEVEL,),  # of Figs 5/6's rows: its figure and claims read S = 100 alone
    figure=figure, caption=caption, section=section, claims=table(checks, "Fig. 4a"),
    verdict=verdict(checks))
