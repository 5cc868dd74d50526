"""Table 6: KL on Mobile Apps, blocked (the data is not here)."""

from __future__ import annotations

from seqq.reports.reproduction.reproduce import NotRun

EXPERIMENT = NotRun(
    title="Table 6", models="Mobile Apps",
    why=("blocked: needs the Mobile Apps data, which is not here"))
