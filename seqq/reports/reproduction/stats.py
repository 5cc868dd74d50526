"""The numbers a reproduction shows per panel: each paper method's median RAE per K with a 95%
interval of that median, the noise floor of the surrogate truth, and the other methods' medians
beside the budget setter's."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from seqq.reports.reproduction.panels import PAPER_METHODS, SETTER, ModelRun, complete_histories
from seqq.reports.tables import noise_floor

Z95 = 1.959964


def median_ci(values: np.ndarray) -> tuple[float, float]:
    """A distribution-free 95% interval of the median: the order statistics of ranks
    ⌊n/2 − 1.96·√n/2⌋ and ⌈1 + n/2 + 1.96·√n/2⌉ (normal approximation to the binomial),
    clipped to the sample."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        return math.nan, math.nan
    half = Z95 * math.sqrt(n) / 2
    low = max(int(math.floor(n / 2 - half)), 1)
    high = min(int(math.ceil(1 + n / 2 + half)), n)
    return float(x[low - 1]), float(x[high - 1])


def summary(run: ModelRun) -> pd.DataFrame:
    """Per K: the truth used, queries, each paper method's median RAE with its 95% interval,
    the surrogate's noise floor and the mean budget in model calls (the budget setter's)."""
    out = []
    for K, block in run.rows.groupby("K", sort=True):
        kinds = block.drop_duplicates("history_id").truth_kind.value_counts()
        row: dict = {"K": int(K), "truth": "/".join(kinds.index), "N": block.history_id.nunique()}
        for method in PAPER_METHODS:
            rae = block.loc[block.method == method, "rae"].dropna().to_numpy()
            row[method] = float(np.median(rae)) if len(rae) else math.nan
            row[f"{method}_low"], row[f"{method}_high"] = median_ci(rae)
        setter = block[block.method == SETTER]  # one row per query
        surrogate = setter.truth_kind == "surrogate"
        row["floor"] = noise_floor(setter.truth_rel_stderr.where(surrogate, 0.0))
        row["truth_rel_se"] = (float(setter.truth_rel_stderr[surrogate].median())
                               if surrogate.any() else 0.0)
        row["calls"] = float(setter.model_calls.mean())
        out.append(row)
    return pd.DataFrame(out)


def others_medians(run: ModelRun, ks: Sequence[int]) -> tuple[pd.DataFrame, int]:
    """Median RAE per K (rows) of each non-paper method and of the budget setter (columns), all
    on the histories every non-paper method has run at every K (a frontier sweep may trail the
    paper's), and that number of histories."""
    common = complete_histories(run.others, run.others.method.nunique(), ks)
    others = run.others[run.others.history_id.isin(common)]
    setter = run.rows[(run.rows.method == SETTER) & run.rows.history_id.isin(common)]
    medians = others.groupby(["K", "method"]).rae.median().unstack("method").reindex(ks)
    medians[SETTER] = setter.groupby("K").rae.median().reindex(ks)
    return medians, len(common)
