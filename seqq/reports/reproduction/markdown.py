"""The generated blocks of a reproduction's doc (docs/reproduction.md): per experiment its
figures, caption, then per panel its tables and the paper's claims checked on them, between
`BEGIN`/`END` markers that `update_doc` rewrites; and the summary table at the top, one row per
experiment (`update_summary`). The text around the blocks is written by hand."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from seqq.errors import ResultsError
from seqq.reports.reproduction.panels import PAPER_METHODS, PAPER_N, SETTER, ModelRun
from seqq.reports.reproduction.stats import (
    FIG3_LEVEL,
    alpha_of,
    beam_growth,
    decade_ratios,
    entropy_fits,
    iqr,
    log_ratios,
    loglog_slope,
    methods_in,
    others_medians,
    pivot,
    share_means,
    spread_ks,
    summary,
)
from seqq.reports.tables import to_markdown, unaccounted_summary


def begin(block: str) -> str:
    return (f"<!-- BEGIN {block} (written by `make reproduction`; edits here are "
            "overwritten) -->")


def end(block: str) -> str:
    return f"<!-- END {block} -->"


def fmt(x: float) -> str:
    """A median RAE: 3 decimals, 4 below 0.01, a dash for none."""
    if not np.isfinite(x):
        return "–"
    return f"{x:.3f}" if x >= 0.01 else f"{x:.4f}"


def update_doc(path: Path, block: str, text: str) -> None:
    """Replace the marked block `block` (markers included) in `path` with `text`."""
    doc = path.read_text()
    start, stop = find_block(path, block, doc)
    path.write_text(doc[:start] + text + doc[stop + len(end(block)):])


def find_block(path: Path, block: str, doc: str | None = None) -> tuple[int, int]:
    """Where `block`'s BEGIN and END markers are in the doc at `path`; a doc without them is an
    error that says where to add them."""
    doc = path.read_text() if doc is None else doc
    first, last = begin(block), end(block)
    start, stop = doc.find(first), doc.find(last)
    if start < 0 or stop < start:
        raise ResultsError(f"{path} lacks the markers {first!r} … {last!r}; add them where "
                           "the generated tables go")
    return start, stop


def others_section(run: ModelRun) -> list[str]:
    """Median RAE per K of each non-paper method at the same calls, the best of them and the
    budget setter's ratio to it, on the histories all of them ran (`others_medians`)."""
    ks = sorted(int(k) for k in run.rows.K.unique())
    medians, n = others_medians(run, ks)
    setter = medians.pop(SETTER)
    best = medians.min(axis=1)
    shown = pd.DataFrame({"K": ks})
    for method in medians.columns:
        shown[method] = [fmt(x) for x in medians[method]]
    shown["best of these"] = medians.idxmin(axis=1).fillna("–").to_numpy()
    shown[SETTER] = [fmt(x) for x in setter]
    shown[f"{SETTER} / best"] = [f"{h / b:.2f}×" if b > 0 else "–"
                                 for h, b in zip(setter, best, strict=True)]
    return [f"**Other methods at the same calls** (the frontier panel): median RAE on the "
            f"N = {n} histories that every one of them has run at every K, the {SETTER}'s on "
            "the same histories:", "", to_markdown(shown), ""]


def fig3_caption(runs: Sequence[ModelRun]) -> str:
    (level,) = {s for r in runs for s in r.levels}
    return (f"*Median RAE of p(τ(a) = K) vs K at equal model calls (the hybrid's with "
            f"S = {level}), one panel per model: "
            + "; ".join(f"{r.dataset}, N = {r.n} histories of the protocol's {PAPER_N}"
                        + (" (sampled from the model: the raw MOOCs file is not here)"
                           if r.histories_from.startswith("sampled") else "")
                        for r in runs)
            + ". Bands: 95% intervals of the medians. Dotted: the median RAE that the "
              "surrogate ground truth's own noise alone gives (K > 4). The paper's Fig. 3 is "
              "a plot; its text gives no values, so none are drawn.*")


