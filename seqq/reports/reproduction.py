"""The paper's Fig. 3 beside seqq's, from a sweep's results alone (issue 33):
`seqq report <results> --reproduction docs/reproduction --doc docs/reproduction.md`
(`make reproduction`).

For every (dataset, model) in the results, at one budget level S (default 100, Fig. 3's):

- `fig3_<dataset>_<model>.csv`: one row per (history, K, method) of the paper's three methods,
  only the histories done at every K by every method, so medians taken from the CSV are the
  figure's and the table's. Columns: `CSV_COLUMNS`. Small enough for git (about 2 MB at N = 1000).
- `fig3_<models>.png` / `.pdf`: median RAE vs K per method, one panel per model, with a 95%
  interval of each median and the median RAE that the surrogate ground truth's own noise gives a
  perfect estimator (`noise_floor`). The paper's Fig. 3 is a plot whose values its text does not
  give, so no paper values are drawn.
- with `--doc`, the Markdown between `BEGIN`/`END` in that file is rewritten: per model, N,
  the table of median RAE per method and K, and the paper's Fig. 3 claims checked on it.

Rows of any other method at the same S (e.g. the frontier methods of `experiment=fig3_frontier`,
run into the same sweep folder) get a second table: each method's median RAE beside the paper's
three, and the best of them. Only repeat 0 and temperature T = 1 of hitting-time queries are used.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from seqq.errors import ResultsError
from seqq.reports.plotting import grid, integer_ticks, panel_title, plt, suptitle
from seqq.reports.tables import load_results, noise_floor, to_markdown

PAPER_METHODS = ("hybrid", "importance", "beam")
COLORS = {"hybrid": "C0", "importance": "C1", "beam": "C2"}
FRONTIER_STYLES = [("s", "C3"), ("^", "C4"), ("v", "C5"), ("D", "C6"), ("P", "C7"), ("X", "C8"),
                   ("<", "C9"), (">", "black"), ("h", "darkgoldenrod"), ("*", "teal")]
PAPER_N = 1000  # histories per dataset in the paper's protocol (§5, App. G)
LEVEL = 100  # Fig. 3's budget: the hybrid's calls with S = 100 tail samples
# The CSV's columns: results column -> CSV name
CSV_COLUMNS = {
    "history_id": "history_id", "K": "K", "method": "method", "budget_level": "S",
    "budget_calls": "budget_calls", "model_calls": "model_calls", "estimate": "estimate",
    "truth": "truth", "truth_kind": "truth_kind", "truth_rel_stderr": "truth_rel_stderr",
    "rae": "rae",
}
BEGIN = "<!-- BEGIN reproduction (written by `make reproduction`; edits here are overwritten) -->"
END = "<!-- END reproduction -->"
Z95 = 1.959964


@dataclass(frozen=True)
class ModelRun:
    """One panel of the reproduction: one dataset's model, its complete histories' rows."""

    dataset: str
    model: str  # the results' `model` column
    slug: str  # `<dataset>_<model name>` in file names
    histories_from: str  # test, or "sampled from <model>"
    rows: pd.DataFrame  # paper methods, complete histories only
    others: pd.DataFrame  # other methods at the same S, same histories

    @property
    def n(self) -> int:
        return int(self.rows.history_id.nunique())

    @property
    def lines(self) -> tuple[str, str]:
        """The panel's name and N; where its histories come from."""
        name = "authors' LSTM" if self.model.startswith("authors") else self.model
        where = ("test-split histories" if self.histories_from == "test" else
                 "histories sampled from the model (raw MOOCs file absent)"
                 if self.dataset == "moocs" else f"histories {self.histories_from}")
        return f"{self.dataset} · {name} · N = {self.n}", where

    @property
    def title(self) -> str:
        return " · ".join(self.lines)


def model_slug(model: str) -> str:
    """`authors_lstm` -> `authors`, `lstm@1a2b3c4d` -> `lstm`: the model part of file names."""
    name = model.split("@")[0]
    name = name.removesuffix("_lstm") if name != "lstm" else name
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name)


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


