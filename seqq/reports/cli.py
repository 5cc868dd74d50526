"""`seqq report <results> [<results> ...] [--out DIR] [--figures a,b] [--datasets x,y]`.

Inputs are result part files or folders of them (a sweep's `results/`, or several SLURM jobs'
folders); they are merged with one row per (query, method, budget level).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn

from seqq.errors import ConfigError, ResultsError
from seqq.experiments.store import part_files
from seqq.reports.build import build_report
from seqq.reports.figures import FIGURES


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
    return parser


def _default_out(first: Path) -> Path:
    return (first.parent if first.name == "results" else first) / "report"


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


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    figures = _figures(args.figures)
    _check_inputs(args.results)
    datasets = args.datasets.split(",") if args.datasets else None
    out = build_report(args.results, args.out or _default_out(args.results[0]), figures,
                       datasets)
    print(f"report: {out / 'summary.md'}")
    return 0
