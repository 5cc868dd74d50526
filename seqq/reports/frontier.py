"""The estimator frontier (`make fig-frontier`): which method is most accurate per model call.

In a sweep every method runs at each query's budget, the hybrid's calls at S tail samples
(README "Query sweeps", step 3). Here each (model, K) gets the median RAE of every method against
the median model calls it actually spent, one point per level S, and a table names the
method that wins each (model, K, S) with its RAE ratio to the hybrid (issue target: ≤ 0.5).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from seqq.reports.plotting import (
    NotApplicable,
    empty,
    legend,
    log_axes,
    method_colors,
    panel_title,
    suptitle,
    wrapped,
)
from seqq.reports.tables import PANEL, panels
from seqq.results.schema import BUDGET_SETTER

BASELINE = BUDGET_SETTER  # every method is compared with the budget setter
FAILED_RAE = 1.0  # a method that cannot answer within the budget scores as an estimate of 0
RAE_FLOOR = 1e-4  # plotted instead of 0 (an exact answer) on the log axis
CELL = [*PANEL, "K", "budget_level"]  # one model (panel), horizon and budget
WRAP = 4  # panels per row when the figure shows one model
BOOTSTRAP = 1000  # resamples of histories for the interval of a winner's ratio to the hybrid
TIE = "tie (not distinguishable)"  # a cell whose ratio's interval spans 1


def applies(results: pd.DataFrame) -> bool:
    """Budgeted rows of the hybrid and at least one other method, at two or more budgets."""
    budgeted = results[results.budget_level > 0]
    return (BASELINE in set(budgeted.method) and budgeted.method.nunique() > 1
            and budgeted.budget_level.nunique() > 1)


def scored(results: pd.DataFrame) -> pd.DataFrame:
    """The rows the frontier scores: budgeted, with ground truth, at temperature 1; a failed
    estimate scores FAILED_RAE (`failed` marks it)."""
    rows = results[(results.temperature == 1.0) & (results.budget_level > 0)
                   & np.isfinite(results.truth_log)].copy()
    rows["failed"] = rows.estimate.isna()
    rows["rae"] = rows.rae.fillna(FAILED_RAE)
    return rows


def points(results: pd.DataFrame) -> pd.DataFrame:
    """Median RAE and model calls per (panel, K, level S, method), over the queries (and
    their repeats) with ground truth at temperature 1; `failed` counts the failed answers."""
    return (scored(results).groupby([*CELL, "method"], observed=True)
            .agg(median_rae=("rae", "median"), calls=("model_calls", "median"),
                 histories=("history_id", "nunique"), runs=("rae", "size"),
                 failed=("failed", "sum"))
            .reset_index())


def winners(results: pd.DataFrame) -> pd.DataFrame:
    """Per (model, K, S): the hybrid's median RAE and calls, the best other method and the ratio
    of its median RAE to the hybrid's with its 80 % interval, and the winner of the cell
    (`winner`; empty where the results hold no frontier)."""
    if not applies(results):
        return pd.DataFrame()
    table, titles = points(results), panels(results)
    runs = {key: cell for key, cell in scored(results).groupby(CELL, observed=True)}
    rows = []
    for cell_key, cell in table.groupby(CELL, observed=True):
        base = cell[cell.method == BASELINE]
        others = cell[cell.method != BASELINE].sort_values("median_rae")
        if base.empty or others.empty:
            continue
        *panel, K, level = cell_key
        hybrid, best = base.iloc[0], others.iloc[0]
        ratio = best.median_rae / hybrid.median_rae if hybrid.median_rae > 0 else np.inf
        low, high = ratio_interval(runs[cell_key], best.method)
        rows.append({"model": titles[tuple(panel)].title, "K": int(K), "S": int(level),
                     "calls": round(float(hybrid.calls)), "hybrid_rae": float(hybrid.median_rae),
                     "best_other": best.method, "best_other_rae": float(best.median_rae),
                     "ratio_to_hybrid": float(ratio), "ratio_80_low": low, "ratio_80_high": high,
                     "winner": winner(best.method, low, high),
                     "histories": int(hybrid.histories), "runs": int(hybrid.runs)})
    return pd.DataFrame(rows)


def winner(best: str, low: float, high: float) -> str:
    """The method that wins a cell, named only where the interval [low, high] of the best
    other method's RAE ratio to the hybrid excludes 1 (a ratio of medians from a few
    histories can fall either side of 1 by chance); TIE otherwise."""
    if high < 1:
        return best
    return BASELINE if low > 1 else TIE


def ratio_interval(cell: pd.DataFrame, method: str, resamples: int = BOOTSTRAP,
                   seed: int = 0) -> tuple[float, float]:
    """The 80 % bootstrap interval of median RAE(method) / median RAE(hybrid) in one cell,
    resampling histories with all their queries and repeats (a cluster bootstrap: the runs of
    one history are not independent draws of the population of histories); seeded."""
    pair = cell[cell.method.isin([method, BASELINE])]
    runs = [c for c in ("label", "repeat") if c in pair.columns]  # a history's queries, repeats
    wide = pair.pivot_table(index="history_id", columns=["method", *runs], values="rae",
                            aggfunc="first")
    histories = np.random.default_rng(seed).integers(0, len(wide), (resamples, len(wide)))
    medians = {m: np.nanmedian(wide[m].to_numpy()[histories].reshape(resamples, -1), axis=1)
               for m in (method, BASELINE)}
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = medians[method] / medians[BASELINE]
    low, high = np.nanpercentile(np.where(np.isnan(ratios), np.inf, ratios), [10, 90])
    return float(low), float(high)


def draw(results: pd.DataFrame) -> dict[str, Figure]:
    """Median RAE vs model calls, log–log; rows = models (panels with the hybrid and another
    method), columns = K, one line per method."""
    table = points(results) if applies(results) else pd.DataFrame()
    if not table.empty:
        rivals = table.groupby(PANEL).method.transform(lambda m: BASELINE in set(m)
                                                        and m.nunique() > 1)
        table = table[rivals.astype(bool)]
    if table.empty:
        raise NotApplicable("needs budgeted rows of the hybrid and another method at two or "
                            "more levels S")
    titles, colors = panels(results), method_colors(table.method)
    blocks = list(table.groupby(PANEL, sort=True))
    ks = sorted(table["K"].unique())
    # one model's many horizons wrap into rows of WRAP panels instead of one long strip
    cols = min(len(ks), WRAP) if len(blocks) == 1 else len(ks)
    fig, axes = wrapped(len(blocks) * len(ks), cols, size=(3.2, 2.8))
    for i, (key, block) in enumerate(blocks):
        for j, K in enumerate(ks):
            ax, cell = axes.flat[i * len(ks) + j], block[block["K"] == K]
            panel_title(ax, titles[key].heading, f"K={K}")
            if cell.empty:
                empty(ax, f"no runs at K={K}")
                continue
            for method, line in cell.groupby("method"):
                line = line.sort_values("calls")
                ax.plot(line.calls.clip(lower=1), line.median_rae.clip(lower=RAE_FLOOR), "o-",
                        ms=3, lw=1.8 if method == BASELINE else 1.0, color=colors[method],
                        label=method, zorder=3 if method == BASELINE else 2)
            log_axes(ax)
            ax.set(xlabel="model calls per query (median)", ylabel="median RAE")
    suptitle(fig, "Estimator frontier: median RAE vs model calls, one point per level S")
    legend(fig, axes)
    return {"frontier": fig}
