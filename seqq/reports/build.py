"""Write every table (CSV + Markdown), figure (PNG + PDF) and the Markdown summary of a set
of results: the one function behind `seqq report` and the end of `seqq query-sweep`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from seqq.reports import frontier, tables
from seqq.reports.figures import FIGURES


def _write_table(table: pd.DataFrame, folder: Path, name: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / f"{name}.csv", index=False)
    markdown = tables.to_markdown(table)
    (folder / f"{name}.md").write_text(markdown + "\n")
    return markdown


def _counts(column: pd.Series) -> str:
    return ", ".join(f"{k} {v}" for k, v in column.value_counts().items())


def _summary_sections(results: pd.DataFrame, summary: pd.DataFrame) -> list[str]:
    """Median and mean RAE per method × K (rows) × budget level (columns), one block per panel."""
    sections = []
    for panel, block in summary.groupby(tables.PANEL, observed=True):
        dataset, model, temperature, query = panel
        title = tables.dataset_title(results, dataset)
        sections.append(f"## {title} · {model} · T={temperature} · {query}\n")
        for stat in ("median_rae", "mean_rae"):
            pivot = block.pivot_table(index=["method", "K"], columns="budget_level", values=stat)
            pivot.columns = [f"S={c}" for c in pivot.columns]
            sections += [f"**{stat.replace('_', ' ')}**\n", tables.to_markdown(
                pivot.reset_index()), ""]
    return sections


def build_report(paths: Sequence[str | Path], out: str | Path,
                 figures: Sequence[str] | None = None,
                 datasets: Sequence[str] | None = None) -> Path:
    """Merge the results under `paths` (only `datasets`, if given), write tables/, figures/ and
    summary.md into `out`."""
    out = Path(out)
    results = tables.load_results([str(p) for p in paths], list(datasets or []))
    summary = tables.rae_summary(results)
    _write_table(summary, out / "tables", "rae_summary")
    extra = {"large_lm": tables.large_lm_table(results) if {"importance", "beam"} <= set(
                 results.method) else pd.DataFrame(),
             "kl_importance": tables.kl_tables(results) if results.budget_level.nunique() > 1
             else pd.DataFrame(),
             "unaccounted": tables.unaccounted(results),
             "frontier": frontier.winners(results) if frontier.applies(results) else pd.DataFrame()}
    written = {name: _write_table(table, out / "tables", name)
               for name, table in extra.items() if not table.empty}
    unknown = set(figures or []) - set(FIGURES)
    if unknown:
        raise ValueError(f"unknown figures {sorted(unknown)}; choose from {sorted(FIGURES)}")
    drawn = []
    for name, (applies, draw) in FIGURES.items():
        if (figures is None or name in figures) and applies(results):
            drawn += [p for p in draw(results, out / "figures") if p.suffix == ".png"]
    failed = int((~np.isfinite(results.rae)).sum())
    names = ", ".join(tables.dataset_title(results, d) for d in sorted(results.dataset.unique()))
    lines = [
        "# seqq query-sweep summary\n",
        f"{len(results)} rows · datasets: {names}"
        f" · methods: {', '.join(sorted(results.method.unique()))}"
        f" · budget levels S: {', '.join(map(str, sorted(results.budget_level.unique())))}"
        f" · ground truth: {_counts(results.truth_kind)}"
        + (f" · {failed} rows without a finite RAE" if failed else "") + "\n",
        *_summary_sections(results, summary),
        *(["## Estimator frontier: best method vs the hybrid at equal calls\n",
           written["frontier"], ""] if "frontier" in written else []),
        "## Figures\n",
        *[f"![{p.stem}](figures/{p.name})" for p in drawn],
        "",
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text("\n".join(lines))
    return out