def fig3_section(run: ModelRun, csv: str) -> list[str]:
    """N, the median RAE per method and K with its interval, and how the truth came out."""
    s = summary(run)
    return [f"N = {run.n} of {PAPER_N} histories done at every K = {s.K.min()}–{s.K.max()} by "
            f"all three methods ({len(run.rows):,} rows in {csv}). Median RAE [95% interval "
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
    """How the ground truth came out: exact where, the surrogates' samples and errors."""
    queries = run.rows[run.rows.method == SETTER]  # one row per query
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


# ---- the summary table at the top of the doc: one row per experiment, rewritten by its export

SUMMARY_BLOCK = "summary"
SUMMARY_HEADER = ("experiment", "models", "size run", "verdict")


def summary_row(title: str, runs: Sequence[ModelRun], verdict: str) -> tuple[str, ...]:
    """An experiment's row of the summary table: its models, what ran (N per model, the grid
    of K, S and T) and its verdict."""
    models = "; ".join(f"{r.dataset} ({_model_name(r.model)})" for r in runs)
    rows = pd.concat([r.rows for r in runs])
    ks = sorted(int(k) for k in rows.K.unique())
    grid = [f"K = {_span(ks)}"]
    levels = sorted(int(s) for s in rows.budget_level.unique())
    if levels != [0]:
        grid.append(f"S = {_span(levels, ranges=False)}")
    temperatures = sorted(rows.temperature.unique())
    if temperatures != [1.0]:
        grid.append(f"T = {', '.join(f'{t:g}' for t in temperatures)}")
    alphas = sorted({json.loads(o).get("alpha") for o in rows.options} - {None}, reverse=True)
    if alphas:
        grid.append(f"α = {', '.join(map(str, alphas))}")
    size = ("N = " + ", ".join(f"{r.n:,} ({r.dataset})" for r in runs) + "; " + "; ".join(grid))
    return title, models, size, verdict


def _model_name(model: str) -> str:
    return "authors' LSTM" if model.startswith("authors") else model


def _span(values: Sequence[int], ranges: bool = True) -> str:
    """3–11 for a run of consecutive integers, else the list (at most 6 shown)."""
    if ranges and len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}–{values[-1]}"
    shown = [f"{v:,}" if v >= 10_000 else str(v) for v in values]
    return ", ".join(shown) if len(shown) <= 6 else f"{', '.join(shown[:3])}, …, {shown[-1]}"


def update_summary(path: Path, row: Sequence[str],
                   defaults: Mapping[str, Sequence[str]]) -> None:
    """Rewrite the doc's summary block: `row` replaces its experiment's row (by title, the
    first cell); every other row keeps what the doc has, or its default while it has none, in
    the order of `defaults` (titles it lacks go last)."""
    doc = path.read_text()
    start, stop = find_block(path, SUMMARY_BLOCK, doc)
    current = {}
    for line in doc[start:stop].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and len(cells) == len(SUMMARY_HEADER) and cells[0] not in (
                SUMMARY_HEADER[0], "---"):
            current[cells[0]] = cells
    rows = {**{t: list(d) for t, d in defaults.items()}, **current, row[0]: list(row)}
    table = to_markdown(pd.DataFrame(list(rows.values()), columns=list(SUMMARY_HEADER)))
    update_doc(path, SUMMARY_BLOCK, "\n".join([begin(SUMMARY_BLOCK), "", table, "",
                                               end(SUMMARY_BLOCK)]))


# ---- captions and sections of the experiments beyond Fig. 3

def _histories(runs: Sequence[ModelRun], of: int | None = PAPER_N) -> str:
    """Per model its N, and where its histories come from when not the test split."""
    return "; ".join(f"{r.dataset}, N = {r.n:,}" + (f" of the protocol's {of:,}" if of else "")
                     + (" (histories sampled from the model: the raw MOOCs file is not here)"
                        if r.histories_from.startswith("sampled") else "")
                     for r in runs)


def _values(run: ModelRun, column: str) -> list:
    return sorted(run.rows[column].unique())


def _links_line(run: ModelRun, csv: str, what: str) -> str:
    return f"N = {run.n:,} histories {what} ({len(run.rows):,} rows in {csv})."


