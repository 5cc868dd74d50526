"""Fig. 3: median RAE of p(τ(a) = K) vs K at equal model calls (the hybrid's with S = 100),
hybrid, importance sampling and beam search, from the `fig3` sweep; a second panel row with any
other method run at the same calls (`preset=fig3_frontier`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from seqq.reports.plotting import grid, integer_ticks, panel_title, suptitle
from seqq.reports.presentation import presentation
from seqq.reports.reproduction.claims import (
    SIGN_TEST,
    SLOPE_TEST,
    Check,
    one,
    table,
    tallied,
    verdict,
)
from seqq.reports.reproduction.figure import OTHER_STYLES
from seqq.reports.reproduction.markdown import fmt
from seqq.reports.reproduction.panels import PAPER_METHODS, PAPER_N, SETTER, ModelRun
from seqq.reports.reproduction.reproduce import Experiment
from seqq.reports.reproduction.significance import (
    CONTRADICTS,
    LEVEL,
    SUPPORTS,
    UNDECIDED,
    Cell,
    Tally,
    beats,
    bootstrap,
    median_slope,
    per_history,
    slope,
    where,
)
from seqq.reports.reproduction.stats import others_medians, summary
from seqq.reports.tables import to_markdown


def figure(runs: Sequence[ModelRun]) -> dict[str, Figure]:
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
            color = presentation(method).colour
            ax.plot(s.K, s[method], "o-", ms=3.5, color=color, label=method)
            ax.fill_between(s.K, s[f"{method}_low"], s[f"{method}_high"], color=color,
                            alpha=0.15, lw=0)
        estimated = s[s.floor > 0]
        if len(estimated):
            ax.plot(estimated.K, estimated.floor, ":", color="grey",
                    label="noise floor of the estimated truth")
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
                  f"(the hybrid's, S = {level})\nbands: {1 - LEVEL:.0%} intervals of the medians · "
                  "no paper values: its text gives none for Fig. 3")
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
    ax.plot(ks, medians[SETTER], "o-", ms=3.5, color=presentation(SETTER).colour, label=SETTER)
    _log_rae_axes(ax, ks)
    panel_title(ax, f"{run.dataset} · other methods at the same calls · N = {n}", width=60)


def _log_rae_axes(ax: Axes, ks: Sequence[int]) -> None:
    """Log RAE against integer K, half a step of room either side, major grid lines."""
    ax.set_yscale("log")
    ax.set(xlabel="horizon K", xlim=(min(ks) - 0.5, max(ks) + 0.5))
    ax.grid(True, which="major", alpha=0.3)
    integer_ticks(ax)


def caption(runs: Sequence[ModelRun]) -> str:
    (level,) = {s for r in runs for s in r.levels}
    return (f"*Median RAE of p(τ(a) = K) vs K at equal model calls (the hybrid's with "
            f"S = {level}), one panel per model: "
            + "; ".join(f"{r.dataset}, N = {r.n} histories of the protocol's {PAPER_N}"
                        + (" (sampled from the model: the raw MOOCs file is not here)"
                           if r.histories_from.startswith("sampled") else "")
                        for r in runs)
            + f". Bands: {1 - LEVEL:.0%} intervals of the medians. Dotted: the median RAE that the "
              "estimated ground truth's own noise alone gives"
            + f" (K ≥ {_first_estimated(runs)}). The paper's Fig. 3 is "
              "a plot; its text gives no values, so none are drawn.*")


def _first_estimated(runs: Sequence[ModelRun]) -> int | str:
    """The smallest K whose truths are not exact (where the truth's noise floor is drawn)."""
    ks = [int(k) for r in runs for k in r.rows.K[r.rows.truth_kind != "exact"]]
    return min(ks) if ks else "–"


def section(run: ModelRun, csv: str) -> list[str]:
    """N, the median RAE per method and K with its interval, and how the truth came out."""
    s = summary(run)
    return [f"N = {run.n} of {PAPER_N} histories done at every K = {s.K.min()}–{s.K.max()} by "
            f"all three methods ({len(run.rows):,} rows in {csv}). Median RAE [{1 - LEVEL:.0%} interval "
            "of the median]:", "", _fig3_table(s), "", _truth_line(run, s), ""]


def _fig3_table(s: pd.DataFrame) -> str:
    shown = pd.DataFrame({
        "K": s.K, "truth": s.truth, "N": s.N,
        **{m: [f"{fmt(v)} [{fmt(lo)}, {fmt(hi)}]" for v, lo, hi in
               zip(s[m], s[f"{m}_low"], s[f"{m}_high"], strict=True)] for m in PAPER_METHODS},
        "lowest": s[list(PAPER_METHODS)].idxmin(axis=1),
        f"beam / {SETTER}": [f"{b / h:.1f}×" if h > 0 else "–" for b, h in
                             zip(s.beam, s[SETTER], strict=True)],
        "truth rel. SE (median)": [f"{x:.2%}" if x > 0 else "– (exact)"
                                   for x in s.truth_rel_se],
        "noise floor": [f"{x:.2%}" if x > 0 else "0" for x in s.floor],
        "calls (mean)": [f"{c:.0f}" for c in s.calls],
    })
    return to_markdown(shown)


def _truth_line(run: ModelRun, s: pd.DataFrame) -> str:
    """How the ground truth came out: exact where, the estimates' samples and errors."""
    queries = run.rows[run.rows.method == SETTER]  # one row per query
    exact = queries[queries.truth_kind == "exact"]
    sur = queries[queries.truth_kind == "estimated"]
    parts = []
    if len(exact):
        parts.append(f"exact enumeration for {len(exact):,} queries (K = "
                     f"{', '.join(map(str, sorted(exact.K.unique())))})")
    if len(sur):
        rule = re.search(r"at most ([\d,]+) samples", str(sur.truth_rule.iloc[0]))
        high = int(rule.group(1).replace(",", "")) if rule else int(sur.truth_samples.max())
        early = int((sur.truth_samples < high).sum())
        parts.append(
            f"the App. F.3 estimate for {len(sur):,} (K = "
            f"{', '.join(map(str, sorted(sur.K.unique())))}): {early} of {len(sur):,} stopped "
            f"by the variance rule before S_high = {high:,} samples (samples: median "
            f"{int(sur.truth_samples.median()):,}, min {int(sur.truth_samples.min()):,}); "
            f"relative SE median {sur.truth_rel_stderr.median():.2%}, max "
            f"{sur.truth_rel_stderr.max():.2%}, so the truth's noise alone gives a perfect "
            f"estimator a median RAE of {s.floor[s.floor > 0].min():.2%}–{s.floor.max():.2%} "
            "per K (the noise floor)")
    return "Ground truth: " + "; ".join(parts) + "."


RIVAL_NAMES = {"importance": "importance sampling", "beam": "beam search"}


def checks(run: ModelRun) -> list[Check]:
    """Fig. 3's claims (§5 and its caption), each judged by its test on the panel's per-query
    RAE: the hybrid (the budget setter) against importance sampling and beam search per K, and
    the trends in K as fitted slopes of the log median RAE with their bootstrap intervals."""
    rows, s = run.rows, summary(run)
    ks = s.K.to_numpy(float)
    wide = {m: per_history(rows[rows.method == m], ["K"]).to_numpy() for m in PAPER_METHODS}
    out = []
    for rival in ("importance", "beam"):
        leads = beats(rows, ["K"], SETTER, [rival])
        tally = Tally.of(list(leads.values()))
        out.append(Check(
            f"the hybrid beats {RIVAL_NAMES[rival]} at every K",
            "\"systematically outperforms importance sampling … for all values of K\" (§5)"
            if rival == "importance" else "\"consistently outperforming all other methods\" "
            "(caption)",
            f"lower median RAE at {int((s[SETTER] < s[rival]).sum())} of {len(s)} K; "
            f"{tally.said('K')}: " + where(leads, ["K"], SUPPORTS)
            + (f" (the opposite: {where(leads, ['K'], CONTRADICTS)})" if tally.contradicts
               else ""),
            tallied(tally), SIGN_TEST))
    ratio = s.importance / s[SETTER]
    lead = bootstrap(lambda idx: slope(ks, np.log(
        np.median(wide["importance"][idx], 0) / np.median(wide[SETTER][idx], 0))),
        len(wide[SETTER]))
    trend, low, high = lead
    out.append(Check(
        "…especially for large K: the hybrid's lead grows with K",
        "\"the hybrid consistently outperforming all other methods, especially for large values "
        "of K\" (caption)",
        f"median RAE importance / hybrid {ratio.iloc[0]:.2f} (K = {int(ks[0])}) → "
        f"{ratio.iloc[-1]:.2f} (K = {int(ks[-1])}); slope of its log {trend:+.3f} per K "
        f"[{low:+.3f}, {high:+.3f}]", one(lead.cell()),
        SLOPE_TEST + " (above 0: the lead grows)"))
    grows = {m: median_slope(wide[m], ks) for m in PAPER_METHODS}
    tally = Tally.of([b.cell() for b in grows.values()])
    out.append(Check(
        "median RAE grows with K", "\"the error increases systematically as K increases\" (§5)",
        "slope of the log median RAE per K: " + ", ".join(
            f"{m} {b:+.3f} [{lo:+.3f}, {hi:+.3f}]" for m, (b, lo, hi) in grows.items()),
        tallied(tally), SLOPE_TEST + ", per method (above 0: grows)"))
    faster = bootstrap(lambda idx: slope(ks, np.log(
        np.median(wide["beam"][idx], 0) / np.median(wide[SETTER][idx], 0))), len(wide["beam"]))
    gap, low, high = faster
    out.append(Check(
        "beam search degrades faster than the hybrid",
        "\"the error rate increases more rapidly in a non-linear fashion\" (§5, \"for 3 of the "
        "4 datasets\")",
        f"beam / hybrid median RAE {s.beam.iloc[0] / s[SETTER].iloc[0]:.1f}× (K = "
        f"{int(ks[0])}) → {s.beam.iloc[-1] / s[SETTER].iloc[-1]:.1f}× (K = {int(ks[-1])}); "
        f"slope of its log {gap:+.3f} per K [{low:+.3f}, {high:+.3f}]", one(faster.cell()),
        SLOPE_TEST + " (above 0: beam falls behind)"))
    out.append(_non_linear(wide["beam"], ks))
    return out


def _non_linear(beam: np.ndarray, ks: np.ndarray) -> Check:
    """"…in a non-linear fashion": the quadratic term of a least-squares parabola through beam
    search's median RAE against K, with its bootstrap interval over the histories; non-linear
    where that interval excludes 0 (either sign: beam's RAE is at most 1, so its curve may
    bend down near 1 as well as up)."""
    centred = ks - ks.mean()  # the same quadratic term, a better conditioned fit
    curve = bootstrap(lambda idx: float(np.polyfit(centred, np.median(beam[idx], 0), 2)[0]),
                      len(beam))
    found = curve.cell()
    bent = "up" if curve.value > 0 else "down"
    return Check(
        "beam search's error grows non-linearly in K",
        "\"the error rate increases more rapidly in a non-linear fashion\" (§5)",
        f"quadratic term of beam's median RAE per K² {curve.value:+.4f} [{curve.low:+.4f}, "
        f"{curve.high:+.4f}] (bends {bent})",
        one(Cell(SUPPORTS if found.way else UNDECIDED, found.p)),
        f"least-squares parabola of the median RAE against K, its quadratic term's "
        f"{1 - LEVEL:.0%} bootstrap interval over the histories excludes 0 (either sign)")


EXPERIMENT = Experiment(
    name="fig3", title="Fig. 3", sweep="fig3", query="hitting_time", methods=PAPER_METHODS,
    levels=(100,),  # the hybrid's calls with S = 100 tail samples
    block="reproduction",  # docs/reproduction.md's block, named before there were others
    figure=figure, caption=caption, section=section, claims=table(checks, "Fig. 3"),
    verdict=verdict(checks))
