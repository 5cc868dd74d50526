"""The paper's figures, each drawn from a results table alone (PNG + PDF, matplotlib Agg).

`FIGURES` maps a name to (applies, draw): `applies(results)` says whether the results hold
what the figure needs (several K, several budgets, temperatures, a_before_b pairs, ...), so
`seqq report` draws every figure its input supports. Panels are datasets; a dataset whose data
was the synthetic stand-in says so in its panel title.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import LogLocator, NullLocator  # noqa: E402

from seqq.reports import frontier  # noqa: E402
from seqq.reports.tables import dataset_title, unaccounted  # noqa: E402

STYLE = {"hybrid": "C0", "importance": "C1", "beam": "C2", "uniform": "C3", "naive": "C4",
         "coverage_beam": "C5", "tail_beam": "C6", "exact": "k"}
SCATTER_KS = (3, 5, 7, 9, 11)
BUDGET_KS = (3, 7, 11)
PAPER_METHODS = ("hybrid", "importance", "beam")  # the scatter plots' methods (Fig. 7-9)


def _save(fig: plt.Figure, out: Path, name: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    for path in paths:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return paths


def _grid(rows: int, cols: int, size: tuple[float, float] = (3.6, 2.9),
          **kw) -> tuple[plt.Figure, np.ndarray]:
    fig, axes = plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows),
                             squeeze=False, layout="constrained", **kw)
    return fig, axes


def _legend_below(ax: plt.Axes) -> None:
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)


def _base(results: pd.DataFrame) -> pd.DataFrame:
    """Rows at temperature 1 (the untempered model) when there are any."""
    base = results[results.temperature == 1.0]
    return base if len(base) else results


def _finite(results: pd.DataFrame) -> pd.DataFrame:
    return results[np.isfinite(results.rae)]


def _legend(fig: plt.Figure, axes: np.ndarray) -> None:
    handles, labels = {}, {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
            labels[lab] = lab
    if handles:
        fig.legend(list(handles.values()), list(labels), loc="outside upper center",
                   ncol=min(len(handles), 6))


def rae_vs_k(results: pd.DataFrame, out: Path, stat: str = "median") -> list[Path]:
    """Fig. 3/5/6: median (or mean) RAE vs K; rows = budget levels, columns = datasets."""
    data = _finite(_base(results))
    levels, datasets = sorted(data.budget_level.unique()), sorted(data.dataset.unique())
    fig, axes = _grid(len(levels), len(datasets), sharex=True)
    for i, level in enumerate(levels):
        for j, ds in enumerate(datasets):
            ax = axes[i, j]
            panel = data[(data.budget_level == level) & (data.dataset == ds)]
            for method, rows in panel.groupby("method"):
                curve = rows.groupby("K").rae.agg(stat)
                ax.plot(curve.index, curve.values, "o-", ms=3, label=method,
                        color=STYLE.get(method))
            ax.set(xlabel="K", ylabel=f"{stat} RAE")
            ax.set_title(f"{dataset_title(results, ds)}\nS={level}", fontsize=9)
    _legend(fig, axes)
    return _save(fig, out, f"rae_vs_k_{stat}")


def rae_vs_entropy(results: pd.DataFrame, out: Path) -> list[Path]:
    """Fig. 4a: per-query RAE vs restricted entropy H(q), with least-squares lines."""
    data = _finite(_base(results)).dropna(subset=["entropy"])
    datasets = sorted(data.dataset.unique())
    fig, axes = _grid(1, len(datasets))
    for j, ds in enumerate(datasets):
        ax = axes[0, j]
        for method, rows in data[data.dataset == ds].groupby("method"):
            color = STYLE.get(method)
            ax.scatter(rows.entropy, rows.rae, s=4, alpha=0.3, color=color, label=method,
                       rasterized=True)
            if rows.entropy.nunique() > 1:
                slope, intercept = np.polyfit(rows.entropy, rows.rae, 1)
                xs = np.linspace(rows.entropy.min(), rows.entropy.max(), 20)
                ax.plot(xs, slope * xs + intercept, color=color, lw=1.5)
        ax.set(xlabel="restricted entropy H(q) [nats]", ylabel="RAE")
        ax.set_title(dataset_title(results, ds), fontsize=9)
    _legend(fig, axes)
    return _save(fig, out, "rae_vs_entropy")


def rae_vs_temperature(results: pd.DataFrame, out: Path) -> list[Path]:
    """Fig. 4b/13: median RAE vs model temperature with interquartile bands."""
    data = _finite(results)
    counts = data.groupby("dataset").temperature.nunique()
    datasets = sorted(counts[counts > 1].index)
    fig, axes = _grid(1, len(datasets))
    for j, ds in enumerate(datasets):
        ax = axes[0, j]
        for method, rows in data[data.dataset == ds].groupby("method"):
            q = rows.groupby("temperature").rae.quantile([0.25, 0.5, 0.75]).unstack()
            ax.plot(q.index, q[0.5], "o-", ms=3, color=STYLE.get(method), label=method)
            ax.fill_between(q.index, q[0.25], q[0.75], color=STYLE.get(method), alpha=0.2)
        ax.set(xlabel="temperature T", ylabel="median RAE")
        ax.set_title(dataset_title(results, ds), fontsize=9)
    _legend(fig, axes)
    return _save(fig, out, "rae_vs_temperature")


def scatter(results: pd.DataFrame, out: Path) -> list[Path]:
    """Fig. 7-9: estimate vs ground truth; rows = methods, columns = K, one file per dataset
    and budget level, with the ground-truth density underneath."""
    data = _base(results).dropna(subset=["estimate", "truth"])
    paths = []
    for (ds, level), block in data.groupby(["dataset", "budget_level"]):
        present = sorted(block.K.unique())
        ks = [k for k in SCATTER_KS if k in present] or present[:5]
        methods = sorted(set(block.method) & set(PAPER_METHODS)) or sorted(block.method.unique())
        fig, axes = _grid(len(methods) + 1, len(ks))
        for j, k in enumerate(ks):
            at_k = block[block["K"] == k]
            lo = max(at_k.truth[at_k.truth > 0].min(), 1e-12) if (at_k.truth > 0).any() else 1e-12
            hi = max(at_k.truth.max(), at_k.estimate.max(), lo * 10)
            for i, method in enumerate(methods):
                ax = axes[i, j]
                rows = at_k[at_k.method == method]
                ax.scatter(rows.truth, rows.estimate.clip(lower=lo / 10), s=4, alpha=0.4,
                           color=STYLE.get(method), rasterized=True)
                ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
                ax.set(xscale="log", yscale="log", title=f"{method}, K={k}")
                ax.title.set_fontsize(8)
                for axis in (ax.xaxis, ax.yaxis):  # few ticks: log axes over many decades
                    axis.set_major_locator(LogLocator(numticks=4))  # are slow to lay out
                    axis.set_minor_locator(NullLocator())
            ax = axes[-1, j]
            ax.hist(np.log10(at_k.drop_duplicates(["history_id", "label"]).truth.clip(lower=lo)),
                    bins=20, color="grey")
            ax.set_xlabel("log10 ground truth")
        fig.suptitle(f"{dataset_title(results, ds)}: estimate vs ground truth, S={level}",
                     fontsize=10)
        paths += _save(fig, out, f"scatter_{ds}_S{level}")
    return paths


def rae_vs_budget(results: pd.DataFrame, out: Path, stat: str = "median") -> list[Path]:
    """Fig. 10/11: RAE vs budget (S); rows = K in (3, 7, 11) where present, columns = datasets."""
    data = _finite(_base(results))
    present = sorted(data.K.unique())
    ks = [k for k in BUDGET_KS if k in present] or present[:3]
    datasets = sorted(data.dataset.unique())
    fig, axes = _grid(len(ks), len(datasets))
    for i, k in enumerate(ks):
        for j, ds in enumerate(datasets):
            ax = axes[i, j]
            panel = data[(data["K"] == k) & (data.dataset == ds)]
            for method, rows in panel.groupby("method"):
                curve = rows.groupby("budget_level").rae.agg(stat)
                ax.plot(curve.index, curve.values, "o-", ms=3, label=method,
                        color=STYLE.get(method))
            ax.set(xscale="log", yscale="log", xlabel="budget S", ylabel=f"{stat} RAE")
            ax.set_title(f"{dataset_title(results, ds)}\nK={k}", fontsize=9)
    _legend(fig, axes)
    return _save(fig, out, f"rae_vs_budget_{stat}")


def beam_sizes(results: pd.DataFrame, out: Path) -> list[Path]:
    """Fig. 12: coverage beam search, beams kept per step, one line per history, per α."""
    data = results[results.method.str.startswith("coverage_beam")]
    fig, axes = _grid(1, 1)
    ax = axes[0, 0]
    for n, (options, rows) in enumerate(data.groupby("options")):
        alpha = json.loads(options).get("alpha", "?")
        for i, extras in enumerate(rows.extras):
            per_product = np.atleast_2d(json.loads(extras).get("beam_sizes") or [[]])
            sizes = per_product.sum(0)  # beams kept at each step, over the query's products
            ax.plot(range(1, len(sizes) + 1), sizes, color=f"C{n}", alpha=0.4, lw=0.8,
                    label=f"α={alpha}" if i == 0 else None)
    ax.set(yscale="log", xlabel="step k", ylabel="beams |B_k|")
    names = ", ".join(dataset_title(results, d) for d in sorted(data.dataset.unique()))
    ax.set_title(f"coverage beam search: {names}", fontsize=9)
    ax.legend(fontsize=8)
    return _save(fig, out, "beam_sizes")


def unaccounted_vs_k(results: pd.DataFrame, out: Path) -> list[Path]:
    """Fig. 14: mean unaccounted probability of the pair τ(A)<τ(B), τ(B)<τ(A) vs K, 99% CI."""
    data = unaccounted(_base(results))
    fig, axes = _grid(1, 1, size=(6.0, 3.6))
    ax = axes[0, 0]
    for n, ((ds, method), rows) in enumerate(data.groupby(["dataset", "method"])):
        stats = rows.groupby("K").unaccounted.agg(["mean", "sem"]).fillna(0)
        ax.plot(stats.index, stats["mean"], "o-", ms=3, color=f"C{n}",
                label=f"{dataset_title(results, ds)} ({method})")
        ax.fill_between(stats.index, stats["mean"] - 2.576 * stats["sem"],
                        stats["mean"] + 2.576 * stats["sem"], color=f"C{n}", alpha=0.2)
    ax.set(xlabel="K", ylabel="unaccounted probability")
    _legend_below(ax)
    return _save(fig, out, "unaccounted_vs_k")


def case_study(results: pd.DataFrame, out: Path) -> list[Path]:
    """Fig. 15: mean estimate (90% CI) vs the share of the focus symbols in the history."""
    data = results[results.group.fillna("").str.startswith("share=")].copy()
    data["share"] = data.group.str.removeprefix("share=").astype(float)
    fig, axes = _grid(1, 1, size=(6.0, 3.6))
    ax = axes[0, 0]
    for n, ((ds, label, method), rows) in enumerate(data.groupby(["dataset", "label", "method"])):
        stats = rows.groupby("share").estimate.agg(["mean", "sem"]).fillna(0)
        ax.errorbar(stats.index, stats["mean"], yerr=1.645 * stats["sem"], fmt="o-", ms=3,
                    capsize=3, color=f"C{n}",
                    label=f"{dataset_title(results, ds)}: {label} ({method})")
    ax.set(xlabel="share of focus symbols A in the history", ylabel="mean estimate")
    _legend_below(ax)
    return _save(fig, out, "case_study")


def _several(column: str, least: int = 2) -> Callable[[pd.DataFrame], bool]:
    return lambda r: r[column].nunique() >= least


FIGURES: dict[str, tuple[Callable[[pd.DataFrame], bool], Callable[..., list[Path]]]] = {
    "rae_vs_k_median": (_several("K"), lambda r, o: rae_vs_k(r, o, "median")),
    "rae_vs_k_mean": (_several("K"), lambda r, o: rae_vs_k(r, o, "mean")),
    "rae_vs_entropy": (lambda r: r.entropy.notna().any() and r.method.isin(
        ["importance", "beam"]).any(), rae_vs_entropy),
    "rae_vs_temperature": (lambda r: (r.groupby("dataset").temperature.nunique() > 1).any(),
                           rae_vs_temperature),
    "scatter": (lambda r: (r.estimate.notna() & r.truth.notna()).any(), scatter),
    "rae_vs_budget_median": (_several("budget_level", 3), lambda r, o: rae_vs_budget(r, o)),
    "rae_vs_budget_mean": (_several("budget_level", 3), lambda r, o: rae_vs_budget(r, o, "mean")),
    "beam_sizes": (lambda r: r.method.str.startswith("coverage_beam").any(), beam_sizes),
    "unaccounted_vs_k": (lambda r: not unaccounted(r).empty, unaccounted_vs_k),
    "case_study": (lambda r: r.group.fillna("").str.startswith("share=").any(), case_study),
    "frontier": (frontier.applies, frontier.draw),
}
