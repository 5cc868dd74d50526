"""Figs 4b and 13: median RAE of p_T(τ(a) = 4) vs the model temperature T, from the
`temperature` sweep."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from seqq.reports import figures
from seqq.reports.reproduction.claims import NO, PARTLY, UNKNOWN, YES, Check, share, table, verdict
from seqq.reports.reproduction.export import FIG3_COLUMNS
from seqq.reports.reproduction.figure import drawn
from seqq.reports.reproduction.markdown import fmt, histories, links_line, values
from seqq.reports.reproduction.panels import PAPER_METHODS, SETTER, ModelRun
from seqq.reports.reproduction.reproduce import Experiment
from seqq.reports.reproduction.stats import (
    methods_in,
    pivot,
)
from seqq.reports.tables import to_markdown

figure = drawn("fig13", figures.rae_vs_temperature)  # Figs 13, 4b: median RAE vs T, IQR bands


def caption(runs: Sequence[ModelRun]) -> str:
    return ("*Fig. 13 (and Fig. 4b, which the paper draws for Mobile Apps alone: that data is "
            "not here): median RAE of p_T(τ(a) = 4) vs the model temperature T at S = 100, "
            "bands the interquartile range over queries, one panel per model: "
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
    """Figs 4b and 13: as T rises, beam search's RAE goes to 1 and importance sampling's to 0;
    temperature induces beam-search error."""
    median = pivot(run.rows, ["temperature"])
    ts = list(median.index)
    beam, importance = median["beam"], median["importance"]
    hot = max(ts) > 1.0  # the claims are about tempering above T = 1, flattening the model
    across = " → ".join(f"{t:g}" for t in ts)

    def curve(values: pd.Series) -> str:
        return " → ".join(fmt(v) for v in values) + f" (T = {across})"

    rising = int((np.diff(beam.to_numpy()) > 0).sum())
    return [
        Check("as T rises, beam search's RAE goes to 1", "Fig. 4b (Mobile Apps), Fig. 13",
              "beam median RAE " + curve(beam),
              UNKNOWN if not hot else YES if beam.iloc[-1] >= 0.9 and rising == len(ts) - 1
              else PARTLY if beam.iloc[-1] > beam.iloc[0] else NO,
              "the median at every larger T higher and ≥ 0.9 at the hottest (no interval)"),
        Check("as T rises, importance sampling's RAE goes to 0", "Fig. 4b",
              "importance median RAE " + curve(importance),
              UNKNOWN if not hot else YES if importance.iloc[-1] < min(0.1, importance.iloc[0])
              else PARTLY if importance.iloc[-1] < importance.iloc[0] else NO,
              "the median below 0.1 at the hottest T and below the coldest's (no interval)"),
        Check("temperature induces beam-search error", "Fig. 13 (all datasets)",
              f"beam median RAE higher at every larger T in {rising} of {len(ts) - 1} steps; "
              f"beam / hybrid at T = {ts[-1]:g}: "
              + (f"{beam.iloc[-1] / median[SETTER].iloc[-1]:.1f}×"
                 if median[SETTER].iloc[-1] > 0 else "–"),
              UNKNOWN if not hot else share(rising, len(ts) - 1),
              "per step of T: beam's median higher (no interval)"),
    ]


EXPERIMENT = Experiment(
    name="fig13", title="Figs 4b, 13", sweep="temperature", query="hitting_time",
    methods=PAPER_METHODS, levels=(100,), block="fig13", temperatures=None,
    cells=("temperature",), columns=(*FIG3_COLUMNS, "temperature"),
    figure=figure, caption=caption, section=section, claims=table(checks, "Figs 4b, 13"),
    verdict=verdict(checks))
