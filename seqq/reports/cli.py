"""`seqq report <results> [<results> ...] [--out DIR] [--figures a,b] [--datasets x,y]`.

Inputs are result part files or folders of them (a sweep's `results/`, or several SLURM jobs'
folders); they are merged with one row per (query, method, budget level).

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
from seqq.reports.kl import is_kl, write_kl_report
from seqq.reports.reproduction.registry import EXPERIMENTS, KL_TABLES, SUMMARY
from seqq.reports.reproduction.reproduce import Experiment, export
from seqq.reports.tables import load_results
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
                                         f"experiment={e.sweep} sweep"
                                         for e in EXPERIMENTS.values())
                             + "".join(f"; {e.name}: the paper's {e.title} from the "
                                       f"experiment={e.sweep} sweep's {e.results}/ folder"
                                       for e in KL_TABLES.values()))
    parser.add_argument("--doc", type=Path, metavar="FILE",
                        help="with --reproduction: rewrite the experiment's generated block and "
                             "its row of the summary table in this Markdown file (e.g. "
                             "docs/reproduction.md)")
    parser.add_argument("--level", type=int, metavar="S",
                        help="with --reproduction: the budget level S of an experiment that "
                             "reads one (default: the experiment's, 100 for Fig. 3)")
    parser.add_argument("--models", help="with --reproduction: comma-separated models to keep, "
                                         "e.g. authors_lstm (default: all)")
    return parser


def _default_out(first: Path) -> Path:
    return (first.parent if first.name in ("results", "kl") else first) / "report"


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
    """The experiment called `name`, at budget level `level` if given (only for an experiment
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
        raise ConfigError(f"--level: {name} reads several budget levels; --level picks the one "
                          f"level of an experiment that reads one ({', '.join(one)})")
    return dataclasses.replace(experiment, levels=(level,))


def _kl(args: argparse.Namespace) -> int:
    """The KL experiment's rows (Tables 3–6): its report, or Tables 4/5 beside the paper's."""
    if args.figures or args.datasets or args.level is not None:
        raise ConfigError("KL rows (Tables 3-6) take no --figures, --datasets or --level")
    if args.reproduction is None:
        if args.experiment or args.doc or args.models:
            raise ConfigError("--experiment, --doc and --models go with --reproduction DIR")
        out = write_kl_report(args.results, args.out or _default_out(args.results[0]))
        print(f"report: {out / 'summary.md'}")
        return 0
    name = args.experiment or next(iter(KL_TABLES))
    if args.out or name not in KL_TABLES:
        raise ConfigError(f"KL rows reproduce --experiment {', '.join(KL_TABLES)} only (no --out)")
    models = [m for m in (args.models or "").split(",") if m]
    for path in KL_TABLES[name].export(args.results, args.reproduction, args.doc, models,
                                       SUMMARY):
        print(f"reproduction: {path}")
    return 0


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    figures = _figures(args.figures)
    _check_inputs(args.results)
    datasets = args.datasets.split(",") if args.datasets else None
    if is_kl(args.results):
        return _kl(args)
    if args.experiment in KL_TABLES:
        raise ConfigError(f"--experiment {args.experiment} reads a kl sweep's KL rows "
                          "(<sweep>/kl, from seqq query-sweep experiment=kl), not query results")
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
