"""Progress bars: every bar seqq draws is made here, so that logs stay readable.

On a terminal a bar opened while another runs (ground truth inside a sweep's chunk) is drawn
below it, and tqdm moves the cursor up and down between them with escape codes (`ESC[A`). A log
file or a pipe keeps those codes as garbage between lines, so where stderr is not a terminal a
bar inside another is not shown (the outer one still counts), and bars are drawn in ASCII.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from tqdm.auto import tqdm


def progress_bar(iterable: Iterable[Any] | None = None, *, disable: bool = False,
                 **options: Any) -> tqdm:
    """`tqdm(iterable, disable=..., **options)`, plain where stderr is not a terminal: no bar
    inside another (no cursor movements), ASCII, no resizing to a terminal's width."""
    if not sys.stderr.isatty():
        disable = disable or bool(tqdm._instances)  # live bars only: tqdm drops disabled ones
        options |= {"ascii": True, "dynamic_ncols": False}
    return tqdm(iterable, disable=disable, **options)
