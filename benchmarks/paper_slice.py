"""(f) A slice of `make fig3 SIZE=paper` on Shakespeare, timed, and the
whole projected from it. The slice is the same sweep (preset=fig3 size=paper: K = 3..11,
hybrid / importance / beam at S = 100, the paper's estimated ground truth) on the paper
authors' Shakespeare LSTM, with `sweep.histories` cut to a fraction of the paper's N = 1000.
Histories are independent, so cost is linear in N (section (c)) and the whole is the slice
divided by its fraction."""

from __future__ import annotations

import datetime
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmarks.report import describe, fmt_hours, table
from seqq.results.store import read_parts

PAPER_HISTORIES = 1000  # seqq/conf/preset/fig3.yaml: sweep.histories = ${by_size:20,1000}
SEQQ = [sys.executable, "-m", "seqq.commands.cli"]


def command(root: str, histories: int, device: str | None) -> list[str]:
    """The fig3 paper-size sweep on Shakespeare (the authors' LSTM), cut to `histories`."""
    return [*SEQQ, "query-sweep", "preset=fig3", "size=paper", "dataset=shakespeare",
            "model=authors", f"sweep.histories={histories}", "sweep.report=false",
            "sweep.progress=false", f"sweep.root={root}", f"device={device or 'auto'}"]


@dataclass
class SliceCost:
    queries: int  # (history, K) pairs
    method_calls: dict[str, int]  # model calls per method, summed over the slice
    method_seconds: dict[str, float]  # estimator wall time per method (the sweep's `wall_s`)
    truth_calls: dict[str, int]  # ground-truth calls per kind (exact, estimated)
    truth_queries: dict[str, int]


def read_costs(sweep_dir: Path) -> SliceCost:
    """Calls and estimator seconds from a finished sweep's results and ground-truth files."""
    results = pd.concat([pd.read_parquet(f) for f in sorted((sweep_dir / "results").glob(
        "*.parquet"))])
    truth = read_parts(sorted((sweep_dir / "ground_truth").glob("*.parquet")))
    by_method = results.groupby("method")
    by_kind = truth.groupby("kind")
    return SliceCost(
        queries=int(results[["history_hash", "K"]].drop_duplicates().shape[0]),
        method_calls={m: int(c) for m, c in by_method["model_calls"].sum().items()},
        method_seconds={m: float(s) for m, s in by_method["wall_s"].sum().items()},
        truth_calls={k: int(c) for k, c in by_kind["model_calls"].sum().items()},
        truth_queries={k: int(n) for k, n in by_kind.size().items()})


HEADING = "### A slice of the sweep, projected"


def run(fraction: float, device: str | None) -> list[str]:
    """The slice's subsection of (f): run it, read its costs, project them to N = 1000."""
    histories = max(1, round(PAPER_HISTORIES * fraction))
    scale = PAPER_HISTORIES / histories
    with tempfile.TemporaryDirectory(prefix="seqq-paper-slice-") as root:
        args = command(root, histories, device)
        print(f"  paper slice: {histories} histories ...", file=sys.stderr, flush=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode:
            return [describe(__doc__), "", f"The slice failed (exit code {done.returncode}): "
                    f"`{done.stderr.strip()[-300:]}`"]
        cost = read_costs(Path(root) / "fig3-paper")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return body(fraction, histories, scale, wall, cpu, cost, args)


def body(fraction: float, histories: int, scale: float, wall: float, cpu: float,
         cost: SliceCost, args: list[str]) -> list[str]:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    rows = [[m, f"{c:,}", f"{cost.method_seconds[m]:.1f}", f"{c * scale:,.0f}",
             fmt_hours(cost.method_seconds[m] * scale)] for m, c in cost.method_calls.items()]
    rows += [[f"ground truth ({kind}, {cost.truth_queries[kind]} queries)", f"{c:,}", "-",
              f"{c * scale:,.0f}", "-"] for kind, c in cost.truth_calls.items()]
    calls = sum(cost.method_calls.values()) + sum(cost.truth_calls.values())
    rows.append(["**whole sweep**", f"{calls:,}", f"{wall:.0f} (wall), {cpu:.0f} (CPU)",
                 f"{calls * scale:,.0f}", f"{fmt_hours(wall * scale)} (wall), "
                 f"{fmt_hours(cpu * scale)} (CPU)"])
    return [describe(__doc__), "",
            f"- command: `{shlex.join(['seqq', *args[len(SEQQ):]])}`",
            f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}; "
            f"load average at the end (1/5/15 min): {load} (a shared machine); "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}",
            f"- slice: {histories} of the paper's {PAPER_HISTORIES} histories "
            f"({histories / PAPER_HISTORIES:.0%}; asked for {fraction:.0%}) × K = 3..11 = "
            f"{cost.queries} queries; projection factor {scale:g}", "",
            *table(["part", "model calls (slice)", "seconds (slice)", "calls (N = 1000)",
                    "time (N = 1000)"], rows), "",
            f"Projected wall time of the whole Shakespeare fig3 at N = {PAPER_HISTORIES} on "
            f"this machine: **{fmt_hours(wall * scale)}** for the authors' LSTM. `make fig3 "
            "SIZE=paper` also sweeps seqq's own paper Shakespeare LSTM, of the same shape "
            "(2 × 128, V ≈ 67), so its Shakespeare part takes about twice that; the other "
            "datasets' LSTMs (hidden 512) cost more per call. Ground truth dominates: the "
            "estimators' calls are a small share of the sweep's."]
