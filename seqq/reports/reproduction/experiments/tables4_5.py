"""Tables 4 and 5 (App. H) beside seqq's: the mean KL(p̂ ‖ p̃) of importance sampling's estimate
of the next symbol's distribution, cell for cell with the paper's, from a `kl` sweep's rows
(`seqq/reports/kl.py`). Writes `table4_shakespeare_<model>.csv` / `table5_moocs_<model>.csv`, the
figure, the doc's `tables4-5` block and its summary-table row."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from seqq.reports.kl import PANEL, grid_markdown, is_kl, kl_figure, kl_table, load_kl, write_kl_report
from seqq.reports.plotting import save
from seqq.reports.reproduction.markdown import (
    SUMMARY_BLOCK,
    begin,
    end,
    find_block,
    update_doc,
    update_summary,
)
from seqq.reports.reproduction.panels import model_slug
from seqq.reports.reproduction.reproduce import OwnRows

NAME = "tables4-5"  # `--experiment`, the doc's block and the figure's stem
TITLE = "Tables 4, 5"
LENGTHS = (2, 5, 10, 20, 40, 60, 80, 100)  # the paper's columns ("query sequence length")
# The paper's cells, App. H: {dataset: (table number, {S: cells by LENGTHS})}
PAPER: dict[str, tuple[int, dict[int, tuple[float, ...]]]] = {
    "shakespeare": (4, {
        10: (0.24636, 0.39938, 0.49633, 0.53261, 0.50930, 0.54033, 0.54350, 0.53290),
        30: (0.09374, 0.16453, 0.22747, 0.23334, 0.23325, 0.24949, 0.23519, 0.23596),
        50: (0.06239, 0.10865, 0.14975, 0.15478, 0.16468, 0.16498, 0.15555, 0.15791),
        100: (0.03151, 0.05687, 0.08451, 0.09082, 0.09006, 0.09358, 0.08501, 0.08865),
        300: (0.00990, 0.01970, 0.03045, 0.03279, 0.03370, 0.03335, 0.03348, 0.03332),
        500: (0.00598, 0.01211, 0.01817, 0.02051, 0.02115, 0.02048, 0.02005, 0.02090),
        1000: (0.00311, 0.00619, 0.00953, 0.01038, 0.01092, 0.01040, 0.01036, 0.01075),
        3000: (0.00105, 0.00214, 0.00317, 0.00369, 0.00358, 0.00369, 0.00373, 0.00362),
        5000: (0.00064, 0.00129, 0.00197, 0.00222, 0.00220, 0.00219, 0.00224, 0.00215),
        10000: (0.00033, 0.00063, 0.00098, 0.00109, 0.00110, 0.00108, 0.00110, 0.00106)}),
    "moocs": (5, {
        10: (0.19327, 0.37587, 0.59260, 0.80115, 0.98514, 1.09345, 1.10783, 1.17955),
        30: (0.09654, 0.18376, 0.28232, 0.39400, 0.50090, 0.55637, 0.55334, 0.57453),
        50: (0.06370, 0.12720, 0.19311, 0.26374, 0.33748, 0.36861, 0.37852, 0.39491),
        100: (0.03546, 0.07182, 0.10772, 0.14772, 0.18664, 0.21176, 0.21936, 0.22095),
        300: (0.01424, 0.02773, 0.04329, 0.05690, 0.07304, 0.07871, 0.07949, 0.07913),
        500: (0.00893, 0.01808, 0.02747, 0.03640, 0.04588, 0.04835, 0.04881, 0.04880),
        1000: (0.00503, 0.01018, 0.01519, 0.01939, 0.02337, 0.02429, 0.02431, 0.02450),
        3000: (0.00177, 0.00372, 0.00543, 0.00687, 0.00776, 0.00820, 0.00800, 0.00811),
        5000: (0.00114, 0.00232, 0.00337, 0.00426, 0.00478, 0.00492, 0.00481, 0.00479),
        10000: (0.00057, 0.00118, 0.00173, 0.00212, 0.00232, 0.00238, 0.00234, 0.00236)}),
}
CLOSE = 0.25  # a cell "matches" within ±25 % of the paper's (100 histories: ~5-10 % noise)
# the verdict: reproduced when at least this share of the cells match, partly reproduced at PARTLY
MATCHED, PARTLY = 0.8, 0.5
SEMS = 2  # a cell differs from the paper's beyond its noise by more than this many kl_sem
COLUMNS = ("samples", "length", "kl", "kl_sem", "kl_m_corrected", "kl_reverse", "paper_kl",
           "histories", "truth_paths")


def with_paper(table: pd.DataFrame) -> pd.DataFrame:
    """The table with the paper's cell (`paper_kl`, NaN where the paper has none) per row."""
    def cell(row: pd.Series) -> float:
        cells = PAPER.get(row.dataset, (0, {}))[1].get(int(row.samples))
        return cells[LENGTHS.index(row.length)] if cells and row.length in LENGTHS else np.nan

    return table.assign(paper_kl=table.apply(cell, axis=1) if len(table) else [])


