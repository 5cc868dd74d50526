"""RESULTS.md: a header that says where and how the numbers were taken, then one section each."""

from __future__ import annotations

import datetime
import math
import os
import platform
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from seqq.process import ENV, HUGE_PAGES_ENV


@dataclass(frozen=True)
class Section:
    key: str  # a, b, c, ...
    title: str
    body: list[str]

    def markdown(self) -> str:
        return "\n".join([f"## ({self.key}) {self.title}", "", *self.body, ""])


def describe(doc: str) -> str:
    """A section module's docstring without its "(x) " label: the section's explanation."""
    return doc.split(") ", 1)[1].strip()


def fmt_rate(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:,.0f}"


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.2f}×"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def measured_at() -> str:
    """When and at which commit a section kept across runs was measured."""
    return (f"{datetime.datetime.now().astimezone().isoformat(timespec='seconds')}, "
            f"git commit {_git('rev-parse', '--short', 'HEAD')}")


CLOCK_NOTES = {
    "wall": "wall time (a GPU's work waited for)",
    "cpu": "this process's CPU time (one thread: time-slicing by other processes on a shared "
           "machine does not count; their cache contention still does)",
}


def header(command: str, device: torch.device, mode: str, clock: str = "wall") -> list[str]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    commit = _git("rev-parse", "--short", "HEAD")
    if _git("status", "--porcelain", "--untracked-files=no"):
        commit += " (with uncommitted changes)"
    gpu = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
    load = "?"
    if hasattr(os, "getloadavg"):
        averages = os.getloadavg()
        load = ", ".join(f"{x:.1f}" for x in averages)
        if averages[0] > 1.5:  # more than this run alone
            load += " — a shared machine: other processes ran alongside these measurements"
    return [
        "# seqq benchmark results",
        "",
        "Written by `make bench` (`python -m benchmarks`); do not edit by hand.",
        "",
        f"- command: `{command}` (mode `{mode}`)",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- git commit: {commit}",
        f"- machine: {platform.node()}, {cpu_model()}, {os.cpu_count()} cores "
        f"({usable} usable), {platform.system()} {platform.release()}",
        f"- torch {torch.__version__}, {torch.get_num_threads()} threads, device {device}{gpu}",
        f"- load average at start (1/5/15 min): {load}",
        f"- host memory: huge pages for big CPU tensors "
        f"{'on' if os.environ.get(HUGE_PAGES_ENV) == '1' else 'off'} "
        f"({HUGE_PAGES_ENV}={os.environ.get(HUGE_PAGES_ENV, 'unset')}), freed heap memory "
        f"{'not ' if os.environ.get(ENV) == '0' else ''}kept (seqq/process.py)",
        f"- clock: {CLOCK_NOTES[clock]}",
        "",
    ]


def fmt_hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def subsections(path: Path, key: str) -> dict[str, list[str]]:
    """The `### ` subsections of section `key` of an existing RESULTS.md, {heading: lines}, so
    that a section measured in parts (f) can rewrite one part and keep the others."""
    section = _read(path)[1].get(key, "")
    parts = re.split(r"^(?=### )", section, flags=re.M)[1:]
    return {part.splitlines()[0]: part.splitlines()[2:] for part in parts}


def write(path: Path, head: list[str] | None, sections: Sequence[Section]) -> None:
    """Write `sections` into RESULTS.md, keeping the sections of the file this run did not
    measure (the paper slice (f) is run on its own) and, with `head` None, its header."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old_head, old = _read(path)
    merged = {**old, **{s.key: s.markdown() for s in sections}}
    text = "\n".join(head) + "\n" if head is not None else old_head
    # each section ends in one newline and is followed by one blank line, however often rewritten
    path.write_text(text + "\n".join(merged[k].rstrip("\n") + "\n" for k in sorted(merged)))


def _read(path: Path) -> tuple[str, dict[str, str]]:
    """(header, {key: section markdown}) of an existing RESULTS.md."""
    if not path.is_file():
        return "", {}
    head, *parts = re.split(r"^(?=## \()", path.read_text(), flags=re.M)
    return head, {part[4]: part for part in parts}
