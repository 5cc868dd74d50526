"""Figs 5 and 6: median (Fig. 5) and mean (Fig. 6) RAE vs K at S = 10, 100, 1000, from the
`horizons` sweep (its S = 100 rows are Fig. 3's protocol, with H(q)); Figs 4a and 7–9 link
its CSVs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from seqq.reports import figures
from seqq.reports.reproduction.claims import MOSTLY, NO, YES, Check, listed, share, table, verdict
from seqq.reports.reproduction.export import FIG3_COLUMNS
from seqq.reports.reproduction.figure import median_and_mean
from seqq.reports.reproduction.markdown import fmt, histories, links_line, values
from seqq.reports.reproduction.panels import PAPER_METHODS, SETTER, ModelRun
from seqq.reports.reproduction.reproduce import Experiment
from seqq.reports.reproduction.stats import (
    intervals,
    methods_in,
    pivot,
)
from seqq.reports.tables import to_markdown

figure = median_and_mean(("fig5", "fig6"), figures.rae_vs_k)  # Figs 5, 6: RAE vs K per S


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


def lowest(rows: pd.DataFrame, index: Sequence[str], stat: str, claim: str,
           paper: str) -> Check:
    """"The hybrid has the lowest `stat` RAE" per cell of `index`: where it is not, whether
    another method is lower beyond noise (the two 95% intervals apart) or within it (a tie)."""
    cells = intervals(rows, index, stat)
    best = cells["value"].unstack("method").idxmin(axis=1)
    names = ["S" if c == "budget_level" else c for c in index]
    missed, beaten = [], []
    for key, method in best.items():
        if method == SETTER:
            continue
        key = key if isinstance(key, tuple) else (key,)
        where = ", ".join(f"{n} = {v}" for n, v in zip(names, key, strict=True))
        missed.append(f"{where} ({method})")
        if cells.loc[(*key, SETTER), "low"] > cells.loc[(*key, method), "high"]:
            beaten.append(f"{where} ({method})")
    said = f"at {len(best) - len(missed)} of {len(best)} cells"
    if missed:
        said += (f"; elsewhere lower within the noise (95% intervals overlap) at "
                 f"{len(missed) - len(beaten)}, beyond it at {len(beaten)}"
                 + (f": {listed(beaten)}" if beaten else f" (not lowest: {listed(missed)})"))
    return Check(claim, paper, said, YES if not missed else MOSTLY if not beaten else NO)


def checks(run: ModelRun) -> list[Check]:
    """Figs 5 and 6: the hybrid lowest at every K and budget, errors falling with S and growing
    with K."""
    median = pivot(run.rows, ["budget_level", "K"])
    levels = run.levels
    ks = sorted(run.rows.K.unique())
    paper = "hybrid best: 4 datasets × 3 methods × S = 10, 100, 1000 (§5, App. G)"
    checks = [lowest(run.rows, ["budget_level", "K"], stat,
                     f"the hybrid has the lowest {stat} RAE ({name})", paper)
              for stat, name in (("median", "Fig. 5"), ("mean", "Fig. 6"))]
    falls = [(m, k) for m in median.columns for k in ks
             if np.all(np.diff(median.xs(k, level="K")[m].reindex(levels).to_numpy()) < 0)]
    hybrid = median[SETTER].unstack("budget_level")
    checks.append(Check(
        "median RAE falls as the budget S grows", "implied by Figs 5, 6 and 10, 11",
        f"at every larger S for {len(falls)} of {len(median.columns) * len(ks)} (method, K); "
        f"hybrid at K = {ks[-1]}: " + " → ".join(fmt(hybrid.loc[ks[-1], s]) for s in levels)
        + f" (S = {' → '.join(map(str, levels))})",
        share(len(falls), len(median.columns) * len(ks))))
    grows = [(m, s) for m in median.columns for s in levels
             if median.loc[(s, ks[-1]), m] > median.loc[(s, ks[0]), m]]
    checks.append(Check(
        "median RAE grows with K at every budget", "§5 (Fig. 3), Figs 5, 6",
        f"K = {ks[0]} → {ks[-1]} higher for {len(grows)} of {len(median.columns) * len(levels)} "
        "(method, S)", share(len(grows), len(median.columns) * len(levels))))
    return checks


EXPERIMENT = Experiment(
    name="fig5", title="Figs 5, 6", sweep="horizons", query="hitting_time",
    methods=PAPER_METHODS, levels=(10, 100, 1000), block="fig5", cells=("budget_level",),
    columns=(*FIG3_COLUMNS, "entropy"), split="S",  # ~2 MB per level at N = 1000
    figure=figure, caption=caption, section=section, claims=table(checks, "Figs 5, 6"),
    verdict=verdict(checks))
