"""`seqq report <results> [<results> ...] [--out DIR] [--figures a,b]`.

Inputs are result part files or folders of them (a sweep's `results/`, or several SLURM jobs'
folders); they are merged with one row per (query, method, budget level).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from seqq.reports.build import build_report
from seqq.reports.figures import FIGURES


def _default_out(first: Path) -> Path:
    return (first.parent if first.name == "results" else first) / "report"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="seqq report", description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="result parts or folders")
    parser.add_argument("--out", type=Path, help="output folder (default: <sweep>/report)")
    parser.add_argument("--figures", help=f"comma-separated subset of: {', '.join(FIGURES)}")
    parser.add_argument("--datasets", help="comma-separated datasets to keep (default: all)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    figures = args.figures.split(",") if args.figures else None
    datasets = args.datasets.split(",") if args.datasets else None
    out = build_report(args.results, args.out or _default_out(args.results[0]), figures,
                       datasets)
    print(f"report written to {out}/summary.md")
    return 0