def _off(block: pd.DataFrame, column: str) -> pd.Series:
    """|seqq / paper − 1| for each of the panel's cells the paper has."""
    both = block[np.isfinite(block.paper_kl)]
    return (both[column] / both.paper_kl - 1).abs()


def matched(block: pd.DataFrame, column: str = "kl_m_corrected") -> tuple[int, int]:
    """How many of the panel's cells lie within ±CLOSE of the paper's, of how many it has."""
    off = _off(block, column)
    return int((off <= CLOSE).sum()), len(off)


def deviation(block: pd.DataFrame, column: str = "kl_m_corrected") -> float:
    """The median |seqq / paper − 1| over the panel's cells the paper has."""
    return float(_off(block, column).median())


def noise(table: pd.DataFrame, column: str = "kl_m_corrected") -> tuple[float, int, int]:
    """The cells' median relative standard error (kl_sem / kl), and how many of the cells the
    paper has differ from its value by more than `SEMS` standard errors, of how many."""
    both = table[np.isfinite(table.paper_kl)]
    beyond = (both[column] - both.paper_kl).abs() > SEMS * both.kl_sem
    return float((both.kl_sem / both.kl).median()), int(beyond.sum()), len(both)


def verdict(table: pd.DataFrame) -> str:
    """From the cells within ±CLOSE of the paper's after the M/(M + S) correction (reproduced
    at MATCHED of them, partly at PARTLY), with the raw count beside it, the rule, the band
    beside the measured noise, and what was inferred."""
    def count(column: str) -> tuple[int, int]:
        shares = [matched(block, column) for _, block in table.groupby(list(PANEL))]
        return sum(s[0] for s in shares), sum(s[1] for s in shares)

    hit, cells = count("kl_m_corrected")
    if not cells:
        return "not checkable: no cell of the paper's grid was run"
    raw, _ = count("kl")
    word = ("reproduced" if hit >= MATCHED * cells else "partly reproduced"
            if hit >= PARTLY * cells else "differs")
    sem, beyond, _ = noise(table)
    return (f"**{word}**: {hit} of {cells} cells within ±{CLOSE:.0%} of the paper's with "
            f"KL(p̂ ‖ p̃) less its pseudo ground truth's noise (× M/(M + S)), {raw} of {cells} "
            f"without that correction (the rule: reproduced when at least {MATCHED:.0%} of the "
            f"cells are within ±{CLOSE:.0%}, partly reproduced at {PARTLY:.0%}, else differs). "
            f"{_band_against_noise(sem)}, and {beyond} of "
            f"{cells} cells differ from the paper's by more than {SEMS} standard errors; the "
            "KL's definition (its query, distribution and direction) is inferred from the "
            "paper's numbers, which its text does not name")


def _band_against_noise(sem: float) -> str:
    """The ±CLOSE band in units of the cells' median standard error (relative to their KL)."""
    if not sem > 0:
        return "The cells report no standard error to weigh the band against"
    return (f"The band is wide against the measured noise: the cells' median standard error is "
            f"{sem:.1%} of their KL, ±{CLOSE:.0%} is {CLOSE / sem:.0f} of them")


