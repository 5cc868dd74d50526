"""Report of the Fig. 1 experiment (`seqq/sweeps/sentence_end.py`): the estimates of when a
sentence ends, and how much less importance sampling's estimate varies than naive sampling's at
equal model calls.

The variance of each method's estimate at each K is the sample variance over its independent
replicate runs; their ratio naive / IS carries an F interval (both are variances of R
independent, roughly normal estimates). K = 1 is left out of the ratio: importance sampling is
exact there (p(A | prefix) itself), so the ratio is infinite.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy import stats

from seqq.reports.plotting import grid, integer_ticks, legend, method_colors, save, suptitle
from seqq.reports.tables import to_markdown
from seqq.results.store import read_parts

KEY = ["prefix", "method", "replicate", "K"]
LEVEL = 0.95
METHODS = ("importance", "naive")
WIDE_FACTOR = 10.0  # a ratio's interval spanning more than this factor cannot tell 6× from 1×


def load_runs(paths: Iterable[str | Path]) -> pd.DataFrame:
    rows = read_parts(paths, KEY)
    if rows.empty:
        raise FileNotFoundError(f"no Fig. 1 runs (*.parquet) under {', '.join(map(str, paths))}")
    return rows


def variance_ratios(rows: pd.DataFrame, level: float = LEVEL) -> pd.DataFrame:
    """Per (prefix, K ≥ 2): each method's mean and variance over replicates, the ratio of
    naive's variance to IS's with its F interval, each method's mean calls and paths per run,
    and the ratio at an equal number of paths (`paths_ratio*`: naive's variance scaled from its
    paths to IS's, a mean's variance going as 1/paths)."""
    by = rows.groupby(["kind", "prefix", "K", "method"])
    table = by.estimate.agg(["mean", "var", "count"]).unstack("method")
    table.columns = [f"{stat}_{method}" for stat, method in table.columns]
    calls = by.model_calls.mean().unstack("method").add_prefix("calls_")
    paths = (rows.groupby(["kind", "prefix", "method"]).samples.mean().unstack("method")
             .add_prefix("paths_"))
    table = table.join(calls).reset_index().merge(paths.reset_index(), on=["kind", "prefix"])
    table = table[table.K >= 2].copy()
    ratio = table.var_naive / table.var_importance
    df_naive, df_is = table.count_naive - 1, table.count_importance - 1
    tail = (1 - level) / 2
    table["ratio"] = ratio
    table["ratio_low"] = ratio / stats.f.ppf(1 - tail, df_naive, df_is)
    table["ratio_high"] = ratio / stats.f.ppf(tail, df_naive, df_is)
    scale = table.paths_naive / table.paths_importance
    for column in ("ratio", "ratio_low", "ratio_high"):
        table[f"paths_{column}"] = table[column] * scale
    return table


def interval_factor(runs: int, level: float = LEVEL) -> float:
    """high / low of a variance ratio's F interval from `runs` runs of each method."""
    tail = (1 - level) / 2
    return float(stats.f.ppf(1 - tail, runs - 1, runs - 1) / stats.f.ppf(tail, runs - 1, runs - 1))


def too_few_runs(runs: int) -> str | None:
    """What to say where the runs per method leave each variance ratio's interval too wide to
    test the paper's 6× (the quick size's 4 runs: a factor of about 240), else None: a reader
    of the quick figure would otherwise take its spread for a finding."""
    factor = interval_factor(runs)
    if factor <= WIDE_FACTOR:
        return None
    return (f"With {runs} runs per method each variance ratio's {LEVEL:.0%} interval spans a "
            f"factor of {factor:,.0f}, too wide to tell the paper's 6× from no gain: this is "
            "the quick size; run `make fig1 SIZE=paper` for intervals that can.")


def summary(ratios: pd.DataFrame) -> pd.DataFrame:
    """Per prefix: the geometric mean of the ratio over K (where both variances are > 0), its
    range, and at how many K the ratio's interval lies above 1 and contains or exceeds 6."""
    usable = ratios[(ratios.var_naive > 0) & (ratios.var_importance > 0)]
    rows = []
    for (kind, prefix), part in usable.groupby(["kind", "prefix"], sort=False):
        rows.append(dict(
            kind=kind, prefix=prefix, ks=len(part),
            geo_mean=math.exp(np.log(part.ratio).mean()),
            low=part.ratio.min(), high=part.ratio.max(),
            above_1=int((part.ratio_low > 1).sum()),
            reaches_6=int((part.ratio_high >= 6).sum()),
            calls_importance=part.calls_importance.mean(), calls_naive=part.calls_naive.mean()))
    return pd.DataFrame(rows)


BAND = 0.9  # the share of runs the figure's band around each method's mean holds
TAIL = (1 - BAND) / 2  # the share left out on each side