def select(results: pd.DataFrame, level: int, models: Sequence[str] = ()) -> list[ModelRun]:
    """The reproduction's panels: per (dataset, model), the paper's three methods at budget
    level `level`, on histories that every method finished at every K."""
    rows = results[(results.temperature == 1.0) & (results["query"] == "hitting_time")
                   & (results["repeat"] == 0)]
    if models:
        rows = rows[rows.model.map(lambda m: any(m == x or m.split("@")[0] == x
                                                  for x in models))]
    if rows.empty:
        raise ResultsError("no hitting-time results at T = 1" +
                           (f" for models {', '.join(models)}" if models else ""))
    levels = sorted(rows.budget_level.unique())
    if level not in levels:
        raise ResultsError(f"no results at budget level S = {level}; the results hold S = "
                           f"{', '.join(map(str, levels))} (pick one with --level)")
    rows = rows[rows.budget_level == level]
    runs = []
    for (dataset, model), block in rows.groupby(["dataset", "model"], sort=True):
        paper = block[block.method.isin(PAPER_METHODS)]
        if paper.empty:
            continue
        ks = sorted(paper.K.unique())
        complete = complete_histories(paper, len(PAPER_METHODS), ks)
        paper = paper[paper.history_id.isin(complete)]
        others = block[~block.method.isin(PAPER_METHODS) & block.history_id.isin(complete)]
        runs.append(ModelRun(dataset, model, f"{dataset}_{model_slug(model)}",
                             str(paper.histories.iloc[0]) if len(paper) else "",
                             paper.sort_values(["history_id", "K", "method"]), others))
    if not runs:
        raise ResultsError(f"no {', '.join(PAPER_METHODS)} results at S = {level}")
    return runs


def complete_histories(rows: pd.DataFrame, methods: int, ks: Sequence[int]) -> pd.Index:
    """The histories that `methods` methods have run at every K of `ks`."""
    cells = rows.drop_duplicates(["history_id", "method", "K"]).groupby("history_id").size()
    return cells.index[cells == methods * len(ks)]


def to_csv(run: ModelRun, folder: Path) -> Path:
    """The run's rows as `fig3_<dataset>_<model>.csv`, numbers to 6 significant digits."""
    table = run.rows[list(CSV_COLUMNS)].rename(columns=CSV_COLUMNS)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fig3_{run.slug}.csv"
    table.to_csv(path, index=False, float_format="%.6g")
    return path


def summary(run: ModelRun) -> pd.DataFrame:
    """Per K: the truth used, queries, each paper method's median RAE with its 95% interval,
    the surrogate's noise floor and the mean budget in model calls."""
    out = []
    for K, block in run.rows.groupby("K", sort=True):
        kinds = block.drop_duplicates("history_id").truth_kind.value_counts()
        row: dict = {"K": int(K), "truth": "/".join(kinds.index), "N": block.history_id.nunique()}
        for method in PAPER_METHODS:
            rae = block.loc[block.method == method, "rae"].dropna().to_numpy()
            row[method] = float(np.median(rae)) if len(rae) else math.nan
            row[f"{method}_low"], row[f"{method}_high"] = median_ci(rae)
        hybrid = block[block.method == "hybrid"]
        row["floor"] = noise_floor(hybrid.truth_rel_stderr.where(hybrid.truth_kind ==
                                                                 "surrogate", 0.0))
        row["truth_rel_se"] = float(hybrid.truth_rel_stderr[hybrid.truth_kind ==
                                                            "surrogate"].median()) \
            if (hybrid.truth_kind == "surrogate").any() else 0.0
        row["calls"] = float(hybrid.model_calls.mean())
        out.append(row)
    return pd.DataFrame(out)


