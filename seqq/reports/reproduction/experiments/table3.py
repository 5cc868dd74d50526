"""Table 3: KL on Amazon Reviews, blocked (the data is not here)."""

from __future__ import annotations

from seqq.reports.reproduction.reproduce import NotRun

EXPERIMENT = NotRun(
    title="Table 3", models="Amazon Reviews",
    why=("blocked: needs the Reviews data, which is not here"))
