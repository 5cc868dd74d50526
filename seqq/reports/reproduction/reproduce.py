"""One of the paper's experiments reproduced from a sweep's results: what an `Experiment`
declares, and `reproduce`, which writes a CSV per panel, the figure (PNG + PDF) and the doc's
generated block from it."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from seqq.reports.plotting import save
from seqq.reports.reproduction.export import to_csv
from seqq.reports.reproduction.markdown import begin, end, others_section, update_doc
from seqq.reports.reproduction.panels import ModelRun, model_slug, select
from seqq.reports.tables import load_results


@dataclass(frozen=True)
class Experiment:
    """A paper figure or table as seqq reproduces it: which results it reads, and the parts of
    its figure, doc section and claim checks that are its own."""

    name: str  # files: `<name>_<dataset>_<model>.csv` per panel, `<name>_<models>.png` / `.pdf`
    title: str  # as the paper names it, e.g. "Fig. 3"
    sweep: str  # the sweep preset whose results it reads (`make <sweep> SIZE=paper`)
    query: str  # the query kind of its rows
    methods: tuple[str, ...]  # whose rows its CSVs hold; other methods get their own table
    level: int  # the budget level S it reads unless told another
    block: str  # the name in the doc's BEGIN/END markers
    figure: Callable[[Sequence[ModelRun], int], Figure]  # (panels, S) -> the figure
    caption: Callable[[Sequence[ModelRun], int], str]  # the figure's caption in the doc
    section: Callable[[ModelRun, str], list[str]]  # a panel's tables, given its CSV's link
    claims: Callable[[ModelRun], str]  # the paper's claims beside the panel's numbers


def reproduce(experiment: Experiment, paths: Sequence[str | Path], out: str | Path,
              doc: str | Path | None = None, level: int | None = None,
              models: Sequence[str] = (), datasets: Sequence[str] = ()) -> list[Path]:
    """Write the experiment's CSVs and figure into `out` (and its block of `doc`) from the
    results under `paths`, at budget level `level` (default: the experiment's); return the
    files written."""
    out, level = Path(out), experiment.level if level is None else level
    runs = select(load_results(paths, datasets), experiment.methods, experiment.query, level,
                  models)
    csvs = [to_csv(run, out, experiment.name) for run in runs]
    stem = f"{experiment.name}_{'_'.join(sorted({model_slug(r.model) for r in runs}))}"
    written = [*csvs, *save(experiment.figure(runs, level), out, stem)]
    if doc is not None:
        folder = Path(os.path.relpath(out.resolve(), Path(doc).resolve().parent)).as_posix()
        update_doc(Path(doc), experiment.block,
                   _doc_block(experiment, runs, level, stem, csvs, folder))
        written.append(Path(doc))
    return written


def _doc_block(experiment: Experiment, runs: Sequence[ModelRun], level: int, figure: str,
               csvs: Sequence[Path], folder: str) -> str:
    """The doc's generated block; `folder`: where the figure and CSVs are, relative to the
    doc."""
    lines = [begin(experiment.block), "",
             f"Generated from {sum(len(r.rows) for r in runs):,} result rows "
             f"(budget level S = {level}); the figure and CSVs below were written by the same "
             "command.", "",
             f"![{experiment.title} reproduction]({folder}/{figure}.png)", "",
             experiment.caption(runs, level), ""]
    for run, csv in zip(runs, csvs, strict=True):
        lines += [f"### {run.title}", "",
                  *experiment.section(run, f"[`{csv.name}`]({folder}/{csv.name})"),
                  f"The paper's {experiment.title} claims beside seqq's medians:", "",
                  experiment.claims(run), ""]
        if not run.others.empty:
            lines += others_section(run)
    lines.append(end(experiment.block))
    return "\n".join(lines)