def fig5_caption(runs: Sequence[ModelRun]) -> str:
    levels = sorted({s for r in runs for s in r.levels})
    return (f"*Fig. 5 (median) and Fig. 6 (mean) RAE of p(τ(a) = K) vs K at equal model calls "
            f"(the hybrid's with S = {', '.join(map(str, levels))}; one row of panels per S), "
            f"one column per model: {_histories(runs)}. The paper's figures are plots; its "
            "text gives no values, so none are drawn.*")


def fig5_section(run: ModelRun, csv: str) -> list[str]:
    ks, levels = _values(run, "K"), run.levels
    methods = methods_in(run.rows)
    lines = [_links_line(run, csv, f"done at every K = {ks[0]}–{ks[-1]} and S = "
                                   f"{', '.join(map(str, levels))} by all three methods"), ""]
    calls = run.rows[run.rows.method == SETTER].groupby("budget_level").model_calls.mean()
    for name, stat in (("Median RAE (Fig. 5)", "median"), ("Mean RAE (Fig. 6)", "mean")):
        table = pivot(run.rows, ["K", "budget_level"], stat)
        shown = pd.DataFrame({"K": ks})
        for s in levels:
            shown[f"S = {s}"] = [" / ".join(fmt(table.loc[(k, s), m]) for m in methods)
                                 for k in ks]
        lines += [f"{name}, {' / '.join(methods)}:", "", to_markdown(shown), ""]
    lines += ["Mean model calls per query (the hybrid's, every method's budget): "
              + ", ".join(f"{calls[s]:,.0f} at S = {s}" for s in levels) + ".", ""]
    return lines


def fig4a_caption(runs: Sequence[ModelRun]) -> str:
    return ("*Fig. 4a: per-query RAE of importance sampling and beam search against the "
            "restricted entropy H(q) of the ground truth, with least-squares lines, at Fig. 3's "
            f"protocol (S = {FIG3_LEVEL}), one panel per model: {_histories(runs)}. The paper "
            "draws this for its datasets; its text gives no values.*")


def fig4a_section(run: ModelRun, csv: str) -> list[str]:
    rows = run.rows[run.rows.budget_level == FIG3_LEVEL]
    fits = entropy_fits(rows)
    h = rows.drop_duplicates(["history_id", "K"]).entropy
    shown = pd.DataFrame({
        "method": fits.method, "queries": fits.queries,
        "Pearson r": [f"{x:.2f}" for x in fits.r], "Spearman ρ": [f"{x:.2f}" for x in fits.rho],
        "fit: RAE per nat": [f"{x:+.3f}" for x in fits.slope],
        "intercept": [f"{x:+.3f}" for x in fits.intercept],
        "median RAE, lowest third of H(q)": [fmt(x) for x in fits.low],
        "highest third": [fmt(x) for x in fits.high]})
    csv = ", ".join(link for link in csv.split(", ") if f"_S{FIG3_LEVEL}.csv" in link) or csv
    return [f"N = {run.n:,} histories, the S = {FIG3_LEVEL} rows of {csv} (Fig. 3's protocol; "
            f"{len(rows):,} rows). H(q) in nats: median {h.median():.2f}, 10–90% "
            f"{h.quantile(0.1):.2f}–{h.quantile(0.9):.2f}. Per-query RAE against H(q):", "",
            to_markdown(shown), ""]


def fig7_9_caption(runs: Sequence[ModelRun]) -> str:
    levels = sorted({s for r in runs for s in r.levels})
    return (f"*Figs 7, 8, 9: estimate vs ground truth at S = {', '.join(map(str, levels))} "
            "(one figure each), columns K = 3, 5, 7, 9, 11, rows the methods, the truths' "
            f"histogram underneath; {_histories(runs)}. Zero estimates sit on the dotted floor "
            "line.*")


def fig7_9_section(run: ModelRun, csv: str) -> list[str]:
    ks = spread_ks(run)
    rows = run.rows[run.rows.K.isin(ks)]
    out = []
    for s in run.levels:
        for method in methods_in(rows):
            cells = []
            for k in ks:
                cell = rows[(rows.budget_level == s) & (rows.method == method)
                            & (rows["K"] == k)]
                cells.append(f"{iqr(log_ratios(cell)):.2f} · "
                             f"{(cell.estimate < cell.truth).mean():.0%} · "
                             f"{(cell.estimate <= 0).mean():.0%}")
            out.append([s, method, *cells])
    shown = pd.DataFrame(out, columns=["S", "method", *[f"K = {k}" for k in ks]])
    return [f"N = {run.n:,} histories: the rows of {csv} at K = "
            f"{', '.join(map(str, ks))}. Per S, method and K: the spread of the estimates "
            "around the truth (interquartile range of log10 p̂/p over the nonzero estimates) · "
            "the share under the truth · the share p̂ = 0:", "", to_markdown(shown), ""]