def figure(rows: pd.DataFrame, ratios: pd.DataFrame) -> Figure:
    """Top row: p(τ = K) per prefix, each method's mean over its runs with the band holding the
    middle `BAND` of runs; bottom row: the variance ratio naive / IS with its interval, log scale,
    with the paper's 6× marked."""
    order = rows.drop_duplicates("prefix").sort_values(["kind", "prefix"], ascending=[False, True])
    prefixes = list(order.prefix)  # open-ended first, as the paper's figure
    fig, axes = grid(2, len(prefixes), size=(3.4, 2.7), sharex=True)
    colors = method_colors(METHODS)
    for col, prefix in enumerate(prefixes):
        part = rows[rows.prefix == prefix]
        ax = axes[0, col]
        for method in METHODS:
            by_k = part[part.method == method].groupby("K").estimate
            ax.plot(by_k.mean().index, by_k.mean(), color=colors[method], label=method, lw=1.4)
            ax.fill_between(by_k.mean().index, by_k.quantile(TAIL), by_k.quantile(1 - TAIL),
                            color=colors[method], alpha=0.2, lw=0)
        kind = part.kind.iloc[0]
        ax.set_title(f"{kind}\n“… {_short(prefix, 5)} …”", fontsize=8)
        ax.set_ylabel("p(sentence ends at K)" if col == 0 else "")
        bottom = axes[1, col]
        r = ratios[(ratios.prefix == prefix) & (ratios.var_naive > 0)]
        bottom.errorbar(r.K, r.ratio, yerr=[r.ratio - r.ratio_low, r.ratio_high - r.ratio],
                        fmt="o", ms=3, color="C0", ecolor="C0", alpha=0.8, lw=0.8,
                        label=f"at equal calls ({LEVEL:.0%} F interval)")
        bottom.errorbar(r.K + 0.3, r.paths_ratio, yerr=[r.paths_ratio - r.paths_ratio_low,
                                                       r.paths_ratio_high - r.paths_ratio],
                        fmt="s", ms=2.5, color="C2", ecolor="C2", alpha=0.7, lw=0.8,
                        label="at equal paths (naive's variance × its paths / IS's)")
        bottom.axhline(6, color="grey", ls="--", lw=1, label="the paper's 6×")
        bottom.axhline(1, color="black", lw=0.6)
        bottom.set_yscale("log")
        bottom.set_xlabel("K (tokens ahead)")
        bottom.set_ylabel("Var naive / Var IS" if col == 0 else "")
        bottom.set_title(f"naive draws {r.paths_naive.iloc[0] / r.paths_importance.iloc[0]:.2f}× "
                         "IS's paths" if len(r) else "", fontsize=8)
        integer_ticks(bottom)
    wide = too_few_runs(rows.replicate.nunique())
    suptitle(fig, "Fig. 1: when will the sentence end? SmolLM2-135M on WikiText prefixes; "
                  "importance sampling vs naive sampling, variance ratio at equal calls and "
                  "at equal paths" + (f"\n{wide}" if wide else ""))
    legend(fig, axes)
    return fig


def _short(prefix: str, words: int = 6) -> str:
    parts = prefix.split()
    return " ".join(parts[-words:]) if len(parts) > words else prefix


def summary_markdown(table: pd.DataFrame) -> str:
    """The per-prefix summary as a Markdown table."""
    shown = pd.DataFrame({
        "prefix": [f"{k}: “{_short(p)} …”" for k, p in zip(table.kind, table.prefix,
                                                           strict=True)],
        "K": table.ks.map(lambda n: f"2–{n + 1}" if n else "–"),
        "Var naive / Var IS (geo. mean over K)": table.geo_mean.map("{:.1f}".format),
        "range over K": [f"{lo:.1f}–{hi:.1f}" for lo, hi in zip(table.low, table.high,
                                                               strict=True)],
        "K with ratio > 1 beyond noise": [f"{a} of {n}" for a, n in zip(table.above_1, table.ks,
                                                                        strict=True)],
        "K whose interval reaches 6": [f"{a} of {n}" for a, n in zip(table.reaches_6, table.ks,
                                                                     strict=True)],
        "calls per run (IS / naive)": [f"{i:,.0f} / {n:,.0f}" for i, n in zip(
            table.calls_importance, table.calls_naive, strict=True)],
    })
    return to_markdown(shown)


def write_sentence_end_report(paths: Iterable[str | Path], out: str | Path) -> Path:
    """`summary.md` (the table above and the ratio per K) and the figure (PNG + PDF)."""
    out = Path(out)
    rows = load_runs(list(paths))
    ratios = variance_ratios(rows)
    save(figure(rows, ratios), out, "sentence_end")
    per_k = ratios[["kind", "K", "ratio", "ratio_low", "ratio_high"]].assign(
        prefix=[_short(p) for p in ratios.prefix])
    runs = rows.replicate.nunique()
    wide = too_few_runs(runs)
    text = ["# Fig. 1: when will the sentence end?", "",
            f"{runs} runs per method and prefix; {LEVEL:.0%} F intervals."
            + (f" **{wide}**" if wide else ""), "", summary_markdown(summary(ratios)), "",
            "![Fig. 1](sentence_end.png)", "", "## Variance ratio per K", "",
            to_markdown(per_k.round(3)), ""]
    (out / "summary.md").write_text("\n".join(text))
    return out