def figure(runs: Sequence[ModelRun], level: int) -> Figure:
    """Median RAE vs K, one panel per model (bands: 95% intervals of the medians); where other
    methods ran at the same calls, a second row with them and the hybrid on their histories."""
    stats = [summary(r) for r in runs]
    frontier = any(not r.others.empty for r in runs)
    fig, axes = grid(2 if frontier else 1, len(runs), size=(max(4.8, 8.0 / len(runs)), 3.8),
                     sharey=True)
    if frontier:
        for ax, run, s in zip(axes[1], runs, stats, strict=True):
            _frontier_panel(ax, run, s)
    for ax, run, s in zip(axes[0], runs, stats, strict=True):
        for method in PAPER_METHODS:
            ax.plot(s.K, s[method], "o-", ms=3.5, color=COLORS[method], label=method)
            ax.fill_between(s.K, s[f"{method}_low"], s[f"{method}_high"],
                            color=COLORS[method], alpha=0.15, lw=0)
        surrogate = s[s.floor > 0]
        if len(surrogate):
            ax.plot(surrogate.K, surrogate.floor, ":", color="grey",
                    label="noise floor of the surrogate truth")
        exact = s[s.truth == "exact"].K
        if len(exact):
            ax.axvspan(exact.min() - 0.5, exact.max() + 0.5, color="grey", alpha=0.1, lw=0,
                       label=f"exact truth (K ≤ {exact.max()})")
        ax.set_yscale("log")
        ax.set(xlabel="horizon K", xlim=(s.K.min() - 0.5, s.K.max() + 0.5))
        ax.grid(True, which="major", alpha=0.3)
        integer_ticks(ax)
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
    return fig


def _frontier_panel(ax, run: ModelRun, s: pd.DataFrame) -> None:
    """The other methods at the same calls, and the hybrid, on the histories all of them ran."""
    ks = s.K.to_list()
    if run.others.empty:
        ax.set_axis_off()
        return
    medians, n = _others_medians(run, ks)
    for i, method in enumerate(c for c in medians.columns if c != "hybrid"):
        marker, color = FRONTIER_STYLES[i % len(FRONTIER_STYLES)]
        ax.plot(ks, medians[method], marker + "--", ms=3.5, lw=1, color=color, label=method)
    ax.plot(ks, medians["hybrid"], "o-", ms=3.5, color=COLORS["hybrid"], label="hybrid")
    ax.set_yscale("log")
    ax.set(xlabel="horizon K", xlim=(min(ks) - 0.5, max(ks) + 0.5))
    ax.grid(True, which="major", alpha=0.3)
    integer_ticks(ax)
    panel_title(ax, f"{run.dataset} · other methods at the same calls · N = {n}", width=60)


def _fmt(x: float) -> str:
    if not np.isfinite(x):
        return "–"
    return f"{x:.3f}" if x >= 0.01 else f"{x:.4f}"