def fig10_caption(runs: Sequence[ModelRun]) -> str:
    return ("*Fig. 10 (median) and Fig. 11 (mean) RAE of p(τ(a) = K) vs the budget level S "
            "(the hybrid's tail samples; every method gets the hybrid's model calls), one row "
            f"of panels per K, one column per model: {_histories(runs)}.*")


def fig10_section(run: ModelRun, csv: str) -> list[str]:
    ks, levels = _values(run, "K"), run.levels
    methods = methods_in(run.rows)
    median = pivot(run.rows, ["K", "budget_level"])
    mean = pivot(run.rows, ["K", "budget_level"], "mean")
    calls = run.rows[run.rows.method == SETTER].groupby(["K", "budget_level"]).model_calls.mean()
    lines = [_links_line(run, csv, f"done at every K = {', '.join(map(str, ks))} and every S = "
                                   f"{levels[0]}…{levels[-1]:,} by all {len(methods)} methods"),
             "", "Median RAE (Fig. 10) (mean RAE, Fig. 11) per budget level S, with the mean "
             "model calls per query:", ""]
    for k in ks:
        shown = pd.DataFrame({"S": levels, "calls": [f"{calls[(k, s)]:,.0f}" for s in levels]})
        for m in methods:
            shown[m] = [f"{fmt(median.loc[(k, s), m])} ({fmt(mean.loc[(k, s), m])})"
                        for s in levels]
        lines += [f"K = {k}:", "", to_markdown(shown), ""]
    ratio = pd.DataFrame({"method": methods})
    for k in ks:
        cells = []
        for m in methods:
            per = decade_ratios(median.loc[k][m])
            slope_s = loglog_slope(levels, median.loc[k][m].reindex(levels))
            slope_c = loglog_slope([calls[(k, s)] for s in levels],
                                   median.loc[k][m].reindex(levels))
            cells.append((f"×{per.median():.2f}" if len(per) else "–")
                         + f" · {slope_s:+.2f} · {slope_c:+.2f}")
        ratio[f"K = {k}"] = cells
    return lines + ["Per method and K: how many times lower the median RAE is at 10·S than at S "
                    "(median over the decades of S; 1/√budget gives ×3.16) · the log-log slope "
                    "of the median RAE against S · against the model calls (−0.5 is 1/√budget):",
                    "", to_markdown(ratio), ""]


def fig12_caption(runs: Sequence[ModelRun]) -> str:
    return ("*Fig. 12: beams kept per step by coverage beam search on p(X_K ∈ a), one panel "
            "per K, one colour per coverage α (thin: one history; thick: the median); "
            f"{_histories(runs, None)}.*")


def fig12_section(run: ModelRun, csv: str) -> list[str]:
    growth = beam_growth(run.rows)
    calls = run.rows.groupby("method").model_calls.median()
    shown = pd.DataFrame({"step": [*growth.index, "model calls"]})
    for method in growth.columns:
        shown[f"α = {alpha_of(method)}"] = ([f"{x:,.0f}" for x in growth[method]]
                                             + [f"{calls[method]:,.0f}"])
    return [_links_line(run, csv, f"at K = {', '.join(map(str, _values(run, 'K')))} with "
                                  f"every α"),
            "", "Median beams kept per step over the histories, and the median model calls:",
            "", to_markdown(shown), ""]


def fig13_caption(runs: Sequence[ModelRun]) -> str:
    return ("*Fig. 13 (and Fig. 4b, which the paper draws for Mobile Apps alone: that data is "
            "not here): median RAE of p_T(τ(a) = 4) vs the model temperature T at S = 100, "
            "bands the interquartile range over queries, one panel per model: "
            f"{_histories(runs)}.*")


