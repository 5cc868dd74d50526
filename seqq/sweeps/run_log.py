"""Every invocation of a sweep appends one line to `<sweep>/runs.jsonl`: when it started and
ended, its wall and CPU time, its peak memory, the parts it found and left, and how it ended.
A sweep that spans many invocations (a paper-size run resumed across days, the jobs of a SLURM
array) then has a measured cost, summed from its own record, instead of a projection.

SIGTERM (what `kill` and SLURM's time limit send) is turned into the same interrupt as Ctrl-C
while a sweep runs, so a terminated job also saves its parts and writes its line.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from seqq.sweeps.provenance import git_commit

RUNS_FILE = "runs.jsonl"


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def _gpu() -> str | None:
    """The machine's GPU, if any: a run's wall time means little without it."""
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


@contextmanager
def recorded(sweep_dir: Path, **facts: Any) -> Iterator[dict[str, Any]]:
    """Time the block and append its record to `<sweep_dir>/runs.jsonl` however it ends; the
    caller adds what it learns (parts saved, ...) to the yielded dict."""
    record: dict[str, Any] = {**facts, "argv": sys.argv[1:], "started": _now(),
                              "host": platform.node(), "git_commit": git_commit(),
                              "threads": torch.get_num_threads(), "gpu": _gpu()}
    wall, cpu = time.perf_counter(), time.process_time()
    status = "failed"
    try:
        with sigterm_as_interrupt():
            yield record
        status = "complete"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        record.update(status=status, finished=_now(),
                      wall_s=round(time.perf_counter() - wall, 1),
                      cpu_s=round(time.process_time() - cpu, 1), peak_rss_gb=_peak_rss_gb())
        _append(Path(sweep_dir) / RUNS_FILE, record)


def _peak_rss_gb() -> float:
    """The process's peak resident memory so far, in GB (Linux reports kB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)


def _append(path: Path, record: dict[str, Any]) -> None:
    """One line per invocation; a single small write, so concurrent jobs do not interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, default=str) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Inside the block SIGTERM raises KeyboardInterrupt (main thread only: elsewhere Python
    cannot set handlers, and the block runs with SIGTERM's usual meaning)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def read_runs(sweep_dir: str | Path) -> pd.DataFrame:
    """The invocations recorded in a sweep folder, oldest first (empty if none)."""
    path = Path(sweep_dir) / RUNS_FILE
    if not path.exists():
        return pd.DataFrame()
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return pd.DataFrame(lines)