def _claims(s: pd.DataFrame) -> str:
    """The paper's Fig. 3 claims beside what this run's medians say, as a Markdown table."""
    best = s[list(PAPER_METHODS)].idxmin(axis=1)
    not_best = [f"K = {k} ({m})" for k, m in zip(s.K, best, strict=True) if m != "hybrid"]
    ratio_is = (s.importance / s.hybrid).replace([np.inf], np.nan)
    ratio_beam = (s.beam / s.hybrid).replace([np.inf], np.nan)
    first, last, mid = s.iloc[0], s.iloc[-1], s.iloc[len(s) // 2]
    half = s[s.beam > 0.5].K
    apart = s[(s.hybrid_high < s.importance_low) | (s.importance_high < s.hybrid_low)].K
    exact = s[s.truth == "exact"]
    rows = [
        ("the hybrid has the lowest median RAE", "at every K, on all 4 datasets",
         f"at {int((best == 'hybrid').sum())} of {len(s)} K"
         + (f"; not at {', '.join(not_best)}" if not_best else "")),
        ("the hybrid beats importance sampling", "at every K, on all 4 datasets",
         f"at {int((s.hybrid < s.importance).sum())} of {len(s)} K; the two medians' 95% "
         "intervals are apart at " + (f"K = {', '.join(map(str, apart))}" if len(apart)
                                      else "no K")),
        ("median RAE grows with K", "on all 4 datasets",
         f"K = {int(first.K)} → {int(last.K)}: "
         + ", ".join(f"{m} {_fmt(first[m])} → {_fmt(last[m])}" for m in PAPER_METHODS)),
        ("beam search degrades faster, non-linearly in K", "on 3 of the 4 datasets",
         f"beam {_fmt(first.beam)} (K = {int(first.K)}), {_fmt(mid.beam)} (K = {int(mid.K)}), "
         f"{_fmt(last.beam)} (K = {int(last.K)})"
         + (f"; above 0.5 from K = {int(half.min())}" if len(half) else "")
         + " (a lower bound: its RAE is at most 1, so the curve flattens near 1)"),
        ("gap importance / hybrid", "not stated (Fig. 3 is a plot)",
         f"ratio of medians {ratio_is.min():.2f}–{ratio_is.max():.2f} over K "
         f"(median {ratio_is.median():.2f})"),
        ("gap beam / hybrid", "not stated (Fig. 3 is a plot)",
         f"{ratio_beam.iloc[0]:.1f}× at K = {int(first.K)}, {ratio_beam.iloc[-1]:.1f}× at "
         f"K = {int(last.K)}"),
    ]
    if len(exact):
        rows.append(("the hybrid's median RAE where the truth is exact", "not stated",
                     ", ".join(f"{_fmt(h)} (K = {int(k)})"
                               for k, h in zip(exact.K, exact.hybrid, strict=True))))
    return to_markdown(pd.DataFrame(rows, columns=["Fig. 3 claim", "the paper (§5, caption)",
                                                   "seqq, these N histories"]))


def _truth_line(run: ModelRun, s: pd.DataFrame) -> str:
    """How the ground truth came out: exact where, the surrogates' samples and errors."""
    queries = run.rows[run.rows.method == "hybrid"]
    exact = queries[queries.truth_kind == "exact"]
    sur = queries[queries.truth_kind == "surrogate"]
    parts = []
    if len(exact):
        parts.append(f"exact enumeration for {len(exact):,} queries (K = "
                     f"{', '.join(map(str, sorted(exact.K.unique())))})")
    if len(sur):
        rule = re.search(r"at most ([\d,]+) samples", str(sur.truth_rule.iloc[0]))
        high = int(rule.group(1).replace(",", "")) if rule else int(sur.truth_samples.max())
        early = int((sur.truth_samples < high).sum())
        parts.append(
            f"the App. F.3 surrogate for {len(sur):,} (K = "
            f"{', '.join(map(str, sorted(sur.K.unique())))}): {early} of {len(sur):,} stopped "
            f"by the variance rule before S_high = {high:,} samples (samples: median "
            f"{int(sur.truth_samples.median()):,}, min {int(sur.truth_samples.min()):,}); "
            f"relative SE median {sur.truth_rel_stderr.median():.2%}, max "
            f"{sur.truth_rel_stderr.max():.2%}, so the truth's noise alone gives a perfect "
            f"estimator a median RAE of {s.floor[s.floor > 0].min():.2%}–{s.floor.max():.2%} "
            "per K (the noise floor)")
    return "Ground truth: " + "; ".join(parts) + "."


def _table(s: pd.DataFrame) -> str:
    shown = pd.DataFrame({
        "K": s.K, "truth": s.truth, "N": s.N,
        **{m: [f"{_fmt(v)} [{_fmt(lo)}, {_fmt(hi)}]" for v, lo, hi in
               zip(s[m], s[f"{m}_low"], s[f"{m}_high"], strict=True)] for m in PAPER_METHODS},
        "lowest": s[list(PAPER_METHODS)].idxmin(axis=1),
        "beam / hybrid": [f"{b / h:.1f}×" if h > 0 else "–" for b, h in
                          zip(s.beam, s.hybrid, strict=True)],
        "truth rel. SE (median)": [f"{x:.2%}" if x > 0 else "– (exact)"
                                   for x in s.truth_rel_se],
        "noise floor": [f"{x:.2%}" if x > 0 else "0" for x in s.floor],
        "calls (mean)": [f"{c:.0f}" for c in s.calls],
    })
    return to_markdown(shown)


def _others_medians(run: ModelRun, ks: Sequence[int]) -> tuple[pd.DataFrame, int]:
    """Median RAE per K (rows) of each non-paper method and of the hybrid (columns), all on the
    histories every non-paper method has run at every K (a frontier sweep may trail the
    paper's), and that number of histories."""
    common = complete_histories(run.others, run.others.method.nunique(), ks)
    others = run.others[run.others.history_id.isin(common)]
    hybrid = run.rows[(run.rows.method == "hybrid") & run.rows.history_id.isin(common)]
    medians = others.groupby(["K", "method"]).rae.median().unstack("method").reindex(ks)
    medians["hybrid"] = hybrid.groupby("K").rae.median().reindex(ks)
    return medians, len(common)


def _others_table(run: ModelRun, s: pd.DataFrame) -> tuple[str, int]:
    """Median RAE per K of each non-paper method, the best of them and its ratio to the hybrid
    on the same histories (`_others_medians`); returns the table and that number of histories."""
    ks = s.K.to_list()
    medians, n = _others_medians(run, ks)
    hybrid = medians.pop("hybrid")
    best = medians.min(axis=1)
    shown = pd.DataFrame({"K": ks})
    for method in medians.columns:
        shown[method] = [_fmt(x) for x in medians[method]]
    shown["best of these"] = medians.idxmin(axis=1).fillna("–").to_numpy()
    shown["hybrid"] = [_fmt(x) for x in hybrid]
    shown["hybrid / best"] = [f"{h / b:.2f}×" if b > 0 else "–"
                              for h, b in zip(hybrid, best, strict=True)]
    return to_markdown(shown), n


def doc_block(runs: Sequence[ModelRun], level: int, figure_name: str,
              csvs: Sequence[str], folder: str = "reproduction") -> str:
    """The generated part of docs/reproduction.md; `folder`: where the figure and CSVs are,
    relative to the document."""
    lines = [BEGIN, "",
             f"Generated from {sum(len(r.rows) for r in runs):,} result rows "
             f"(budget level S = {level}); the figure and CSVs below were written by the same "
             "command.", "",
             f"![Fig. 3 reproduction]({folder}/{figure_name}.png)", "",
             f"*Median RAE of p(τ(a) = K) vs K at equal model calls (the hybrid's with "
             f"S = {level}), one panel per model: "
             + "; ".join(f"{r.dataset}, N = {r.n} histories of the protocol's {PAPER_N}"
                         + (" (sampled from the model: the raw MOOCs file is not here)"
                            if r.histories_from.startswith("sampled") else "")
                         for r in runs)
             + ". Bands: 95% intervals of the medians. Dotted: the median RAE that the "
               "surrogate ground truth's own noise alone gives (K > 4). The paper's Fig. 3 is "
               "a plot; its text gives no values, so none are drawn.*", ""]
    for run in runs:
        s = summary(run)
        csv = next((c for c in csvs if run.slug in c), "")
        lines += [f"### {run.title}", "",
                  f"N = {run.n} of {PAPER_N} histories done at every K = {s.K.min()}–"
                  f"{s.K.max()} by all three methods ({len(run.rows):,} rows in "
                  f"[`{csv}`]({folder}/{csv})). Median RAE [95% interval of the median]:",
                  "", _table(s), "", _truth_line(run, s), "",
                  "The paper's Fig. 3 claims beside seqq's medians:", "", _claims(s), ""]
        if not run.others.empty:
            table, n = _others_table(run, s)
            lines += [f"**Other methods at the same calls** (the frontier panel): median RAE on "
                      f"the N = {n} histories that every one of them has run at every K, the "
                      "hybrid's on the same histories:", "", table, ""]
    lines.append(END)
    return "\n".join(lines)


def update_doc(path: Path, block: str) -> None:
    """Replace the text between BEGIN and END (markers included) in `path` with `block`."""
    text = path.read_text()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ResultsError(f"{path} lacks the markers {BEGIN!r} … {END!r}; add them where "
                           "the generated tables go")
    path.write_text(text[:start] + block + text[end + len(END):])


def export(paths: Sequence[str | Path], out: str | Path, doc: str | Path | None = None,
           level: int = LEVEL, models: Sequence[str] = (),
           datasets: Sequence[str] = ()) -> list[Path]:
    """Write the CSVs and the figure into `out` (and the marked block of `doc`); return the
    files written."""
    out = Path(out)
    runs = select(load_results(paths, datasets), level, models)
    written = [to_csv(run, out) for run in runs]
    names = sorted({model_slug(r.model) for r in runs})
    stem = f"fig3_{'_'.join(names)}"
    fig = figure(runs, level)
    for suffix, metadata in ((".png", {}), (".pdf", {"CreationDate": None})):
        # no creation date: a rerun on the same results rewrites the same bytes (git stays quiet)
        fig.savefig(out / f"{stem}{suffix}", dpi=120, metadata=metadata)
        written.append(out / f"{stem}{suffix}")
    plt.close(fig)
    if doc is not None:
        folder = Path(os.path.relpath(out.resolve(), Path(doc).resolve().parent)).as_posix()
        update_doc(Path(doc), doc_block(runs, level, stem, [p.name for p in written], folder))
        written.append(Path(doc))
    return written
