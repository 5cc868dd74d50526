"""Progress bars in a log: where stderr is a pipe, nested bars leave no escape codes."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

NESTED = """
from seqq.progress import progress_bar
with progress_bar(total=3, desc="outer") as outer:
    for _ in range(3):
        for _ in progress_bar(range(2), desc="inner"):
            pass
        outer.update(1)
"""


def test_nested_bars_piped_to_a_log_leave_no_escape_codes() -> None:
    """tqdm moves the cursor between a bar and the one inside it with ESC[A, which a log file
    keeps as garbage: piped, the inner bar is not drawn, the outer one still counts to the
    end, in ASCII."""
    run = subprocess.run([sys.executable, "-c", NESTED], cwd=REPO, capture_output=True,
                         text=True, timeout=120, check=True)
    assert "\x1b[" not in run.stderr, repr(run.stderr)
    assert "inner" not in run.stderr and "outer: 100%" in run.stderr and "3/3" in run.stderr
    assert run.stderr.isascii()
