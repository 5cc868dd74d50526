"""Fig. 12: beams kept per step by coverage beam search at α = 0.95, 0.75, 0.5, from the
`coverage` sweep (Shakespeare)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from seqq.reports import figures
from seqq.reports.reproduction.claims import (
    SLOPE_TEST,
    UNKNOWN,
    Check,
    table,
    tallied,
    verdict,
)
from seqq.reports.reproduction.figure import drawn
from seqq.reports.reproduction.markdown import histories, links_line, values
from seqq.reports.reproduction.panels import ModelRun
from seqq.reports.reproduction.reproduce import PAPER_OVERRIDES, Experiment
from seqq.reports.reproduction.significance import (
    LEVEL,
    Tally,
    median_slope,
    sign_lead,
)
from seqq.reports.reproduction.stats import (
    alpha_of,
    beam_growth,
    beams_per_step,
)
from seqq.reports.tables import to_markdown

figure = drawn("fig12", figures.beam_sizes)  # beams kept per step, per α
ALPHAS = (0.95, 0.75, 0.5)  # the paper's coverage levels (App. G.3)


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
    """Fig. 12: coverage beam search needs exponentially many beams in K (the slope of the log
    median beams per step, with its bootstrap interval), more for larger α (a paired sign test
    of the beams kept per history)."""
    beams = _beams(run.rows)
    if not beams:
        return [Check("the number of beams grows exponentially in K", "App. G.3 (Fig. 12)",
                      "no beam sizes recorded", UNKNOWN)]
    return [_exponential(beams), _larger_alpha(beams)]


def _beams(rows: pd.DataFrame) -> dict[tuple[int, str], pd.DataFrame]:
    """Per (K, method), largest α first: the beams kept per history (rows) and step (columns
    1…K−1: the last step keeps only the paths that end in the query's set, so it is left out);
    empty where no beam sizes were recorded."""
    out = {}
    for (k, method), cell in rows.groupby(["K", "method"]):
        steps = {h: s for h, s in zip(cell.history_id, map(beams_per_step, cell.extras),
                                      strict=True) if len(s)}
        if steps:
            depth = min(map(len, steps.values()))
            depth -= depth > 2
            out[(int(k), method)] = pd.DataFrame({h: s[:depth] for h, s in steps.items()},
                                                 index=range(1, depth + 1)).T
    return dict(sorted(out.items(), key=lambda item: (item[0][0], -_alpha(item[0][1]))))


def _alpha(method: str) -> float:
    alpha = alpha_of(method)
    return float(alpha) if alpha != "?" else 0.0


def _exponential(beams: dict[tuple[int, str], pd.DataFrame]) -> Check:
    """Per (K, α): the growth factor per step, e^slope of the log median beams per step, above
    ×1 beyond the noise."""
    growth = {key: median_slope(table.to_numpy(), table.columns.to_numpy(float))
              for key, table in beams.items()}
    tally = Tally.of([b.cell() for b in growth.values()])
    return Check(
        "the number of beams grows exponentially in K", "App. G.3 (Fig. 12)",
        "median beams per step, steps 1…K−1: " + "; ".join(
            f"α = {alpha_of(m)}{_at(k, beams)}: ×{math.exp(b):.1f} per step "
            f"[×{math.exp(low):.1f}, ×{math.exp(high):.1f}] (R² of the log-linear fit "
            f"{_log_r2(beams[(k, m)].median()):.2f})"
            for (k, m), (b, low, high) in growth.items())
        + f"; growing {tally.said('(K, α)')}", tallied(tally),
        SLOPE_TEST + " of the log median beams per step, per (K, α) (above 0: a constant "
        "factor per step)")


def _larger_alpha(beams: dict[tuple[int, str], pd.DataFrame]) -> Check:
    """Per K and pair of neighbouring α: the larger α keeps more beams at the last full step
    than the smaller on more histories beyond the noise (`sign_lead`)."""
    keys = list(beams)
    pairs = [(a, b) for a, b in zip(keys, keys[1:], strict=False) if a[0] == b[0]]
    leads, said = [], []
    for (k, larger), (_, smaller) in pairs:
        both = pd.concat([beams[(k, larger)].iloc[:, -1], beams[(k, smaller)].iloc[:, -1]],
                         axis=1, join="inner").to_numpy()
        leads.append(sign_lead(both[:, 1], both[:, 0]))
    for (k, method), kept in beams.items():
        said.append(f"{kept.iloc[:, -1].median():,.0f} (α = {alpha_of(method)}"
                    f"{_at(k, beams)}, step {kept.columns[-1]})")
    tally = Tally.of(leads)
    return Check(
        "a larger α needs more beams", f"Fig. 12 (α = {', '.join(map(str, ALPHAS))})",
        "median beams at the last full step: " + ", ".join(said)
        + f"; more for the larger α {tally.said('pairs of neighbouring α')}", tallied(tally),
        f"paired sign test of the beams kept per history at the last full step, per pair of "
        f"neighbouring α, two-sided, p < {LEVEL:g} (Holm over the pairs)")


def _log_r2(values: pd.Series) -> float:
    """R² of the least-squares line through log(values) against their index (steps): how
    close to a constant factor per step the growth is."""
    x, y = values.index.to_numpy(float), np.log(values.to_numpy(float))
    residual = y - np.polyval(np.polyfit(x, y, 1), x)
    total = ((y - y.mean()) ** 2).sum()
    return float(1 - (residual ** 2).sum() / total) if total > 0 else 1.0


def _at(k: int, beams: dict[tuple[int, str], pd.DataFrame]) -> str:
    """", K = 6" where the panel has several K, else nothing."""
    return f", K = {k}" if len({key[0] for key in beams}) > 1 else ""


OWN_COLUMNS = {  # its CSV's own columns: the α of each run, the beams kept per step
    "alpha": lambda rows: rows.options.map(lambda o: json.loads(o).get("alpha")),
    "beam_sizes": lambda rows: rows.extras.map(lambda e: " ".join(map(str, beams_per_step(e)))),
}


def from_csv(rows: pd.DataFrame) -> pd.DataFrame:
    """Its CSV's rows as results: one method per α (`coverage_beam {"alpha": 0.95}`), and the
    beams kept per step back in `extras`."""
    options = rows.alpha.map(lambda a: json.dumps({"alpha": a}))
    extras = rows.beam_sizes.map(
        lambda b: json.dumps({"beam_sizes": [[int(x) for x in str(b).split()]]}))
    return rows.assign(options=options, method=rows.method + " " + options, extras=extras)


EXPERIMENT = Experiment(
    name="fig12", title="Fig. 12", sweep="coverage", query="event_at", sweep_on="shakespeare",
    sweep_args=f"model=authors {PAPER_OVERRIDES} "
               f"estimator.options.coverage_beam.alpha={','.join(map(str, ALPHAS))}",
    methods=("coverage_beam",), levels=None, block="fig12",
    columns=("history_id", "K", "method", "alpha", "model_calls", "estimate", "beam_sizes"),
    own_columns=OWN_COLUMNS, from_csv=from_csv,
    figure=figure, caption=caption, section=section, claims=table(checks, "Fig. 12"),
    verdict=verdict(checks))
