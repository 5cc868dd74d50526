"""`seqq report <results> [<results> ...] [--out DIR] [--figures a,b] [--datasets x,y]`.

Inputs are result part files or folders of them (a sweep's `results/`, or several SLURM jobs'
folders); they are merged with one row per (query, method, level S).

`--reproduction DIR [--experiment fig3] [--doc FILE] [--level S] [--models m,n]` writes one of
the paper's experiments beside seqq's instead (`seqq/reports/reproduction/`, `make reproduction`):
its CSVs per model, its figures, and the experiment's generated block and summary-table row of
FILE (docs/reproduction.md).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import NoReturn

from seqq.errors import ConfigError, ResultsError
from seqq.reports.build import build_report
from seqq.reports.figures import FIGURES
from seqq.reports.reproduction.registry import EXPERIMENTS, OWN_ROWS, SUMMARY
from seqq.reports.reproduction.reproduce import Experiment, OwnRows, export
from seqq.reports.tables import load_results
from seqq.results.jobs import JOB_KINDS
from seqq.results.store import part_files


class _Parser(argparse.ArgumentParser):
    """argparse whose usage mistakes reach `run_command` as one-line `ConfigError`s."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message}; see seqq report --help")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="seqq report", description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path,
                        help="result parts or folders of them, e.g. outputs/sweeps/demo/results")
    parser.add_argument("--out", type=Path, help="output folder (default: <sweep>/report)")
    parser.add_argument("--figures", help=f"comma-separated subset of: {', '.join(FIGURES)}")
    parser.add_argument("--datasets", help="comma-separated datasets to keep (default: all)")
    parser.add_argument("--reproduction", type=Path, metavar="DIR",
                        help="write an experiment's reproduction (<experiment>_<dataset>_<model>"
                             ".csv per model, the figure as PNG + PDF) into DIR instead of a "
                             "report")
    parser.add_argument("--experiment", metavar="NAME[,NAME...]",
                        help="with --reproduction: which (default: fig3), several from one "
                             "load of the results; "
                             + "; ".join(f"{e.name}: the paper's {e.title} from the "
                                         f"preset={e.sweep} sweep"
                                         for e in EXPERIMENTS.values())
                             + "".join(f"; {e.name}: the paper's {e.title} from the "
                                       f"preset={e.sweep} sweep's {e.results}/ folder"
                                       for e in OWN_ROWS.values()))
    parser.add_argument("--doc", type=Path, metavar="FILE",
                        help="with --reproduction: rewrite the experiment's generated block and "
                             "its row of the summary table in this Markdown file (e.g. "
                             "docs/reproduction.md)")
    parser.add_argument("--level", type=int, metavar="S",
                        help="with --reproduction: the level S of an experiment that "
                             "reads one (default: the experiment's, 100 for Fig. 3)")
    parser.add_argument("--models", help="with --reproduction: comma-separated models to keep, "
                                         "e.g. authors_lstm (default: all)")
    return parser


def _default_out(first: Path) -> Path:
    folders = {kind.folder for kind in JOB_KINDS.values()}  # a sweep's rows: report beside
    return (first.parent if first.name in folders else first) / "report"


def _check_inputs(paths: list[Path]) -> None:
    for path in paths:
        if not path.exists():
            raise ResultsError(f"{path} does not exist; pass a sweep's results folder, e.g. "
                               "outputs/sweeps/demo/results")
        if not part_files(path):
            raise ResultsError(f"{path} holds no result parts (*.parquet); pass a sweep's "
                               "results folder, e.g. outputs/sweeps/demo/results")


def _figures(names: str | None) -> list[str] | None:
    if names is None:
        return None
    chosen = [n for n in names.split(",") if n]
    unknown = [n for n in chosen if n not in FIGURES]
    if unknown or not chosen:
        raise ConfigError(f"--figures: unknown figures {unknown}; choose from "
                          f"{', '.join(FIGURES)}")
    return chosen


def _experiment(name: str, level: int | None) -> Experiment:
    """The experiment called `name`, at level S = `level` if given (only for an experiment
    that reads one level and owns its CSVs)."""
    if name not in EXPERIMENTS:
        raise ConfigError(f"argument --experiment: invalid choice: {name!r} (choose from "
                          f"{', '.join(EXPERIMENTS)}); see seqq report --help")
    experiment = EXPERIMENTS[name]
    if level is None:
        return experiment
    if experiment.levels is None or len(experiment.levels) != 1 or experiment.csv:
        one = [e.name for e in EXPERIMENTS.values()
               if e.levels is not None and len(e.levels) == 1 and not e.csv]
        raise ConfigError(f"--level: {name} reads several levels S; --level picks the one "
                          f"level of an experiment that reads one ({', '.join(one)})")
    return dataclasses.replace(experiment, levels=(level,))


def _own_rows(args: argparse.Namespace, experiment: OwnRows) -> int:
    """Rows of an experiment's own (the KL rows of Tables 3–6, Fig. 1's runs): their report,
    or the paper's experiment beside seqq's."""
    if args.figures or args.datasets or args.level is not None:
        raise ConfigError(f"{experiment.title}'s rows take no --figures, --datasets or --level")
    if args.reproduction is None:
        if args.experiment or args.doc or args.models:
            raise ConfigError("--experiment, --doc and --models go with --reproduction DIR")
        out = experiment.report(args.results, args.out or _default_out(args.results[0]))
        print(f"report: {out / 'summary.md'}")
        return 0
    if args.out or args.experiment not in (None, experiment.name):
        raise ConfigError(f"these rows reproduce --experiment {experiment.name} only (no --out)")
    models = [m for m in (args.models or "").split(",") if m]
    for path in experiment.export(args.results, args.reproduction, args.doc, models, SUMMARY):
        print(f"reproduction: {path}")
    return 0


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    figures = _figures(args.figures)
    _check_inputs(args.results)
    datasets = args.datasets.split(",") if args.datasets else None
    for experiment in OWN_ROWS.values():
        if experiment.reads(args.results):
            return _own_rows(args, experiment)
    if args.experiment in OWN_ROWS:
        own = OWN_ROWS[args.experiment]
        raise ConfigError(f"--experiment {own.name} reads a preset={own.sweep} sweep's "
                          f"rows (<sweep>/{own.results}), not query results")
    if args.reproduction is not None:
        if args.figures or args.out:
            raise ConfigError("--reproduction writes its own files: drop --figures and --out")
        models = [m for m in (args.models or "").split(",") if m]
        experiments = [_experiment(name, args.level)
                       for name in (args.experiment or "fig3").split(",")]
        table = load_results(args.results, datasets or ())
        for experiment in experiments:
            for path in export(experiment, table, args.reproduction, args.doc, models, SUMMARY):
                print(f"reproduction: {path}")
        return 0
    if args.experiment or args.doc or args.level is not None or args.models:
        raise ConfigError("--experiment, --doc, --level and --models go with --reproduction DIR")
    out = build_report(args.results, args.out or _default_out(args.results[0]), figures,
                       datasets)
    print(f"report: {out / 'summary.md'}")
    return 0
