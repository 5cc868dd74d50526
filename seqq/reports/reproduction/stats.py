"""The numbers a reproduction shows per panel: each paper method's median RAE per K with a 95%
interval of that median, the noise floor of the estimated truth, and the other methods' medians
beside the budget setter's (Fig. 3); then what the other experiments need: medians per cell,
RAE per decade of S, fits against entropy, spread of the estimates, beams per step and
means per share."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from seqq.reports.reproduction.panels import PAPER_METHODS, SETTER, ModelRun, complete_histories
from seqq.reports.tables import noise_floor

Z95 = 1.959964
FIG3_LEVEL = 100  # Fig. 3's protocol: the hybrid's calls with S = 100 (Fig. 4a reads these)


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
    the estimated truth's noise floor and the mean budget in model calls (the budget setter's)."""
    out = []
    for K, block in run.rows.groupby("K", sort=True):
        kinds = block.drop_duplicates("history_id").truth_kind.value_counts()
        row: dict = {"K": int(K), "truth": "/".join(kinds.index), "N": block.history_id.nunique()}
        for method in PAPER_METHODS:
            rae = block.loc[block.method == method, "rae"].dropna().to_numpy()
            row[method] = float(np.median(rae)) if len(rae) else math.nan
            row[f"{method}_low"], row[f"{method}_high"] = median_ci(rae)
        setter = block[block.method == SETTER]  # one row per query
        estimated = setter.truth_kind == "estimated"
        row["floor"] = noise_floor(setter.truth_rel_stderr.where(estimated, 0.0))
        row["truth_rel_se"] = (float(setter.truth_rel_stderr[estimated].median())
                               if estimated.any() else 0.0)
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


# The order of methods in every table beyond Fig. 3's: the paper's three, then its baselines
METHOD_ORDER = (*PAPER_METHODS, "uniform", "naive")
Z90 = 1.644854  # Fig. 15's 90% intervals


def methods_in(rows: pd.DataFrame) -> list[str]:
    """The rows' methods, the paper's first (`METHOD_ORDER`), any other in name order."""
    present = set(rows.method)
    return [m for m in METHOD_ORDER if m in present] + sorted(present - set(METHOD_ORDER))


def pivot(rows: pd.DataFrame, index: Sequence[str], stat: str = "median",
          value: str = "rae") -> pd.DataFrame:
    """`stat` of `value` per `index` (rows) and method (columns, in `methods_in` order)."""
    table = rows.groupby([*index, "method"])[value].agg(stat).unstack("method")
    return table[methods_in(rows)]


def decade_ratios(curve: pd.Series) -> pd.Series:
    """How many times smaller a curve indexed by the level S is at 10·S than at S, for every S
    whose 10·S is there too (Figs 10/11: 1/√S gives √10 ≈ 3.16)."""
    pairs = {s: curve[s] / curve[10 * s] for s in curve.index
             if 10 * s in curve.index and curve[10 * s] > 0}
    return pd.Series(pairs, dtype=float)


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """The least-squares slope of log y against log x over the points with y > 0."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = (x > 0) & (y > 0)
    if keep.sum() < 2:
        return math.nan
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


def correlations(x: pd.Series, y: pd.Series) -> tuple[float, float]:
    """Pearson's r and Spearman's ρ of two columns (NaN below three points or no spread)."""
    if len(x) < 3 or x.nunique() < 2 or y.nunique() < 2:
        return math.nan, math.nan
    return float(x.corr(y)), float(x.rank().corr(y.rank()))


def entropy_fits(rows: pd.DataFrame) -> pd.DataFrame:
    """Fig. 4a: per method, the per-query RAE against the restricted entropy H(q): queries,
    Pearson r, Spearman ρ, the least-squares line (RAE per nat, intercept), and the median RAE
    of the lowest and highest third of the queries by H(q)."""
    out = []
    for method in methods_in(rows):
        m = rows[rows.method == method].dropna(subset=["rae", "entropy"])
        r, rho = correlations(m.entropy, m.rae)
        slope, intercept = (np.polyfit(m.entropy, m.rae, 1) if m.entropy.nunique() > 1
                            else (math.nan, math.nan))
        third = m.entropy.rank(pct=True)
        out.append({"method": method, "queries": len(m), "r": r, "rho": rho,
                    "slope": float(slope), "intercept": float(intercept),
                    "low": float(m.rae[third <= 1 / 3].median()),
                    "high": float(m.rae[third > 2 / 3].median())})
    return pd.DataFrame(out)


def log_ratios(rows: pd.DataFrame) -> pd.Series:
    """log10(p̂ / p) of the rows with a positive estimate and truth."""
    ok = rows[(rows.estimate > 0) & (rows.truth > 0)]
    return np.log10(ok.estimate / ok.truth)


def iqr(values: pd.Series) -> float:
    """The interquartile range (NaN of none)."""
    return float(values.quantile(0.75) - values.quantile(0.25)) if len(values) else math.nan


def spread_ks(run: ModelRun, n: int = 5) -> list[int]:
    """The paper's columns of Figs 7–9, K = 3, 5, 7, 9, 11 of 3..11 (as `figures.scatter`)."""
    ks = sorted(int(k) for k in run.rows.K.unique())
    return ks if len(ks) <= n else [ks[round(i)] for i in np.linspace(0, len(ks) - 1, n)]


