"""The paper's figures, each drawn from a results table alone.

`FIGURES` maps a name to a function `results -> {file stem: Figure}`; `build.py` saves what it
returns as PNG + PDF. A function raises `NotApplicable` when the results lack what it needs
(several K, several budgets, temperatures, a_before_b pairs, ...), so `seqq report` draws every
figure its input supports. Registering a figure is one line in `FIGURES`.

Every figure keeps panels apart (one dataset, model, temperature, query kind and budget rule:
`tables.PANEL`) and levels S apart, so no curve, scatter or fit pools two models or two
budgets; a dataset whose data was the synthetic stand-in says so in its panel titles.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from seqq.reports import frontier
from seqq.reports.plotting import (
    NotApplicable,
    empty,
    grid,
    integer_ticks,
    legend,
    log_axes,
    method_colors,
    panel_title,
    suptitle,
    wrapped,
)
from seqq.reports.presentation import drawn_in, paper_methods
from seqq.reports.tables import PANEL, Panel, finite, panels, unaccounted_summary

PANELS_PER_ROW = 3  # panels per row where a figure with one row of panels would grow too wide


def _base(results: pd.DataFrame) -> pd.DataFrame:
    """Rows at temperature 1 (the untempered model) when there are any."""
    base = results[results.temperature == 1.0]
    return base if len(base) else results


def _spread(values: list, n: int) -> list:
    """At most `n` of the sorted `values`, evenly spaced, first and last included: the paper's
    K = 3, 5, 7, 9, 11 (scatter) and 3, 7, 11 (budgets) out of 3..11."""
    if len(values) <= n:
        return values
    return [values[round(i)] for i in np.linspace(0, len(values) - 1, n)]


def _by_panel(data: pd.DataFrame,
              columns: list[str] = PANEL) -> Iterator[tuple[Panel, pd.DataFrame]]:
    """(panel name, rows) per panel, in a stable order."""
    named = panels(data, columns)
    for key, block in data.groupby(columns, sort=True):
        yield named[key], block


def _method_curves(ax: Axes, rows: pd.DataFrame, x: str, stat: str,
                   colors: dict[str, str]) -> None:
    for method, m in rows.groupby("method"):
        curve = m.groupby(x).rae.agg(stat)
        ax.plot(curve.index, curve.values, "o-", ms=3, label=method, color=colors[method])


def _cells(axes: np.ndarray, usable: list, keys: list,
           select: Callable[[pd.DataFrame, Any], pd.Series], label: Callable[[Any], str]
           ) -> Iterator[tuple[Axes, pd.DataFrame]]:
    """(axes, rows) of every grid cell, columns = panels, rows = `keys`; each cell titled, and
    a cell without rows marked as such instead of drawn."""
    for j, (panel, block) in enumerate(usable):
        for i, key in enumerate(keys):
            ax, rows = axes[i, j], block[select(block, key)]
            panel_title(ax, panel.heading, label(key))
            if rows.empty:
                empty(ax, f"no runs at {label(key)}")
                continue
            yield ax, rows


def _panel_grid(keys: int, panels: int) -> tuple[Figure, np.ndarray]:
    """A keys × panels grid for `_cells`; with one key, many panels wrap into rows of
    PANELS_PER_ROW (the extra axes hidden) instead of one strip too wide to read."""
    if keys > 1 or panels <= PANELS_PER_ROW:
        return grid(keys, panels)
    fig, axes = wrapped(panels, PANELS_PER_ROW)
    return fig, axes.flatten()[:panels].reshape(1, panels)


def _at_level(block: pd.DataFrame, level: int) -> pd.Series:
    return block.budget_level == level


def _level_label(level: int) -> str:
    return f"S={level}"


def rae_vs_k(results: pd.DataFrame, stat: str = "median") -> dict[str, Figure]:
    """Fig. 3/5/6: median (or mean) RAE vs K; rows = levels S, columns = panels."""
    data = finite(_base(results))
    usable = [(p, b) for p, b in _by_panel(data) if b.K.nunique() > 1]
    if not usable:
        raise NotApplicable("needs the RAE at two or more horizons K")
    levels = sorted({level for _, b in usable for level in b.budget_level.unique()})
    colors = method_colors(data.method)
    fig, axes = _panel_grid(len(levels), len(usable))
    for ax, rows in _cells(axes, usable, levels, _at_level, _level_label):
        _method_curves(ax, rows, "K", stat, colors)
        ax.set(xlabel="horizon K", ylabel=f"{stat} RAE", ylim=(0, None))
        integer_ticks(ax)
    suptitle(fig, f"{stat.capitalize()} relative absolute error |p̂ − p| / p over queries, "
                  "vs horizon K")
    legend(fig, axes)
    return {f"rae_vs_k_{stat}": fig}


def rae_vs_entropy(results: pd.DataFrame) -> dict[str, Figure]:
    """Fig. 4a: per-query RAE vs restricted entropy H(q), one least-squares line per method,
    panel and level S; rows = levels S, columns = panels."""
    data = finite(_base(results)).dropna(subset=["entropy"])
    if data.empty:
        raise NotApplicable("needs the restricted entropy H(q) of queries with an RAE")
    usable = list(_by_panel(data))
    levels = sorted(data.budget_level.unique())
    colors = method_colors(data.method)
    fig, axes = grid(len(levels), len(usable))
    for ax, rows in _cells(axes, usable, levels, _at_level, _level_label):
        for method, m in rows.groupby("method"):
            ax.scatter(m.entropy, m.rae, s=4, alpha=0.3, color=colors[method], rasterized=True)
        for method, m in rows.groupby("method"):  # the lines over every method's dots
            color = colors[method]
            ax.plot([], [], "o-", ms=4, color=color, label=method)  # legend: dots + fit
            if m.entropy.nunique() > 1:
                slope, intercept = np.polyfit(m.entropy, m.rae, 1)
                xs = np.linspace(m.entropy.min(), m.entropy.max(), 20)
                ax.plot(xs, slope * xs + intercept, color=color, lw=1.5)
        _clip_outliers(ax, rows.rae)
        ax.set(xlabel="restricted entropy H(q) [nats]", ylabel="RAE")
    suptitle(fig, "Per-query RAE vs restricted entropy; lines: least-squares fit per method "
                  "at each level S")
    legend(fig, axes)
    return {"rae_vs_entropy": fig}


def _clip_outliers(ax: Axes, rae: pd.Series) -> None:
    """Fit the y-axis to 99% of the RAEs (and at least 0 to 1) when a few huge ones would
    flatten the rest, saying how many points lie above."""
    top = max(1.05, 1.05 * float(np.quantile(rae, 0.99)))
    above = int((rae > top).sum())
    if above:
        ax.set_ylim(0, top)
        ax.text(0.98, 0.96, f"{above} points above RAE = {top:.2g}", ha="right", va="top",
                fontsize=7, color="dimgrey", transform=ax.transAxes,
                bbox={"facecolor": "white", "alpha": 0.8, "linewidth": 0})


def rae_vs_temperature(results: pd.DataFrame) -> dict[str, Figure]:
    """Fig. 4b/13: median RAE vs model temperature with interquartile bands; columns = panels
    (all temperatures of a dataset, model, query kind and budget rule), rows = the (budget
    level S, horizon K) pairs run at two or more temperatures."""
    columns = [c for c in PANEL if c != "temperature"]
    data = finite(results)
    spread = data.groupby([*columns, "budget_level", "K"]).temperature.transform("nunique")
    data = data[spread > 1]
    if data.empty:
        raise NotApplicable("needs the RAE of one horizon K and level S at two or more "
                            "model temperatures")
    usable = list(_by_panel(data, columns))
    cells = sorted({cell for _, b in usable for cell in zip(b.budget_level, b["K"], strict=True)})
    colors = method_colors(data.method)
    fig, axes = grid(len(cells), len(usable))
    for ax, rows in _cells(axes, usable, cells,
                           lambda b, c: (b.budget_level == c[0]) & (b["K"] == c[1]),
                           lambda c: f"S={c[0]} · K={c[1]}"):
        for method, m in rows.groupby("method"):
            q = m.groupby("temperature").rae.quantile([0.25, 0.5, 0.75]).unstack()
            ax.plot(q.index, q[0.5], "o-", ms=3, color=colors[method], label=method)
            ax.fill_between(q.index, q[0.25], q[0.75], color=colors[method], alpha=0.2)
        ax.set(xlabel="temperature T", ylabel="median RAE", ylim=(0, None))
        temperatures = sorted(rows.temperature.unique())
        if temperatures[-1] >= 4 * temperatures[0]:  # cold and hot ends both readable
            ax.set_xscale("log", base=2)
            ax.set_xticks(temperatures, [f"{t:g}" for t in temperatures], fontsize=7)
            ax.minorticks_off()
    suptitle(fig, "Median RAE vs model temperature; bands: interquartile range over queries")
    legend(fig, axes)
    return {"rae_vs_temperature": fig}


def scatter(results: pd.DataFrame) -> dict[str, Figure]:
    """Fig. 7-9: estimate vs ground truth; rows = methods, columns = K, one figure per panel
    and level S, with the ground-truth histogram underneath. Zero estimates (beam search
    missing all mass, IS drawing no hit) have no place on a log axis: they sit on a dotted
    floor line that says how many there are."""
    data = _base(results).dropna(subset=["estimate", "truth"])
    data = data[data.truth > 0]
    if data.empty:
        raise NotApplicable("needs estimates of queries with a positive ground truth")
    figures, colors = {}, method_colors(data.method)
    for panel, block in _by_panel(data):
        for level, rows in block.groupby("budget_level"):
            figures[f"scatter_{panel.slug}_S{level}"] = _scatter_panel(rows, panel.heading, level,
                                                                       colors)
    return figures


def _scatter_panel(block: pd.DataFrame, title: str, level: int,
                   colors: dict[str, str]) -> Figure:
    ks = _spread(sorted(block.K.unique()), 5)
    methods = sorted(set(block.method) & set(paper_methods())) or sorted(block.method.unique())
    fig, axes = grid(len(methods) + 1, len(ks), size=(3.0, 2.7))
    for j, k in enumerate(ks):
        at_k = block[block["K"] == k]
        positive = pd.concat([at_k.truth, at_k.estimate[at_k.estimate > 0]])
        lo, hi = positive.min(), positive.max()
        floor = lo / 10
        for i, method in enumerate(methods):
            ax, rows = axes[i, j], at_k[at_k.method == method]
            zero = rows.estimate <= 0
            ax.scatter(rows.truth[~zero], rows.estimate[~zero], s=4, alpha=0.4,
                       color=colors[method], rasterized=True)
            ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
            if zero.any():
                ax.scatter(rows.truth[zero], np.full(zero.sum(), floor), s=8, marker="v",
                           color=colors[method], alpha=0.6)
                ax.axhline(floor, color="grey", ls=":", lw=0.8)
                ax.text(0.02, 0.04, f"p̂ = 0: {zero.sum()} of {len(rows)}", fontsize=7,
                        transform=ax.transAxes, color="grey")
            log_axes(ax)
            ax.set_title(f"{method}, K={k}", fontsize=8)
            ax.set_xlabel("ground truth p", fontsize=8)
            if j == 0:
                ax.set_ylabel("estimate p̂", fontsize=8)
        ax = axes[-1, j]
        truth = at_k.drop_duplicates(["history_id", "label"]).truth
        ax.hist(np.log10(truth), bins=20, color="grey")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # query counts
        ax.set_xlabel("log10 ground truth p", fontsize=8)
        if j == 0:
            ax.set_ylabel("queries", fontsize=8)
    suptitle(fig, f"{title}: estimate vs ground truth at S={level} (dashed: p̂ = p)")
    return fig


def rae_vs_level(results: pd.DataFrame, stat: str = "median") -> dict[str, Figure]:
    """Fig. 10/11: RAE vs level S; rows = three horizons K (3, 7, 11 of 3..11), columns
    = panels."""
    data = finite(_base(results))
    data = data[data.budget_level > 0]
    usable = [(p, b) for p, b in _by_panel(data) if b.budget_level.nunique() > 2]
    if not usable:
        raise NotApplicable("needs the RAE at three or more levels S")
    ks = _spread(sorted({k for _, b in usable for k in b.K.unique()}), 3)
    colors = method_colors(data.method)
    fig, axes = grid(len(ks), len(usable))
    for ax, rows in _cells(axes, usable, ks, lambda b, k: b["K"] == k, lambda k: f"K={k}"):
        _method_curves(ax, rows, "budget_level", stat, colors)
        log_axes(ax)
        ax.set(xlabel="level S", ylabel=f"{stat} RAE")
    suptitle(fig, f"{stat.capitalize()} RAE vs level S")
    legend(fig, axes)
    return {f"rae_vs_level_{stat}": fig}


def _alpha(options: str) -> str:
    return f"α = {json.loads(options).get('alpha', '?')}"


def beam_sizes(results: pd.DataFrame) -> dict[str, Figure]:
    """Fig. 12: coverage beam search, beams kept per step, per α; rows = panels, columns = K.
    Thin lines are single histories, thick lines their median."""
    methods = drawn_in("beam_sizes")
    data = results[results.base_method.isin(methods)]  # labelled variants included
    if data.empty:
        raise NotApplicable(f"needs {' or '.join(methods)} results")
    option_sets = sorted(data.options.unique(), key=lambda o: -json.loads(o).get("alpha", 0))
    colors = {o: f"C{n}" for n, o in enumerate(option_sets)}
    usable = list(_by_panel(data))
    ks = sorted(data.K.unique())
    fig, axes = grid(len(usable), len(ks), sharey="row")
    for i, (panel, block) in enumerate(usable):
        for j, k in enumerate(ks):
            ax, at_k = axes[i, j], block[block["K"] == k]
            panel_title(ax, panel.heading, f"K={k}")
            if at_k.empty:
                empty(ax, f"no runs at K={k}")
                continue
            for options in option_sets:
                rows = at_k[at_k.options == options]
                sizes = [np.atleast_2d(json.loads(e).get("beam_sizes") or [[]]).sum(0)
                         for e in rows.extras]  # beams per step, over the query's products
                sizes = [s for s in sizes if len(s)]
                if not sizes:
                    continue
                for s in sizes:
                    ax.plot(range(1, len(s) + 1), s, color=colors[options], alpha=0.3, lw=0.7)
                depth = min(len(s) for s in sizes)
                median = np.median(np.stack([s[:depth] for s in sizes]), 0)
                ax.plot(range(1, depth + 1), median, "o-", ms=3, lw=2, color=colors[options],
                        label=_alpha(options))
            ax.set(yscale="log", xlabel="step k", ylabel="beams kept |B_k|")
            integer_ticks(ax)
    suptitle(fig, "Coverage beam search: beams kept per step "
                  "(thin: one history; thick: median over histories)")
    legend(fig, axes, title="coverage α")
    return {"beam_sizes": fig}


def unaccounted_vs_k(results: pd.DataFrame) -> dict[str, Figure]:
    """Fig. 14: mean unaccounted probability of the pair τ(A)<τ(B), τ(B)<τ(A) vs K with 99%
    confidence bands; one panel per dataset/model, one curve per method and level S."""
    base = _base(results)
    stats = unaccounted_summary(base)
    if stats.empty:
        raise NotApplicable("needs both orders of an a_before_b query on the same histories")
    named = panels(base[base["query"] == "a_before_b"])
    several = stats.groupby(PANEL).budget_level.nunique().max() > 1
    keys = list(stats.groupby(PANEL, sort=True).groups)
    fig, axes = grid(1, len(keys), size=(5.0, 3.4))
    for j, (key, block) in enumerate(stats.groupby(PANEL, sort=True)):
        ax = axes[0, j]
        for n, ((method, level), rows) in enumerate(block.groupby(["method", "budget_level"])):
            label = f"{method}, S={level}" if several else method
            ax.plot(rows.K, rows["mean"], "o-", ms=3, color=f"C{n}", label=label)
            ax.fill_between(rows.K, rows.ci99_low, rows.ci99_high, color=f"C{n}", alpha=0.2)
        ax.set(xlabel="horizon K", ylabel="unaccounted probability")
        panel_title(ax, named[key].heading)
        integer_ticks(ax)
    suptitle(fig, "Unaccounted probability, mean over histories:\n"
                  "1 − p̂(τ(A) < τ(B) ≤ K) − p̂(τ(B) < τ(A) ≤ K)")
    band = Patch(color="grey", alpha=0.3, label="band: 99% CI of the mean (±2.576 s.e.)")
    legend(fig, axes, extra=[band])
    return {"unaccounted_vs_k": fig}


def case_study(results: pd.DataFrame) -> dict[str, Figure]:
    """Fig. 15: mean estimate (90% CI) vs the share of the focus symbols in the history; one
    panel per dataset/model, one curve per query, method and level S."""
    data = results[results.group.fillna("").str.startswith("share=")]
    if data.empty:
        raise NotApplicable("needs mixture histories (sweep.histories_from=mixture)")
    data = data.assign(share=data.group.str.removeprefix("share=").astype(float))
    usable = list(_by_panel(data))
    fig, axes = grid(1, len(usable), size=(5.0, 3.6))
    for j, (panel, block) in enumerate(usable):
        ax = axes[0, j]
        groups = block.groupby(["label", "method", "budget_level"])
        for n, ((label, method, level), rows) in enumerate(groups):
            stats = rows.groupby("share").estimate.agg(["mean", "sem"]).fillna(0)
            ax.errorbar(stats.index, stats["mean"], yerr=1.645 * stats["sem"], fmt="o-", ms=3,
                        capsize=3, color=f"C{n}", label=f"{label} ({method}, S={level})")
        ax.set(xlabel="share of focus symbols A in the history", ylabel="mean estimate p̂")
        panel_title(ax, panel.heading)
    suptitle(fig, "Case study: mean estimate vs history composition "
                  "(error bars: 90% CI of the mean)")
    legend(fig, axes)
    return {"case_study": fig}


FIGURES: dict[str, Callable[[pd.DataFrame], dict[str, Figure]]] = {
    "rae_vs_k_median": partial(rae_vs_k, stat="median"),
    "rae_vs_k_mean": partial(rae_vs_k, stat="mean"),
    "rae_vs_entropy": rae_vs_entropy,
    "rae_vs_temperature": rae_vs_temperature,
    "scatter": scatter,
    "rae_vs_level_median": partial(rae_vs_level, stat="median"),
    "rae_vs_level_mean": partial(rae_vs_level, stat="mean"),
    "beam_sizes": beam_sizes,
    "unaccounted_vs_k": unaccounted_vs_k,
    "case_study": case_study,
    "frontier": frontier.draw,
}
