"""(i) The README's `seqq ask` examples, end to end, as a user runs them: each command in a fresh
process (imports, model load, the question), its wall time and its peak memory, with the answer
and the seconds `seqq ask` itself reports after loading. SmolLM2 runs first with an empty model
cache (the one-time GGUF conversion, `seqq cache`) and then once more from the cache; the
README quotes these numbers."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.plans import Plan
from benchmarks.report import Section, describe, table

SEQQ = [sys.executable, "-m", "seqq.commands.cli", "ask"]
HISTORY_FILE = "h.txt"
HISTORY_TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?\n"
# (what it shows, seqq ask's arguments); SmolLM2's first example runs twice (empty cache, cached)
EXAMPLES = [
    ("SmolLM2, first load (empty cache)",
     ["--model", "smollm2", "--history", "The capital of France is", 'choice(" Paris", " Lyon")']),
    ("SmolLM2, from the cache",
     ["--model", "smollm2", "--history", "The capital of France is", 'choice(" Paris", " Lyon")']),
    ("SmolLM2, a regex",
     ["--model", "smollm2", "--history", "The Eiffel Tower was completed in the year",
      "text ~ / 1[0-9]{3}/ within 5 prefix"]),
    ("SmolLM2, estimated",
     ["--model", "smollm2", "--history", "Once upon a time", 'tau(".") <= 10']),
    ("SmolLM2, no leading space (hint)",
     ["--model", "smollm2", "--history", "The year was", "text ~ /[0-9]+/ within 4 prefix"]),
    ("SmolLM2, leading space",
     ["--model", "smollm2", "--history", "The year was", "text ~ / ?[0-9]+/ within 4 prefix"]),
    ("authors' Shakespeare LSTM",
     ["--model", "authors-shakespeare", "--history-file", HISTORY_FILE, 'tau("\\n") <= 30']),
]


def _run(args: list[str], env: dict[str, str], folder: str) -> tuple[float, int, dict | None]:
    """(wall seconds, peak resident MB of this command alone, its JSON answer or None)."""
    out, err = Path(folder, "stdout"), Path(folder, "stderr")
    start = time.perf_counter()
    with out.open("w") as stdout, err.open("w") as stderr:
        child = subprocess.Popen([*SEQQ, *args, "--json"], env=env, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own resource usage
    wall = time.perf_counter() - start
    peak = usage.ru_maxrss // 1024  # kB on Linux
    if os.waitstatus_to_exitcode(status):
        print(err.read_text()[-2000:], file=sys.stderr)
        return wall, peak, None
    return wall, peak, json.loads(out.read_text())


def run(plan: Plan, device: str | None) -> Section:
    rows, load = [], os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="seqq-ask-") as folder:
        Path(folder, HISTORY_FILE).write_text(HISTORY_TEXT)
        env = {**os.environ, "SEQQ_CACHE": str(Path(folder, "cache"))}
        for name, args in EXAMPLES:
            args = [str(Path(folder, a)) if a == HISTORY_FILE else a for a in args]
            args += ["--device", device] if device else []
            wall, peak, result = _run(args, env, folder)
            args = args[:-2] if device else args
            shown = ["seqq", "ask", *(HISTORY_FILE if a.endswith(HISTORY_FILE) else a
                                      for a in args)]
            if result is None:
                rows.append([name, f"`{shlex.join(shown)}`", f"{wall:.1f}", "-", "failed", "-"])
                continue
            answer = f"{result['estimate']:.6g}" + (
                " (exact)" if result["exact"] else f" ± {result['stderr']:.2g}")
            rows.append([name, f"`{shlex.join(shown)}`", f"{wall:.1f}", f"{peak:,}",
                         f"{answer}, {result['method']}, {result['model_calls']:,} calls",
                         f"{result['seconds']:.2f}"])
    header = ["example", "command", "wall s", "peak MB", "answer", "s after loading"]
    body = [describe(__doc__), "", f"Load average (1 min) at the start and the end: {load:.1f} "
            f"and {os.getloadavg()[0]:.1f}, on {os.cpu_count()} CPUs.", "", *table(header, rows)]
    return Section("i", "`seqq ask` examples end to end", body)
