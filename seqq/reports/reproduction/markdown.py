"""The generated block of a reproduction's doc (docs/reproduction.md): the figure, then per
panel its tables and the paper's claims checked on them, between `BEGIN`/`END` markers that
`update_doc` rewrites; the text around them is written by hand."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from seqq.errors import ResultsError
from seqq.reports.reproduction.panels import PAPER_METHODS, PAPER_N, SETTER, ModelRun
from seqq.reports.reproduction.stats import others_medians, summary
from seqq.reports.tables import to_markdown


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
    first, last = begin(block), end(block)
    start, stop = doc.find(first), doc.find(last)
    if start < 0 or stop < start:
        raise ResultsError(f"{path} lacks the markers {first!r} … {last!r}; add them where "
                           "the generated tables go")
    path.write_text(doc[:start] + text + doc[stop + len(last):])


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


def fig3_caption(runs: Sequence[ModelRun], level: int) -> str:
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
