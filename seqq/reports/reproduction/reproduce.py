"""What a module of `experiments/` declares (`registry.py` finds them): an `Experiment` read
from a sweep's query results, an `OwnRows` read from rows of its own (a `kl` sweep's KL rows, a
`fig1` sweep's runs), or a `NotRun` that
only has its row of the summary table; and `reproduce`, which writes an `Experiment`'s CSV per
panel, its figures (PNG + PDF), the doc's generated block and its row of the doc's summary
table."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from seqq.reports.plotting import save
from seqq.reports.reproduction.export import FIG3_COLUMNS, Column, csv_names, to_csv
from seqq.reports.reproduction.markdown import (
    SUMMARY_BLOCK,
    begin,
    end,
    find_block,
    others_section,
    summary_row,
    update_doc,
    update_summary,
)
from seqq.reports.reproduction.panels import ModelRun, model_slug, select
from seqq.reports.tables import load_results

NOT_RUN = "not run yet at paper size"  # a summary row's verdict until the first export
# Where `make paper-sweeps` runs an experiment's sweep: on the authors' LSTMs (Shakespeare and
# MOOCs, `AUTHORS`) or on the datasets named, with these overrides (the paper-size sweeps keep
# their estimated truths as computed)
AUTHORS = "authors"
PAPER_OVERRIDES = "sweep.refine_truth=null"


def _same_rows(rows: pd.DataFrame) -> pd.DataFrame:
    return rows


@dataclass(frozen=True)
class NotRun:
    """An experiment of the paper that seqq does not reproduce (yet): only its summary row."""

    title: str  # as the paper names it, e.g. "Table 3"
    models: str  # the paper's data and models (and seqq's stand-in)
    why: str  # what it needs, or why it is blocked

    @property
    def pending_row(self) -> tuple[str, str, str]:
        """Its summary row's models, size run and verdict."""
        return self.models, "–", self.why


@dataclass(frozen=True)
class OwnRows:
    """An experiment read from rows of its own (`<sweep>/<results>`: a `kl` sweep's KL rows,
    a `fig1` sweep's runs), not from query results: its module reports and exports it (CSVs,
    figure, doc block and summary row)."""

    name: str  # `--experiment`, the doc's block
    title: str
    sweep: str
    models: str  # the summary row's models until its first export
    results: str  # the sweep's folder it reads
    reads: Callable[[Sequence[Path]], bool]  # whether these folders hold its rows
    report: Callable[[Sequence[Path], Path], Path]  # (paths, out): a plain report, its folder
    export: Callable[..., list[Path]]  # (paths, out, doc, models, summary) -> files written
    rejudge: Callable[..., None]  # (folder, doc, summary): its summary row from its CSVs
    pending: str = NOT_RUN
    kept: str = "authors_lstm"  # the models `make reproduction` keeps (`--models`)
    sweep_on: str = AUTHORS  # where `make paper-sweeps` runs its sweep
    sweep_args: str = PAPER_OVERRIDES  # and with which overrides

    @property
    def pending_row(self) -> tuple[str, str, str]:
        return self.models, "–", self.pending


@dataclass(frozen=True)
class Experiment:
    """A paper figure or table as seqq reproduces it: which results it reads, and the parts of
    its figures, doc section and claim checks that are its own."""

    name: str  # `--experiment`; files: `<csv>_<dataset>_<model>.csv`, `<figure>_<models>.png`
    title: str  # as the paper names it, e.g. "Fig. 3", "Figs 5, 6"
    sweep: str  # the sweep preset whose results it reads (`make <sweep> SIZE=paper`)
    query: str  # the query kind of its rows
    methods: tuple[str, ...]  # whose rows its CSVs hold; other methods get their own table
    levels: tuple[int, ...] | None  # the levels S it reads (None: all there are)
    block: str  # the name in the doc's BEGIN/END markers
    figure: Callable[[Sequence[ModelRun]], dict[str, Figure]]  # panels -> {file stem: figure}
    # (one figure's file is `<name>_<models>`, several are `<stem>_<models>`)
    caption: Callable[[Sequence[ModelRun]], str]  # the figures' caption in the doc
    section: Callable[[ModelRun, str], list[str]]  # a panel's tables, given its CSVs' links
    claims: Callable[[ModelRun], str]  # the paper's claims beside the panel's numbers
    verdict: Callable[[Sequence[ModelRun]], str]  # the summary table's verdict
    temperatures: tuple[float, ...] | None = (1.0,)  # the model temperatures (None: all)
    cells: tuple[str, ...] = ()  # besides K, columns whose every value a history needs
    columns: tuple[str, ...] = FIG3_COLUMNS  # its CSV's columns (`export.COLUMNS`)
    split: str = ""  # a CSV per value of this CSV column, where one file would be too large
    csv: str = ""  # the experiment whose CSVs hold these very rows (same selection): linked
    datasets: tuple[str, ...] = ()  # only these datasets (default: all)
    levels_read: tuple[int, ...] = ()  # the levels its figure and claims read, where fewer
    # than it selects (Fig. 4a: S = 100 of the rows it shares with Figs 5/6): its summary row's
    pending: str = NOT_RUN  # the summary row's verdict until its first export
    results: str = "results"  # the sweep's folder it reads
    models: str = "authors_lstm"  # the models `make reproduction` keeps (`--models`)
    sweep_on: str = AUTHORS  # where `make paper-sweeps` runs its sweep
    sweep_args: str = PAPER_OVERRIDES  # and with which overrides
    # its CSV's rows (`committed.py`, columns already named as the results') back into the
    # results' shape where its own columns say more (Fig. 12's α and beams per step)
    from_csv: Callable[[pd.DataFrame], pd.DataFrame] = _same_rows
    # CSV columns of its own, beside `export.COLUMNS`: name -> its values from its rows
    own_columns: Mapping[str, Column] = field(default_factory=dict)
    histories: str = ""  # where its histories come from ("test"), for panels rebuilt from its
    # CSVs, which do not say (`committed.py`); "" where it varies by dataset

    @property
    def pending_row(self) -> tuple[str, str, str]:
        return "–", "–", self.pending

    @property
    def csv_name(self) -> str:
        """The `<csv>` of its CSVs' names: its own, or those of the experiment it shares."""
        return self.csv or self.name

    def summary(self, runs: Sequence[ModelRun]) -> tuple[str, ...]:
        """Its row of the summary table: models, what ran and the verdict."""
        return summary_row(self.title, runs, self.verdict(runs), self.levels_read)

    def runs(self, results: pd.DataFrame, models: Sequence[str] = ()) -> list[ModelRun]:
        """Its panels in `results`: one per (dataset, model), complete histories only."""
        return select(results, self.methods, self.query, self.levels, models,
                      self.temperatures, self.cells, self.datasets)


