"""The kinds of job a sweep runs, and the folder of rows each writes under the sweep's folder.

Most sweeps ask queries (`results/`); two paper experiments are not query sweeps: Tables 3–6
measure the KL of the next symbol's distribution (`kl/`) and Fig. 1 asks when a sentence ends
(`sentence_end/`). The sweep engine runs a kind, `seqq query-sweep` reports it, and `seqq
report` reads its folder, each by this table, so a kind is named in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class JobKind:
    """A kind of sweep job: its name (the `sweep.<name>` setting that selects it, or
    `queries`) and the folder its rows go to."""

    name: str
    folder: str

    def rows(self, sweep_dir: str | Path) -> Path:
        """Where a sweep of this kind keeps its rows."""
        return Path(sweep_dir) / self.folder


QUERIES = JobKind("queries", "results")
SYMBOL_KL = JobKind("symbol_kl", "kl")
SENTENCE_END = JobKind("sentence_end", "sentence_end")
JOB_KINDS = {kind.name: kind for kind in (QUERIES, SYMBOL_KL, SENTENCE_END)}
