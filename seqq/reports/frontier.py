"""The estimator frontier (`make fig-frontier`): which method is most accurate per model call.

In a sweep every method runs at each query's budget, the hybrid's calls at S tail samples
(README "Query sweeps", step 3). Here each (model, K) gets the median RAE of every method against
the median model calls it actually spent, one point per budget level, and a table names the
method that wins each (model, K, S) with its RAE ratio to the hybrid (issue target: ≤ 0.5).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from seqq.reports.tables import dataset_title

BASELINE = "hybrid"
FAILED_RAE = 1.0  # a method that cannot answer within the budget scores as an estimate of 0
RAE_FLOOR = 1e-4  # plotted instead of 0 (an exact answer) on the log axis
CELL = ["dataset", "K", "budget_level"]


def applies(results: pd.DataFrame) -> bool:
    """Budgeted rows of the hybrid and at least one other method, at two or more budgets."""
    budgeted = results[results.budget_level > 0]
    return (BASELINE in set(budgeted.method) and budgeted.method.nunique() > 1
            and budgeted.budget_level.nunique() > 1)


def points(results: pd.DataFrame) -> pd.DataFrame:
    """Median RAE and model calls per (dataset, K, budget level, method), over the queries with
    ground truth at temperature 1; `failed` counts the queries a method could not answer."""
    rows = results[(results.temperature == 1.0) & (results.budget_level > 0)
                   & np.isfinite(results.truth_log)].copy()
    rows["failed"] = rows.estimate.isna()
    rows["rae"] = rows.rae.fillna(FAILED_RAE)
    return (rows.groupby([*CELL, "method"], observed=True)
            .agg(median_rae=("rae", "median"), calls=("model_calls", "median"),
                 queries=("rae", "size"), failed=("failed", "sum"))
            .reset_index())


def winners(results: pd.DataFrame) -> pd.DataFrame:
    """Per (model, K, S): the hybrid's median RAE and calls, the best other method and the ratio
    of its median RAE to the hybrid's, and the winner of the cell."""
    table = points(results)
    rows = []
    for (dataset, K, level), cell in table.groupby(CELL, observed=True):
        base = cell[cell.method == BASELINE]
        others = cell[cell.method != BASELINE].sort_values("median_rae")
        if base.empty or others.empty:
            continue
        hybrid, best = base.iloc[0], others.iloc[0]
        ratio = best.median_rae / hybrid.median_rae if hybrid.median_rae > 0 else np.inf
        rows.append({"model": dataset_title(results, dataset), "K": int(K), "S": int(level),
                     "calls": round(float(hybrid.calls)), "hybrid_rae": float(hybrid.median_rae),
                     "best_other": best.method, "best_other_rae": float(best.median_rae),
                     "ratio_to_hybrid": float(ratio),
                     "winner": best.method if ratio < 1 else BASELINE,
                     "queries": int(hybrid.queries)})
    return pd.DataFrame(rows)


def draw(results: pd.DataFrame, out: Path) -> list[Path]:
    """Median RAE vs model calls, log–log; rows = models, columns = K, one line per method."""
    from seqq.reports.figures import STYLE, _grid, _legend, _save  # figures.py registers us

    table = points(results)
    datasets, ks = sorted(table.dataset.unique()), sorted(table.K.unique())
    fig, axes = _grid(len(datasets), len(ks), size=(3.2, 2.8))
    extra = iter(f"C{i}" for i in range(7, 100))
    colors = {m: STYLE.get(m) or next(extra) for m in sorted(table.method.unique())}
    for i, dataset in enumerate(datasets):
        for j, K in enumerate(ks):
            ax = axes[i, j]
            panel = table[(table.dataset == dataset) & (table.K == K)]
            for method, line in panel.groupby("method"):
                line = line.sort_values("calls")
                ax.plot(line.calls.clip(lower=1), line.median_rae.clip(lower=RAE_FLOOR), "o-",
                        ms=3, lw=1.8 if method == BASELINE else 1.0, color=colors[method],
                        label=method, zorder=3 if method == BASELINE else 2)
            ax.set(xscale="log", yscale="log")
            ax.set_title(f"{dataset_title(results, dataset)}, K={K}", fontsize=8)
            if i == len(datasets) - 1:
                ax.set_xlabel("model calls per query (median)", fontsize=8)
            if j == 0:
                ax.set_ylabel("median RAE", fontsize=8)
            ax.tick_params(labelsize=7)
    _legend(fig, axes)
    return _save(fig, out, "frontier")