def reproduce(experiment: Experiment, paths: Sequence[str | Path], out: str | Path,
              doc: str | Path | None = None, models: Sequence[str] = (),
              datasets: Sequence[str] = (),
              summary: Mapping[str, Sequence[str]] | None = None) -> list[Path]:
    """Write the experiment's CSVs and figures into `out` (and its block of `doc`, and with
    `summary`, the default rows by title, its row of the doc's summary table) from the results
    under `paths`; return the files written."""
    return export(experiment, load_results(paths, datasets), out, doc, models, summary)


def export(experiment: Experiment, results: pd.DataFrame, out: str | Path,
           doc: str | Path | None = None, models: Sequence[str] = (),
           summary: Mapping[str, Sequence[str]] | None = None) -> list[Path]:
    """`reproduce` from a results table."""
    if doc is not None and summary is not None:  # refuse a doc without a summary table
        find_block(Path(doc), SUMMARY_BLOCK)  # before writing anything
    return write_runs(experiment, experiment.runs(results, models), out, doc, summary)


def write_runs(experiment: Experiment, runs: Sequence[ModelRun], out: str | Path,
               doc: str | Path | None = None,
               summary: Mapping[str, Sequence[str]] | None = None, csv: bool = True
               ) -> list[Path]:
    """The experiment's CSVs (unless `csv` is False: they are where its panels came from),
    figures, doc block and summary row from its panels."""
    out = Path(out)
    linked = bool(experiment.csv) or not csv  # CSVs holding these very rows: linked, not written
    if linked:
        csvs = [[out / name for name in csv_names(run, experiment.csv_name, experiment.columns,
                                                  experiment.split, experiment.own_columns)]
                for run in runs]
    else:
        csvs = [to_csv(run, out, experiment.name, experiment.columns, experiment.split,
                       experiment.own_columns) for run in runs]
    suffix = "_".join(sorted({model_slug(r.model) for r in runs}))
    drawn = experiment.figure(runs)  # one figure is named after the experiment, several by
    figures = {f"{stem if len(drawn) > 1 else experiment.name}_{suffix}": fig  # their keys
               for stem, fig in drawn.items()}
    written = [] if linked else [path for paths in csvs for path in paths]
    for stem, fig in figures.items():
        written += save(fig, out, stem)
    if doc is not None:
        folder = Path(os.path.relpath(out.resolve(), Path(doc).resolve().parent)).as_posix()
        update_doc(Path(doc), experiment.block,
                   _doc_block(experiment, runs, list(figures), csvs, folder), experiment.title)
        if summary is not None:
            update_summary(Path(doc), experiment.summary(runs),
                           {t: (t, *row) for t, row in summary.items()})
        written.append(Path(doc))
    return written


def _doc_block(experiment: Experiment, runs: Sequence[ModelRun], figures: Sequence[str],
               csvs: Sequence[Sequence[Path]], folder: str) -> str:
    """The doc's generated block; `folder`: where the figures and CSVs are, relative to the
    doc."""
    levels = sorted({s for r in runs for s in r.levels})
    at = ("no level S: coverage beam search runs to its α" if levels == [0] else
          f"level S = {levels[0]}" if len(levels) == 1 else
          f"levels S = {', '.join(map(str, levels))}")
    plural = "s" if len(figures) > 1 else ""
    written = (f"the figure{plural} and CSVs below were written by the same command" if not
               experiment.csv else f"the rows of {experiment.csv}'s CSVs, linked below; the "
               f"figure{plural} below {'were' if plural else 'was'} written by the same command")
    lines = [begin(experiment.block), "",
             f"Generated from {sum(len(r.rows) for r in runs):,} result rows ({at}); "
             f"{written}.", ""]
    for stem in figures:
        name = (f"{experiment.title} reproduction" if len(figures) == 1 else
                f"{experiment.title} reproduction: {stem}")
        lines += [f"![{name}]({folder}/{stem}.png)", ""]
    lines += [experiment.caption(runs), ""]
    for run, paths in zip(runs, csvs, strict=True):
        links = ", ".join(f"[`{p.name}`]({folder}/{p.name})" for p in paths)
        lines += [f"### {run.title}", "", *experiment.section(run, links),
                  experiment.claims(run), ""]
        if not run.others.empty:
            lines += others_section(run)
    lines.append(end(experiment.block))
    return "\n".join(lines)
