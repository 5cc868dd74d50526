"""`python -m benchmarks [--mode quick|full] [--device cpu|cuda] [--e2e]`: run the suite and
rewrite RESULTS.md (see benchmarks/__init__.py for what each section measures);
`python -m benchmarks --paper-slice 0.02` runs only section (f)'s slice and keeps the others;
`python -m benchmarks --paper-run outputs/sweeps/fig3-paper` writes (f)'s measured run from a
paper-size sweep folder (its results, ground truth and runs.jsonl), `--judge-run DIR` the same for
a Fig. 3 sweep judged from scratch by the twisted rule;
`--sections g` (or `b,d`, ...) reruns only those sections, each then saying when it was measured;
`--sections h --mode quick|full` measures calibration against exact answers (`make calibration`);
`--sections k --judge-sweeps DIR...` checks the twisted judge (`make bench-judge`);
`--sections l --mode quick|full` measures the language-model path on SmolLM2 (`make bench-lm`);
`--lm-judge-run outputs/sweeps/large_lm-paper` writes (m), the judge's cost on SmolLM2 from the
truths and memory that sweep folder recorded (`make bench-lm-judges`)."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
import time
from pathlib import Path

import torch

from benchmarks import (
    ask_examples,
    calibration,
    chunks,
    e2e,
    gt_cost,
    judge,
    lm_cost,
    lm_judges,
    overhead,
    paper_run,
    paper_slice,
    rare,
    scaling,
    throughput,
)
from benchmarks.plans import PLANS
from benchmarks.report import Section, header, measured_at, subsections, write
from benchmarks.timing import set_clock

RESULTS = Path(__file__).parent / "RESULTS.md"
SECTIONS = {"a": throughput.run, "b": e2e.run, "c": scaling.run, "d": gt_cost.run,
            "e": chunks.run, "g": overhead.run, "h": calibration.run, "i": ask_examples.run,
            "j": rare.run, "k": judge.run, "l": lm_cost.run}
END_TO_END = {"b", "i"}  # minutes of real commands: only with --e2e or --sections
ON_REQUEST = {"h", "j", "k", "l"}  # minutes of estimates (calibration; exact DP and 2^16-call
# estimates; the judge against exact answers and the paper's truths)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--mode", choices=sorted(PLANS), default="quick")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, ...")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--clock", choices=("auto", "wall", "cpu"), default="auto",
                        help="cpu: this process's CPU time (auto: on a CPU run with one thread)")
    parser.add_argument("--e2e", action="store_true",
                        help="also time make demo and fig3 (b) and the README's seqq ask "
                             "examples (i)")
    parser.add_argument("--paper-slice", type=float, metavar="FRACTION",
                        help="only (f): time this fraction of fig3 SIZE=paper on Shakespeare")
    parser.add_argument("--paper-run", type=Path, metavar="SWEEP_DIR",
                        help="only (f): the calls and recorded time of a paper-size sweep "
                             "folder, e.g. outputs/sweeps/fig3-paper")
    parser.add_argument("--judge-run", type=Path, metavar="SWEEP_DIR",
                        help="only (f): the same for a Fig. 3 sweep run from scratch with "
                             "ground_truth.rule=twisted")
    parser.add_argument("--sections", type=_section_keys, metavar="KEYS",
                        help=f"only these sections, comma-separated ({','.join(SECTIONS)}); "
                             "the rest of RESULTS.md is kept")
    parser.add_argument("--calibration-budgets", type=_budgets, metavar="LO,HI",
                        help="(h) each run's budget drawn log-uniformly from LO to HI model "
                             "calls, e.g. 200,65536 (default: the mode's range)")
    parser.add_argument("--calibration-runs", type=int, metavar="N",
                        help="(h) with N runs of each query per method (default: the mode's)")
    parser.add_argument("--calibration-methods", type=_names, metavar="NAMES",
                        help="(h) only these methods, comma-separated, e.g. auto,wor,smc "
                             "(default: every method that takes a budget, and auto)")
    parser.add_argument("--judge-sweeps", type=Path, nargs="*", default=[], metavar="DIR",
                        help="(k) also compare these paper-size sweep folders' twisted truths "
                             "with the committed App. F.3 ones, e.g. outputs/sweeps/fig3-paper")
    parser.add_argument("--lm-judge-run", type=Path, metavar="SWEEP_DIR",
                        help="only (m): the judge's truths, calls and peak memory in a large_lm "
                             "sweep folder, e.g. outputs/sweeps/large_lm-paper")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = None if args.device == "auto" else args.device
    resolved = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    plan = PLANS[args.mode]
    changes = {"budgets": args.calibration_budgets, "methods": args.calibration_methods,
               "runs": args.calibration_runs, "neural_runs": args.calibration_runs}
    if any(changes.values()):
        plan = dataclasses.replace(plan, calibration=dataclasses.replace(
            plan.calibration, **{k: v for k, v in changes.items() if v}))
    clock = args.clock
    if clock == "auto":
        clock = "cpu" if resolved.type == "cpu" and torch.get_num_threads() == 1 else "wall"
    set_clock(clock)
    if args.lm_judge_run:
        section = lm_judges.run(args.lm_judge_run)
        write(args.out, None, [Section("m", section.title, [
            f"Written by `{shlex.join(['python', '-m', 'benchmarks', *argv])}`, "
            f"{measured_at()}.", "", *section.body])])
        print(f"benchmarks: wrote section (m) of {args.out}", file=sys.stderr)
        return 0
    if args.paper_slice or args.paper_run or args.judge_run:
        parts = subsections(args.out, "f")
        if args.paper_run:
            parts[paper_run.HEADING] = paper_run.run(args.paper_run)
        if args.judge_run:
            parts[paper_run.JUDGE_HEADING] = paper_run.from_scratch(args.judge_run)
        if args.paper_slice:
            parts[paper_slice.HEADING] = paper_slice.run(args.paper_slice, device)
        write(args.out, None, [paper_cost(parts)])
        print(f"benchmarks: wrote section (f) of {args.out}", file=sys.stderr)
        return 0
    command = shlex.join(["python", "-m", "benchmarks", *argv])
    head = header(command, resolved, args.mode, clock)
    sections: list[Section] = []
    started = time.perf_counter()
    for key, run in SECTIONS.items():
        if wanted(key, args.sections, args.e2e):
            print(f"benchmarks: section ({key}) ...", file=sys.stderr, flush=True)
            section = (run(plan, device, args.judge_sweeps) if key == "k"
                       else run(plan, device))
            # a section kept across runs says when, where and by what it was measured: all of
            # a --sections run (the header stays the last full run's), and (b), (i) always
            if args.sections is not None or key in END_TO_END:
                section = Section(key, section.title, [
                    f"Measured by `{command}` ({resolved}, {torch.get_num_threads()} threads), "
                    f"{measured_at()}.", "", *section.body])
            sections.append(section)
    if args.sections is not None:
        write(args.out, None, sections)
        print(f"benchmarks: wrote sections {', '.join(args.sections)} of {args.out}",
              file=sys.stderr)
        return 0
    head.append(f"Suite wall time: {time.perf_counter() - started:.0f} s.\n")
    write(args.out, head, sections)
    print(f"benchmarks: wrote {args.out}", file=sys.stderr)
    return 0


def paper_cost(parts: dict[str, list[str]]) -> Section:
    """(f): the measured run, then the slice, whichever of them have been written."""
    body: list[str] = []
    for heading in (paper_run.HEADING, paper_run.JUDGE_HEADING, paper_slice.HEADING):
        if heading in parts:
            body += [heading, "", *parts[heading]]
    return Section("f", paper_run.TITLE, body)


def wanted(key: str, sections: list[str] | None, e2e: bool) -> bool:
    """Whether a run measures section `key`: those named by --sections, else all but those
    END_TO_END (minutes of real commands; with --e2e) and ON_REQUEST (only when named)."""
    if sections is not None:
        return key in sections
    return (key not in END_TO_END or e2e) and key not in ON_REQUEST


def _budgets(text: str) -> tuple[int, int]:
    try:
        budgets = tuple(int(x) for x in text.split(","))
    except ValueError:
        budgets = ()
    if len(budgets) != 2 or not 1 <= budgets[0] <= budgets[1]:
        raise argparse.ArgumentTypeError(f"budgets are a range LO,HI of model calls, e.g. "
                                         f"200,65536; got {text!r}")
    return budgets  # type: ignore[return-value]


def _names(text: str) -> tuple[str, ...]:
    from benchmarks.calibration import budgeted_methods

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in budgeted_methods()]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown calibration methods {unknown}; choose from "
                                         f"{', '.join(budgeted_methods())}")
    return names


def _section_keys(text: str) -> list[str]:
    keys = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SECTIONS]
    if unknown or not keys:
        raise argparse.ArgumentTypeError(
            f"unknown section {', '.join(unknown) or repr(text)}; choose from {', '.join(SECTIONS)}"
            " ((f) is --paper-slice)")
    return keys

