"""(b) End to end: wall time of `make demo` and of the fig3 preset at N = 100 on Shakespeare,
each into a fresh sweep folder (a rerun would otherwise resume from stored results). The demo's
LSTM is trained first only when its checkpoint is missing (training is capped at
TRAIN_MINUTES, so its time is reported apart)."""

from __future__ import annotations

import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.plans import Plan
from benchmarks.report import Section, describe, table

CHECKPOINTS = "outputs/checkpoints/quick"  # `make demo`'s SIZE=quick checkpoints
SEQQ = [sys.executable, "-m", "seqq.commands.cli"]
TRAIN = ["train", "dataset=shakespeare", f"checkpoint_dir={CHECKPOINTS}", "trainer=ci",
         "trainer.max_minutes=3", "model.hidden_size=128"]


def _timed(args: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    return time.perf_counter() - start, done.returncode


def commands(root: str, device: str | None) -> dict[str, list[str]]:
    model_device = [f"model.device={device}"] if device else []
    sweep = ["query-sweep", f"checkpoint_dir={CHECKPOINTS}", f"sweep.root={root}", *model_device]
    return {
        "demo sweep (`make demo` after training)": [*SEQQ, *sweep, "preset=demo"],
        "fig3 preset, Shakespeare, N = 100": [*SEQQ, *sweep, "preset=fig3",
                                             "dataset=shakespeare", "sweep.histories=100",
                                             "sweep.report=false"],
    }


def run(plan: Plan, device: str | None) -> Section:
    rows = []
    if not Path(CHECKPOINTS, "shakespeare_lstm.pt").is_file():
        seconds, code = _timed([*SEQQ, *TRAIN])
        rows.append(["train the demo LSTM (missing)", shlex.join(["seqq", *TRAIN]),
                     f"{seconds:.0f}", code])
    with tempfile.TemporaryDirectory(prefix="seqq-bench-") as root:
        for name, args in commands(root, device).items():
            seconds, code = _timed(args)
            rows.append([name, shlex.join(["seqq", *args[len(SEQQ):]]), f"{seconds:.0f}", code])
    body = [describe(__doc__), "", "Measured only by `make bench-e2e` or `python -m benchmarks "
            "--sections b`; a plain `make bench` keeps this section.", "",
            *table(["run", "command", "wall seconds", "exit code"], rows)]
    return Section("b", "End-to-end wall time", body)