def fig13_section(run: ModelRun, csv: str) -> list[str]:
    ts = _values(run, "temperature")
    methods = methods_in(run.rows)
    q = run.rows.groupby(["temperature", "method"]).rae.quantile([0.25, 0.5, 0.75]).unstack()
    kinds = run.rows.drop_duplicates(["history_id", "temperature"]).groupby(
        "temperature").truth_kind.agg(lambda k: "/".join(sorted(set(k))))
    shown = pd.DataFrame({"T": [f"{t:g}" for t in ts], "truth": [kinds[t] for t in ts]})
    for m in methods:
        shown[m] = [f"{fmt(q.loc[(t, m), 0.5])} [{fmt(q.loc[(t, m), 0.25])}, "
                    f"{fmt(q.loc[(t, m), 0.75])}]" for t in ts]
    return [_links_line(run, csv, f"done at every T = {', '.join(f'{t:g}' for t in ts)} by "
                                  f"all three methods, K = "
                                  f"{', '.join(map(str, _values(run, 'K')))}"),
            "", "Median RAE [interquartile range] per temperature:", "", to_markdown(shown), ""]


def fig14_caption(runs: Sequence[ModelRun]) -> str:
    return ("*Fig. 14: mean unaccounted probability 1 − p̂(τ(A) < τ(B) ≤ K) − p̂(τ(B) < τ(A) "
            "≤ K) vs K (A: the next observed symbol, B: the first later one that differs), "
            "importance sampling, bands the 99% intervals of the mean, one panel per model: "
            f"{_histories(runs)}.*")


def fig14_section(run: ModelRun, csv: str) -> list[str]:
    stats = unaccounted_summary(run.rows)
    shown = pd.DataFrame({
        "K": stats.K, "method": stats.method, "S": stats.budget_level,
        "histories": stats.histories,
        "mean [99% CI]": [f"{m:.2%} [{lo:.2%}, {hi:.2%}]" for m, lo, hi in
                          zip(stats["mean"], stats.ci99_low, stats.ci99_high, strict=True)]})
    return [_links_line(run, csv, f"with both orders at every K = "
                                  f"{_span(_values(run, 'K'))}"),
            "", "Mean unaccounted probability over the histories [99% interval of the mean]:",
            "", to_markdown(shown), ""]


def fig15_caption(runs: Sequence[ModelRun]) -> str:
    return ("*Fig. 15's protocol (the paper's: Mobile Apps, social-media apps A before "
            "direct-communication apps B; that data is not here): mean estimate of "
            "p(τ(A) < τ(B) ≤ K) vs the share of A in a synthetic history, error bars the 90% "
            "intervals of the mean; "
            + "; ".join(f"{r.dataset} ({_model_name(r.model)}), N = {r.n:,}, "
                        + _focus(r.rows.label.iloc[0]) for r in runs) + ".*")


def _focus(label: str) -> str:
    """"tau(1,2)<tau(6,7)@30" -> "A = symbols 1, 2, B = symbols 6, 7 (ids of the model's
    vocabulary)"."""
    found = re.match(r"tau\(([^)]*)\)<tau\(([^)]*)\)", label)
    if not found:
        return f"query {label}"
    a, b = (", ".join(x.split(",")) for x in found.groups())
    return f"A = symbols {a}, B = symbols {b} (ids in the model's vocabulary)"


def fig15_section(run: ModelRun, csv: str) -> list[str]:
    stats = share_means(run.rows.assign(share=run.rows.group.str.removeprefix("share=")
                                        .astype(float)))
    shown = pd.DataFrame({
        "share of A": [f"{s:g}" for s in stats.share], "histories": stats.histories,
        "mean p̂ [90% CI]": [f"{m:.3f} [{lo:.3f}, {hi:.3f}]" for m, lo, hi in
                            zip(stats["mean"], stats.low, stats.high, strict=True)]})
    return [_links_line(run, csv, f"over {len(stats)} shares, K = "
                                  f"{', '.join(map(str, _values(run, 'K')))}, S = "
                                  f"{', '.join(map(str, run.levels))}"),
            "", "Mean estimate per share of A [90% interval of the mean]:", "",
            to_markdown(shown), ""]