def above_truth(rows: pd.DataFrame, sigmas: float = 3.0) -> pd.Series:
    """Whether each estimate exceeds its truth by more than `sigmas` of the truth's own
    standard error (an estimated truth is noisy; an exact one has none)."""
    return rows.estimate > rows.truth * (1 + sigmas * rows.truth_rel_stderr.fillna(0.0))


def beams_per_step(extras: str) -> np.ndarray:
    """Coverage beam search's beams kept per step, summed over the query's products (the
    `beam_sizes` of a result's `extras`)."""
    sizes = json.loads(extras).get("beam_sizes") or [[]]
    return np.atleast_2d(sizes).sum(0).astype(int)


def beam_growth(rows: pd.DataFrame) -> pd.DataFrame:
    """Fig. 12: the median beams kept per step (rows: steps 1…K) per method (columns: one per
    α, largest first), over histories."""
    out = {}
    for method in sorted(rows.method.unique(), key=_alpha_order):
        per_step = [s for s in map(beams_per_step, rows.extras[rows.method == method]) if len(s)]
        depth = min(map(len, per_step)) if per_step else 0
        out[method] = (np.median(np.stack([s[:depth] for s in per_step]), 0) if depth
                       else np.array([]))
    steps = max((len(v) for v in out.values()), default=0)
    return pd.DataFrame({m: pd.Series(v, index=range(1, len(v) + 1)) for m, v in out.items()},
                        index=pd.RangeIndex(1, steps + 1, name="step"))


def alpha_of(method: str) -> str:
    """The coverage α in a method's name (`coverage_beam {"alpha": 0.5}` -> "0.5"), "?" if none."""
    _, _, options = method.partition(" ")
    return str(json.loads(options).get("alpha", "?")) if options else "?"


def _alpha_order(method: str) -> float:
    """Coverage variants by α, largest first (the order of Fig. 12's legend)."""
    alpha = alpha_of(method)
    return -float(alpha) if alpha != "?" else 0.0


def share_means(rows: pd.DataFrame) -> pd.DataFrame:
    """Fig. 15: per share of the focus symbols, histories, mean estimate and its 90% interval
    (±1.645 standard errors, as the figure's bars)."""
    stats = rows.groupby("share").estimate.agg(histories="count", mean="mean", sem="sem")
    stats["sem"] = stats["sem"].fillna(0.0)
    stats["low"] = stats["mean"] - Z90 * stats["sem"]
    stats["high"] = stats["mean"] + Z90 * stats["sem"]
    return stats.reset_index()


def intervals(rows: pd.DataFrame, index: Sequence[str], stat: str = "median") -> pd.DataFrame:
    """Per `index` and method: the median (or mean) RAE and its 95% interval (`median_ci`; for
    the mean ±1.96 standard errors), as columns `value`, `low`, `high`."""
    def one(rae: pd.Series) -> pd.Series:
        x = rae.dropna().to_numpy()
        if stat == "median":
            return pd.Series({"value": float(np.median(x)) if len(x) else math.nan,
                              **dict(zip(("low", "high"), median_ci(x), strict=True))})
        half = Z95 * float(x.std(ddof=1)) / math.sqrt(len(x)) if len(x) > 1 else 0.0
        return pd.Series({"value": float(x.mean()), "low": x.mean() - half,
                          "high": x.mean() + half})
    return rows.groupby([*index, "method"]).rae.apply(one).unstack()
