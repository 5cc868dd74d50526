"""The reproductions' figures, one function per experiment: `panels -> {file stem: Figure}`.
Fig. 3 has its own; the others draw the quick-size report's figures (`seqq/reports/figures.py`)
on the experiment's panels. The paper's figures are plots whose values its text does not give,
so no paper values are drawn."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from seqq.estimators.registry import get
from seqq.reports import figures
from seqq.reports.plotting import grid, integer_ticks, panel_title, suptitle
from seqq.reports.reproduction.panels import PAPER_METHODS, SETTER, ModelRun
from seqq.reports.reproduction.stats import FIG3_LEVEL, others_medians, summary

# markers and colours of the non-paper methods, apart from the paper methods' registered colours
OTHER_STYLES = [("s", "C3"), ("^", "C4"), ("v", "C5"), ("D", "C6"), ("P", "C7"), ("X", "C8"),
                ("<", "C9"), (">", "black"), ("h", "darkgoldenrod"), ("*", "teal")]


def fig3(runs: Sequence[ModelRun]) -> dict[str, Figure]:
    """Fig. 3: median RAE vs K, one panel per model (bands: 95% intervals of the medians);
    where other methods ran at the same calls, a second row with them and the budget setter on
    their histories."""
    (level,) = {s for r in runs for s in r.levels}
    stats = [summary(r) for r in runs]
    frontier = any(not r.others.empty for r in runs)
    fig, axes = grid(2 if frontier else 1, len(runs), size=(max(4.8, 8.0 / len(runs)), 3.8),
                     sharey=True)
    if frontier:
        for ax, run, s in zip(axes[1], runs, stats, strict=True):
            _others_panel(ax, run, s)
    for ax, run, s in zip(axes[0], runs, stats, strict=True):
        for method in PAPER_METHODS:
            color = get(method).color
            ax.plot(s.K, s[method], "o-", ms=3.5, color=color, label=method)
            ax.fill_between(s.K, s[f"{method}_low"], s[f"{method}_high"], color=color,
                            alpha=0.15, lw=0)
        surrogate = s[s.floor > 0]
        if len(surrogate):
            ax.plot(surrogate.K, surrogate.floor, ":", color="grey",
                    label="noise floor of the surrogate truth")
        exact = s[s.truth == "exact"].K
        if len(exact):
            ax.axvspan(exact.min() - 0.5, exact.max() + 0.5, color="grey", alpha=0.1, lw=0,
                       label=f"exact truth (K ≤ {exact.max()})")
        _log_rae_axes(ax, s.K.to_list())
        panel_title(ax, *run.lines, width=60)
    for row in axes:  # a row may start with an empty panel (a model no other method ran on)
        shown = [ax for ax in row if ax.axison]
        shown[0].set_ylabel("median RAE")
        for ax in shown:
            ax.tick_params(labelleft=True)
    suptitle(fig, f"Fig. 3 protocol: median RAE of p(τ(a) = K) at equal model calls "
                  f"(the hybrid's, S = {level})\nbands: 95% intervals of the medians · no paper values: "
                  "its text gives none for Fig. 3")
    handles: dict[str, object] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=3,
               fontsize=8)
    return {"fig3": fig}


def _others_panel(ax: Axes, run: ModelRun, s: pd.DataFrame) -> None:
    """The other methods at the same calls, and the budget setter, on the histories all of them
    ran."""
    ks = s.K.to_list()
    if run.others.empty:
        ax.set_axis_off()
        return
    medians, n = others_medians(run, ks)
    for i, method in enumerate(c for c in medians.columns if c != SETTER):
        marker, color = OTHER_STYLES[i % len(OTHER_STYLES)]
        ax.plot(ks, medians[method], marker + "--", ms=3.5, lw=1, color=color, label=method)
    ax.plot(ks, medians[SETTER], "o-", ms=3.5, color=get(SETTER).color, label=SETTER)
    _log_rae_axes(ax, ks)
    panel_title(ax, f"{run.dataset} · other methods at the same calls · N = {n}", width=60)


def _log_rae_axes(ax: Axes, ks: Sequence[int]) -> None:
    """Log RAE against integer K, half a step of room either side, major grid lines."""
    ax.set_yscale("log")
    ax.set(xlabel="horizon K", xlim=(min(ks) - 0.5, max(ks) + 0.5))
    ax.grid(True, which="major", alpha=0.3)
    integer_ticks(ax)


# ---- the other experiments: the quick-size report's figures (`seqq/reports/figures.py`) drawn
# on an experiment's panels, N added to the title; the paper's figures give no values to draw

def _rows(runs: Sequence[ModelRun]) -> pd.DataFrame:
    return pd.concat([r.rows for r in runs])


def _with_n(fig: Figure, runs: Sequence[ModelRun], what: str = "histories") -> Figure:
    """The figure with a last title line naming N per model."""
    suptitle(fig, fig.get_suptitle() + "\nN = " + ", ".join(f"{r.n:,} ({r.dataset})"
                                                             for r in runs) + f" {what}")
    return fig


def _only(figures: dict[str, Figure]) -> Figure:
    (fig,) = figures.values()
    return fig


Drawn = Callable[[Sequence[ModelRun]], dict[str, Figure]]


def _drawn(stem: str, draw: Callable[[pd.DataFrame], dict[str, Figure]]) -> Drawn:
    """An experiment's one figure: the report figure `draw` on its rows, N in the title."""
    return lambda runs: {stem: _with_n(_only(draw(_rows(runs))), runs)}


def _median_and_mean(stems: tuple[str, str],
                     draw: Callable[[pd.DataFrame, str], dict[str, Figure]]) -> Drawn:
    """Two figures of the same rows: `draw`'s median one and its mean one."""
    return lambda runs: {stem: _with_n(_only(draw(_rows(runs), stat)), runs)
                         for stem, stat in zip(stems, ("median", "mean"), strict=True)}


fig5 = _median_and_mean(("fig5", "fig6"), figures.rae_vs_k)  # Figs 5, 6: RAE vs K per S
fig10 = _median_and_mean(("fig10", "fig11"), figures.rae_vs_budget)  # Figs 10, 11: RAE vs S
fig12 = _drawn("fig12", figures.beam_sizes)  # beams kept per step, per α
fig13 = _drawn("fig13", figures.rae_vs_temperature)  # Figs 13, 4b: median RAE vs T, IQR bands
fig14 = _drawn("fig14", figures.unaccounted_vs_k)  # unaccounted probability vs K, 99% bands
fig15 = _drawn("fig15", figures.case_study)  # mean estimate vs share of A, 90% intervals


def fig4a(runs: Sequence[ModelRun]) -> dict[str, Figure]:
    """Fig. 4a: per-query RAE vs restricted entropy, IS and beam search, at Fig. 3's S."""
    rows = _rows(runs)
    rows = rows[(rows.budget_level == FIG3_LEVEL) & rows.method.isin(("importance", "beam"))]
    return {"fig4a": _with_n(_only(figures.rae_vs_entropy(rows)), runs)}


SCATTER = {10: "fig7", 100: "fig8", 1000: "fig9"}  # the paper's figure per budget level S


def fig7_9(runs: Sequence[ModelRun]) -> dict[str, Figure]:
    """Figs 7–9: estimate vs ground truth, one figure per model and budget level S."""
    out = {}
    for run in runs:
        for stem, fig in figures.scatter(run.rows).items():
            level = int(stem.rsplit("_S", 1)[1])
            out[f"{SCATTER.get(level, f'scatter_S{level}')}_{run.dataset}"] = _with_n(fig, [run])
    return out
