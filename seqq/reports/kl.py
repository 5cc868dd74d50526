"""Tables 3–6's measurement as a report: the mean KL(p̂ ‖ p̃) of the next symbol's distribution
over histories, by samples S (rows) and length L (columns), per dataset and model, and its
figure (KL vs S, one line per L). The rows are `seqq.sweeps.symbol_kl`'s (`<sweep>/kl/`).

The pseudo ground truth p̃ is itself an average of M paths: to second order
E[KL(p̂ ‖ p̃)] = c · (1/S + 1/M), so `kl_m_corrected` = KL · M / (M + S) removes the share its own
noise adds (2 % at S = 1000 and M = 50,000; the paper's M ≤ 250,000 left at most 4 % in its
cells).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pyarrow.parquet
from matplotlib.figure import Figure

from seqq.reports.plotting import legend, log_axes, panel_title, save, wrapped
from seqq.results.schema import KL_KEY
from seqq.results.store import part_files, read_parts

PANEL = ("dataset", "model")


def is_kl(paths: Iterable[str | Path]) -> bool:
    """Whether `paths` hold the KL experiment's rows (a `sweep.symbol_kl` sweep's `kl/`), by
    the columns of their first part."""
    files = [f for p in paths for f in part_files(p)]
    return bool(files) and {"length", "kl", "truth_paths"} <= set(
        pyarrow.parquet.read_schema(files[0]).names)


def load_kl(paths: Iterable[str | Path]) -> pd.DataFrame:
    rows = read_parts(paths, KL_KEY)
    if rows.empty:
        raise FileNotFoundError(f"no KL rows under {', '.join(map(str, paths))}")
    return rows


def kl_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, model, S and L: the mean KL over histories (with its standard error over
    them), the reverse KL, how many histories and the pseudo ground truth's paths M. Only
    histories with every cell count, so each cell averages the same histories."""
    cells = rows.groupby(list(PANEL)).apply(_complete, include_groups=False).reset_index(
        level=list(PANEL))
    table = cells.groupby([*PANEL, "samples", "length"]).agg(
        kl=("kl", "mean"), kl_sem=("kl", "sem"), kl_reverse=("kl_reverse", "mean"),
        histories=("history_id", "nunique"), truth_paths=("truth_paths", "first")).reset_index()
    m, s = table.truth_paths.astype(float), table.samples.astype(float)
    table["kl_m_corrected"] = table.kl * m / (m + s)
    return table


def _complete(rows: pd.DataFrame) -> pd.DataFrame:
    cells = rows.groupby(["samples", "length"]).ngroups
    per_history = rows.groupby("history_id").size()
    return rows[rows.history_id.isin(per_history[per_history == cells].index)]


def grid_markdown(table: pd.DataFrame, column: str = "kl",
                  paper: Mapping[int, tuple[float, ...]] | None = None,
                  paper_lengths: tuple[int, ...] = ()) -> str:
    """One panel's S × L grid of `column` as Markdown; with `paper` ({S: cells by
    `paper_lengths`}), each cell reads "seqq / paper"."""
    lengths = sorted(table.length.unique())
    lines = ["| S | " + " | ".join(f"L = {n}" for n in lengths) + " |",
             "|---|" + "---|" * len(lengths)]
    for samples, block in table.groupby("samples"):
        values = dict(zip(block.length, block[column], strict=True))
        cells = []
        for length in lengths:
            cell = _fmt(values.get(length, np.nan))
            if paper is not None and samples in paper and length in paper_lengths:
                cell += f" / {_fmt(paper[samples][paper_lengths.index(length)])}"
            cells.append(cell)
        lines.append(f"| {samples:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(x: float) -> str:
    return "–" if not np.isfinite(x) else f"{x:.3g}" if x >= 0.001 else f"{x:.2e}"


def kl_figure(table: pd.DataFrame,
              paper: Mapping[str, Mapping[int, tuple[float, ...]]] | None = None,
              paper_lengths: tuple[int, ...] = (), column: str = "kl") -> Figure:
    """KL vs S on log–log axes, one panel per (dataset, model), one colour per length L; with
    `paper` ({dataset: {S: cells}}), the paper's cells dashed beside seqq's."""
    panels = list(table.groupby(list(PANEL)))
    fig, axes = wrapped(len(panels), 3, size=(4.2, 3.4))
    lengths = sorted(table.length.unique())
    colours = dict(zip(lengths, plt.cm.viridis(np.linspace(0, 0.9, len(lengths))), strict=True))
    for ax, ((dataset, model), block) in zip(axes.flat, panels, strict=False):
        for length, line in block.groupby("length"):
            ax.plot(line.samples, line[column], "o-", ms=3, color=colours[length],
                    label=f"L = {length}")
            cells = (paper or {}).get(dataset)
            if cells and length in paper_lengths:
                s = sorted(cells)
                ax.plot(s, [cells[x][paper_lengths.index(length)] for x in s], "--", lw=1,
                        color=colours[length])
        if paper:
            ax.plot([], [], "k--", lw=1, label="paper (dashed)")
        log_axes(ax)
        ax.set(xlabel="samples S", ylabel="mean KL(p̂ ‖ p̃), nats" + (
            "\nless the truth's own noise" if column == "kl_m_corrected" else ""))
        histories = int(block.histories.min())
        panel_title(ax, f"{dataset} · {model} · {histories} histories · "
                        f"M = {int(block.truth_paths.iloc[0]):,} truth paths")
    legend(fig, axes, title="length L (sampled steps before the predicted symbol)")
    return fig


def write_kl_report(paths: Iterable[str | Path], out: str | Path) -> Path:
    """summary.md, the table as CSV and the figure (PNG + PDF) for the KL rows under `paths`."""
    paths = list(paths)
    out = Path(out)
    table = kl_table(load_kl(paths))
    (out / "tables").mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "tables" / "kl.csv", index=False, float_format="%.6g")
    lines = ["# seqq report: Tables 3–6, KL of importance sampling\n",
             "Results from " + ", ".join(f"`{p}`" for p in paths) + ".\n",
             "Mean KL(p̂ ‖ p̃) over histories between importance sampling's estimate of the "
             "distribution of the symbol after L sampled steps (S paths) and a pseudo ground "
             "truth from M paths (`tables/kl.csv` also has its standard error, the reverse KL "
             "and the value less the pseudo ground truth's own noise).\n"]
    for (dataset, model), block in table.groupby(list(PANEL)):
        lines += [f"## {dataset} · {model} · {int(block.histories.min())} histories · "
                  f"M = {int(block.truth_paths.iloc[0]):,}\n", grid_markdown(block), ""]
    save(kl_figure(table), out / "figures", "kl_vs_samples")
    lines += ["## Figures\n", "![kl_vs_samples](figures/kl_vs_samples.png)\n"]
    (out / "summary.md").write_text("\n".join(lines))
    return out