def export_kl(paths: Sequence[str | Path], out: str | Path, doc: str | Path | None = None,
              models: Sequence[str] = (),
              summary: Mapping[str, Sequence[str]] | None = None) -> list[Path]:
    """Write the CSVs, the figure and (with `doc`) its block and summary row; return the files."""
    out = Path(out)
    if doc is not None and summary is not None:  # refuse a doc without a summary table
        find_block(Path(doc), SUMMARY_BLOCK)  # before writing anything
    rows = load_kl(paths)
    if models:
        rows = rows[rows.model.isin(models)]
    table = with_paper(kl_table(rows[rows.dataset.isin(PAPER)]))
    if table.empty:
        raise ValueError(f"no KL rows of {', '.join(PAPER)} under {', '.join(map(str, paths))}")
    out.mkdir(parents=True, exist_ok=True)
    written, csvs = [], []
    for (dataset, model), block in table.groupby(list(PANEL)):
        path = out / f"table{PAPER[dataset][0]}_{dataset}_{model_slug(model)}.csv"
        block[list(COLUMNS)].to_csv(path, index=False, float_format="%.6g")
        written.append(path)
        csvs.append(path)
    paper = {d: cells for d, (_, cells) in PAPER.items()}
    stem = f"{NAME}_" + "_".join(sorted({model_slug(m) for m in table.model}))
    written += save(kl_figure(table, paper, LENGTHS, column="kl_m_corrected"), out, stem)
    if doc is not None:
        folder = Path(os.path.relpath(out.resolve(), Path(doc).resolve().parent)).as_posix()
        update_doc(Path(doc), NAME, _block(table, folder, stem, csvs), TITLE)
        if summary is not None:
            update_summary(Path(doc), _summary_row(table), {t: (t, *r) for t, r in
                                                           summary.items()})
        written.append(Path(doc))
    return written


def rejudge(folder: Path, doc: Path, summary: Mapping[str, Sequence[str]]) -> None:
    """Its summary row from the committed `table<n>_<dataset>_<model>.csv` alone; without any
    yet, the row is kept."""
    tables = [pd.read_csv(path).assign(dataset=dataset, model=path.stem.rsplit("_", 1)[1])
              for dataset, (number, _) in PAPER.items()
              for path in sorted(folder.glob(f"table{number}_{dataset}_*.csv"))]
    if not tables:
        return
    update_summary(doc, _summary_row(pd.concat(tables, ignore_index=True)),
                   {t: (t, *r) for t, r in summary.items()})


def _block(table: pd.DataFrame, folder: str, stem: str, csvs: Sequence[Path]) -> str:
    lines = [begin(NAME), "",
             f"Generated from the `kl` sweep's rows ({len(table)} cells of S × L × model); the "
             "figure and CSVs below were written by the same command.", "",
             f"![{TITLE} reproduction]({folder}/{stem}.png)", "",
             f"*{TITLE}: mean KL(p̂ ‖ p̃) vs samples S, seqq (solid, less its pseudo ground "
             "truth's noise) and the paper (dashed), one line per length L.*", ""]
    for ((dataset, model), block), path in zip(table.groupby(list(PANEL)), csvs, strict=True):
        number = PAPER[dataset][0]
        hit, cells = matched(block)
        rev_hit, _ = matched(block, "kl_reverse")
        m = int(block.truth_paths.iloc[0])
        lines += [f"### Table {number}: {dataset} · {model} · {int(block.histories.min())} "
                  f"histories · M = {m:,}", "",
                  f"Each cell: seqq's KL(p̂ ‖ p̃) less its pseudo ground truth's noise "
                  f"(× M/(M + S)) / the paper's. [`{path.name}`]({folder}/{path.name}) also "
                  "has the raw KL, its standard error over histories and the reverse KL.", "",
                  grid_markdown(block, "kl_m_corrected", PAPER[dataset][1], LENGTHS), "",
                  f"Within ±{CLOSE:.0%} of the paper's: {hit} of {cells} cells, the median "
                  f"cell {deviation(block):.1%} off; the reverse KL(p̃ ‖ p̂): {rev_hit} of "
                  f"{cells}, {deviation(block, 'kl_reverse'):.1%} off.", ""]
    lines.append(end(NAME))
    return "\n".join(lines)


def _summary_row(table: pd.DataFrame) -> tuple[str, str, str, str]:
    models = "; ".join(f"{d} (authors' LSTM)" if m.startswith("authors") else f"{d} ({m})"
                       for d, m in table.groupby(list(PANEL)).groups)
    size = "; ".join(f"{int(b.histories.min())} histories ({d}), M = "
                     f"{int(b.truth_paths.iloc[0]):,}" for (d, _), b in
                     table.groupby(list(PANEL)))
    samples = sorted(table.samples.unique())
    lengths = sorted(table.length.unique())
    size += (f"; S = {samples[0]:,}–{samples[-1]:,} ({len(samples)}), L = {lengths[0]}–"
             f"{lengths[-1]} ({len(lengths)})")
    return TITLE, models, size, verdict(table)


EXPERIMENT = OwnRows(
    name=NAME, title=TITLE, sweep="kl", models="Shakespeare, MOOCs (authors' LSTMs)",
    results="kl", reads=is_kl, report=write_kl_report, export=export_kl, rejudge=rejudge,
    pending="not run yet at paper size: `make paper SIZE=paper` (the `kl` preset)")
