"""The generated blocks of a reproduction's doc (docs/reproduction.md): per experiment its
figures, caption, then per panel its tables and the paper's claims checked on them, between
`BEGIN`/`END` markers that `update_doc` rewrites; and the summary table at the top, one row per
experiment (`update_summary`). The text around the blocks is written by hand."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from seqq.errors import ResultsError
from seqq.reports.reproduction.claims import rules
from seqq.reports.reproduction.panels import PAPER_N, SETTER, ModelRun
from seqq.reports.reproduction.stats import (
    others_medians,
)
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


def update_doc(path: Path, block: str, text: str, title: str = "") -> None:
    """Replace the marked block `block` (markers included) in `path` with `text`; with `title`
    (an experiment's), a doc without the block gets it at its end, under a `## <title>`
    heading, so that a new experiment's first export needs no hand-written markers."""
    doc = path.read_text()
    if title and begin(block) not in doc:
        path.write_text(f"{doc.rstrip()}\n\n## {title}\n\n{text}\n")
        return
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


# ---- the summary table at the top of the doc: one row per experiment, rewritten by its export

SUMMARY_BLOCK = "summary"
RULES_BLOCK = "rules"  # the statistical rules, stated once above the summary table
SUMMARY_HEADER = ("experiment", "models", "size run", "verdict")


def summary_row(title: str, runs: Sequence[ModelRun], verdict: str,
                levels: Sequence[int] = ()) -> tuple[str, ...]:
    """An experiment's row of the summary table: its models, what ran (N per model, the grid
    of K, S — `levels` where it reads fewer than its rows hold — and T) and its verdict."""
    models = "; ".join(f"{r.dataset} ({model_name(r.model)})" for r in runs)
    rows = pd.concat([r.rows for r in runs])
    ks = sorted(int(k) for k in rows.K.unique())
    grid = [f"K = {span(ks)}"]
    levels = sorted(levels or {int(s) for s in rows.budget_level.unique()})
    if levels != [0]:
        grid.append(f"S = {span(levels, ranges=False)}")
    temperatures = sorted(rows.temperature.unique())
    if temperatures != [1.0]:
        grid.append(f"T = {', '.join(f'{t:g}' for t in temperatures)}")
    alphas = sorted({json.loads(o).get("alpha") for o in rows.options} - {None}, reverse=True)
    if alphas:
        grid.append(f"α = {', '.join(map(str, alphas))}")
    size = ("N = " + ", ".join(f"{r.n:,} ({r.dataset})" for r in runs) + "; " + "; ".join(grid))
    return title, models, size, verdict


def model_name(model: str) -> str:
    return "authors' LSTM" if model.startswith("authors") else model


def span(values: Sequence[int], ranges: bool = True) -> str:
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
    if begin(RULES_BLOCK) in doc:  # a doc that states the rules has them rewritten with it
        update_doc(path, RULES_BLOCK, "\n".join([begin(RULES_BLOCK), "", rules(), "",
                                                 end(RULES_BLOCK)]))


# ---- what the experiments' captions and sections share

def histories(runs: Sequence[ModelRun], of: int | None = PAPER_N) -> str:
    """Per model its N, and where its histories come from when not the test split."""
    return "; ".join(f"{r.dataset}, N = {r.n:,}" + (f" of the protocol's {of:,}" if of else "")
                     + (" (histories sampled from the model: the raw MOOCs file is not here)"
                        if r.histories_from.startswith("sampled") else "")
                     for r in runs)


def values(run: ModelRun, column: str) -> list:
    return sorted(run.rows[column].unique())


def links_line(run: ModelRun, csv: str, what: str) -> str:
    return f"N = {run.n:,} histories {what} ({len(run.rows):,} rows in {csv})."
