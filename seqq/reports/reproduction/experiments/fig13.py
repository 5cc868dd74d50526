"""Figs 4b and 13: median RAE of p_T(τ(a) = 4) vs the model temperature T, from the
`temperature` sweep."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from seqq.reports import figures
from seqq.reports.reproduction.claims import (
    SLOPE_TEST,
    UNKNOWN,
    Check,
    one,
    table,
    tallied,
    verdict,
)
from seqq.reports.reproduction.export import FIG3_COLUMNS
from seqq.reports.reproduction.figure import drawn
from seqq.reports.reproduction.markdown import fmt, histories, links_line, values
from seqq.reports.reproduction.panels import PAPER_METHODS, SETTER, ModelRun
from seqq.reports.reproduction.reproduce import Experiment
from seqq.reports.reproduction.significance import (
    Tally,
    majority,
    median_slope,
    per_history,
    ratio_slope,
)
from seqq.reports.reproduction.stats import (
    median_ci,
    methods_in,
    pivot,
)
from seqq.reports.tables import to_markdown

NEAR = {1: 0.9, 0: 0.1}  # a median RAE this close to where it is said to go has gone there

figure = drawn("fig13", figures.rae_vs_temperature)  # Figs 13, 4b: median RAE vs T, IQR bands


def caption(runs: Sequence[ModelRun]) -> str:
    ks = ", ".join(map(str, sorted({int(k) for r in runs for k in r.rows.K.unique()})))
    levels = ", ".join(map(str, sorted({s for r in runs for s in r.levels})))
    return ("*Fig. 13 (and Fig. 4b, which the paper draws for Mobile Apps alone: that data is "
            f"not here): median RAE of p_T(τ(a) = {ks}) vs the model temperature T at "
            f"S = {levels}, bands the interquartile range over queries, one panel per model: "
            f"{histories(runs)}.*")


def section(run: ModelRun, csv: str) -> list[str]:
    ts = values(run, "temperature")
    methods = methods_in(run.rows)
    q = run.rows.groupby(["temperature", "method"]).rae.quantile([0.25, 0.5, 0.75]).unstack()
    kinds = run.rows.drop_duplicates(["history_id", "temperature"]).groupby(
        "temperature").truth_kind.agg(lambda k: "/".join(sorted(set(k))))
    shown = pd.DataFrame({"T": [f"{t:g}" for t in ts], "truth": [kinds[t] for t in ts]})
    for m in methods:
        shown[m] = [f"{fmt(q.loc[(t, m), 0.5])} [{fmt(q.loc[(t, m), 0.25])}, "
                    f"{fmt(q.loc[(t, m), 0.75])}]" for t in ts]
    return [links_line(run, csv, f"done at every T = {', '.join(f'{t:g}' for t in ts)} by "
                                  f"all three methods, K = "
                                  f"{', '.join(map(str, values(run, 'K')))}"),
            "", "Median RAE [interquartile range] per temperature:", "", to_markdown(shown), ""]


def checks(run: ModelRun) -> list[Check]:
    """Figs 4b and 13: as T rises, beam search's RAE goes to 1 and importance sampling's to 0
    (the slope of the log median RAE per doubling of T, and the median at the hottest T, each
    with its interval); temperature induces beam-search error (the slope of the log of beam
    search's median over the hybrid's)."""
    rae = {m: per_history(run.rows[run.rows.method == m], ["temperature"])
           for m in ("beam", "importance", SETTER)}
    ts = rae["beam"].columns.to_numpy(float)
    hot = ts.max() > 1.0  # the claims are about tempering above T = 1, flattening the model
    gap = ratio_slope(rae["beam"].to_numpy(), rae[SETTER].to_numpy(), np.log2(ts))
    median = pivot(run.rows, ["temperature"])
    return [
        _goes_to(rae["beam"], 1, "as T rises, beam search's RAE goes to 1",
                 "Fig. 4b (Mobile Apps), Fig. 13", hot),
        _goes_to(rae["importance"], 0, "as T rises, importance sampling's RAE goes to 0",
                 "Fig. 4b", hot),
        Check("temperature induces beam-search error", "Fig. 13 (all datasets)",
              f"beam / hybrid median RAE {_ratio(median, ts[0])} (T = {ts[0]:g}) → "
              f"{_ratio(median, ts[-1])} (T = {ts[-1]:g}); slope of its log per doubling of "
              f"T {gap.value:+.3f} [{gap.low:+.3f}, {gap.high:+.3f}]",
              one(gap.cell()) if hot else UNKNOWN,
              SLOPE_TEST + " (above 0: beam search falls behind the hybrid)"),
    ]


def _goes_to(rae: pd.DataFrame, end: int, claim: str, paper: str, hot: bool) -> Check:
    """A median RAE that goes to `end` (1 or 0) as T rises, judged in two cells: its log rises
    (to 1) or falls (to 0) per doubling of T (the slope's bootstrap interval), and at the
    hottest T the median lies beyond `NEAR[end]` (the sign test of the median against it);
    the two cells are counted after Holm's correction over them, as every claim's cells."""
    ts = rae.columns.to_numpy(float)
    trend = median_slope(rae.to_numpy(), np.log2(ts))
    hottest = rae.to_numpy()[:, -1]
    hottest = hottest[np.isfinite(hottest)]
    last_low, last_high = median_ci(hottest)
    beyond = hottest > NEAR[end] if end else hottest < NEAR[end]
    tally = Tally.of([trend.cell(falls=not end), majority(beyond)])
    medians = rae.median()
    side = "above" if end else "below"
    return Check(
        claim, paper,
        "median RAE " + " → ".join(fmt(v) for v in medians)
        + f" (T = {' → '.join(f'{t:g}' for t in ts)}); slope of its log per doubling of T "
        f"{trend.value:+.3f} [{trend.low:+.3f}, {trend.high:+.3f}]; at T = {ts[-1]:g}: "
        f"{fmt(medians.iloc[-1])} [{fmt(last_low)}, {fmt(last_high)}]; "
        + tally.said("cells (slope, hottest median)"),
        tallied(tally) if hot else UNKNOWN,
        SLOPE_TEST + f" ({'above 0' if end else 'below 0'}), and the sign test of the median at "
        f"the hottest T {side} "
        f"{NEAR[end]:g} (Holm over the two cells)")


def _ratio(median: pd.DataFrame, t: float) -> str:
    hybrid = median.loc[t, SETTER]
    return f"{median.loc[t, 'beam'] / hybrid:.1f}×" if hybrid > 0 else "–"


EXPERIMENT = Experiment(
    name="fig13", title="Figs 4b, 13", sweep="temperature", query="hitting_time",
    methods=PAPER_METHODS, levels=(100,), block="fig13", temperatures=None,
    cells=("temperature",), columns=(*FIG3_COLUMNS, "temperature"),
    figure=figure, caption=caption, section=section, claims=table(checks, "Figs 4b, 13"),
    verdict=verdict(checks))
