"""Fig. 15: the case study's protocol on MOOCs (the paper's Mobile Apps data is not here):
p(A before B) vs the share of A in a synthetic history, from the `case_study` sweep."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import linregress

from seqq.reports import figures
from seqq.reports.reproduction.claims import Check, one, table, verdict
from seqq.reports.reproduction.export import ESTIMATE_COLUMNS
from seqq.reports.reproduction.figure import drawn
from seqq.reports.reproduction.markdown import links_line, model_name, values
from seqq.reports.reproduction.panels import ModelRun
from seqq.reports.reproduction.reproduce import PAPER_OVERRIDES, Experiment
from seqq.reports.reproduction.significance import LEVEL, Z, bootstrap, outcome
from seqq.reports.reproduction.stats import (
    share_means,
)
from seqq.reports.tables import to_markdown

figure = drawn("fig15", figures.case_study)  # mean estimate vs share of A, 90% intervals
LINEAR = 0.9  # "roughly linear": the line through the shares' means explains more than this
COVERAGE = 0.9  # the shares' means' interval drawn and tabled (`share_means`)


def caption(runs: Sequence[ModelRun]) -> str:
    return ("*Fig. 15's protocol (the paper's: Mobile Apps, social-media apps A before "
            "direct-communication apps B; that data is not here): mean estimate of "
            "p(τ(A) < τ(B) ≤ K) vs the share of A in a synthetic history, error bars the "
            f"{COVERAGE:.0%} intervals of the mean; "
            + "; ".join(f"{r.dataset} ({model_name(r.model)}), N = {r.n:,}, "
                        + _focus(r.rows.label.iloc[0]) for r in runs) + ".*")


def _focus(label: str) -> str:
    """"tau(1,2)<tau(6,7)@30" -> "A = symbols 1, 2, B = symbols 6, 7 (ids of the model's
    vocabulary)"."""
    found = re.match(r"tau\(([^)]*)\)<tau\(([^)]*)\)", label)
    if not found:
        return f"query {label}"
    a, b = (", ".join(x.split(",")) for x in found.groups())
    return f"A = symbols {a}, B = symbols {b} (ids in the model's vocabulary)"


def section(run: ModelRun, csv: str) -> list[str]:
    stats = share_means(run.rows.assign(share=_share(run.rows)))
    shown = pd.DataFrame({
        "share of A": [f"{s:g}" for s in stats.share], "histories": stats.histories,
        f"mean p̂ [{COVERAGE:.0%} CI]": [f"{m:.3f} [{lo:.3f}, {hi:.3f}]" for m, lo, hi in
                            zip(stats["mean"], stats.low, stats.high, strict=True)]})
    return [links_line(run, csv, f"over {len(stats)} shares, K = "
                                  f"{', '.join(map(str, values(run, 'K')))}, S = "
                                  f"{', '.join(map(str, run.levels))}"),
            "", f"Mean estimate per share of A [{COVERAGE:.0%} interval of the mean]:", "",
            to_markdown(shown), ""]


def checks(run: ModelRun) -> list[Check]:
    """Fig. 15: P(A before B) rises with the share of A in the history (the least-squares
    slope over the histories, with its interval), roughly linearly (R² of the shares' means
    above `LINEAR`, by its bootstrap interval): each a claim about one cell."""
    rows = run.rows.assign(share=_share(run.rows))
    stats = share_means(rows)
    fit = linregress(rows.share, rows.estimate)
    half = Z * fit.stderr
    line = np.polyfit(stats.share, stats["mean"], 1)[0]
    share, estimate = rows.share.to_numpy(), rows.estimate.to_numpy()
    r2 = bootstrap(lambda idx: _r2_of_means(share[idx], estimate[idx]), len(rows))
    first, last = stats.iloc[0], stats.iloc[-1]
    return [
        Check("P(A before B) increases with the share of A in the history",
              "App. G.7 (Fig. 15, Mobile Apps: social media before direct communication)",
              f"mean p̂ {first['mean']:.3f} (share {first.share:g}) → {last['mean']:.3f} "
              f"(share {last.share:g}); slope {fit.slope:+.3f} per unit share "
              f"[{fit.slope - half:+.3f}, {fit.slope + half:+.3f}] over {len(rows):,} histories",
              one(outcome(fit.slope - half, fit.slope + half)),
              f"least-squares slope of p̂ against the share, its {1 - LEVEL:.0%} interval "
              "above 0"),
        Check("the trend is roughly linear", "Fig. 15",
              f"least-squares line {line:+.3f} per unit share, R² = {r2.value:.2f} "
              f"[{r2.low:.2f}, {r2.high:.2f}] over the {len(stats)} shares' means",
              one(r2.cell(LINEAR)),
              f"R² of the line through the shares' means above {LINEAR:g}, its "
              f"{1 - LEVEL:.0%} bootstrap interval over the histories (one cell)"),
    ]


def _share(rows: pd.DataFrame) -> pd.Series:
    """Its CSV's own column: the share of A in each history, from its group."""
    return rows.group.str.removeprefix("share=").astype(float)


def _shares(rows: pd.DataFrame) -> pd.DataFrame:
    """Its CSV's rows as results: the share of A back in the histories' group."""
    return rows.assign(group=rows.share.map(lambda s: f"share={s:g}"))


def _r2_of_means(share: np.ndarray, estimate: np.ndarray) -> float:
    """R² of the least-squares line through the mean estimate at each share."""
    frame = pd.DataFrame({"share": share, "estimate": estimate}).groupby("share").estimate.mean()
    if len(frame) < 3:
        return math.nan
    x, y = frame.index.to_numpy(float), frame.to_numpy()
    fitted = np.polyval(np.polyfit(x, y, 1), x)
    total = ((y - y.mean()) ** 2).sum()
    return float(1 - ((y - fitted) ** 2).sum() / total) if total > 0 else math.nan


# an analogue, not a reproduction: MOOCs with arbitrary symbol sets A and B stand in for the
# paper's Mobile Apps and its app categories, so its verdict reads "analogue" (issue 49)
EXPERIMENT = Experiment(
    name="fig15", title="Fig. 15", sweep="case_study", query="a_before_b", sweep_on="moocs",
    sweep_args=f"model=authors {PAPER_OVERRIDES}", from_csv=_shares,
    own_columns={"share": _share},
    methods=("importance",), levels=(1000,), block="fig15",
    columns=(*ESTIMATE_COLUMNS, "share"),
    figure=figure, caption=caption, section=section, claims=table(checks, "Fig. 15"),
    verdict=verdict(checks, analogue=""))
