"""Ground truth computed once per query and reused by every method, budget and re-run.

Entries are keyed by what determines the answer: dataset, model, temperature, the history's
tokens (hashed), the query label and the ground-truth options (docs/decisions.md §6). The cache is a
`PartStore`, so a killed sweep keeps every chunk of ground truth it finished.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

import seqq
from seqq.experiments.query_specs import QuerySpec
from seqq.experiments.store import PartStore
from seqq.models import SequenceModel

KEY = ["dataset", "model", "temperature", "history_hash", "label", "gt_options"]


def digest(obj: Any, length: int = 12) -> str:
    """A short stable hash of a JSON-able object."""
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:length]


@dataclass(frozen=True)
class Truth:
    value: float
    log_value: float
    kind: str
    samples: int
    rel_stderr: float | None
    model_calls: int
    entropy: float | None


class GroundTruthCache:
    def __init__(self, root: str, dataset: str, model: str, temperature: float,
                 options: Mapping[str, Any], seed: int):
        self.store = PartStore(root, KEY)
        self.context = {"dataset": dataset, "model": model, "temperature": float(temperature),
                        "gt_options": digest(dict(options))}
        self.options, self.seed = dict(options), seed
        self._known: dict[tuple[str, str], Truth] | None = None

    def _key(self, spec: QuerySpec) -> tuple[str, str]:
        return (spec.history.digest, spec.label)

    def _load(self) -> dict[tuple[str, str], Truth]:
        if self._known is None:
            table = self.store.read()
            self._known = {}
            if not table.empty:
                mine = (table[list(self.context)] == pd.Series(self.context)).all(axis=1)
                for row in table[mine].itertuples(index=False):
                    self._known[(row.history_hash, row.label)] = Truth(
                        row.value, row.log_value, row.kind, int(row.samples),
                        None if pd.isna(row.rel_stderr) else float(row.rel_stderr),
                        int(row.model_calls), None if pd.isna(row.entropy) else float(row.entropy),
                    )
        return self._known

    def get(self, model: SequenceModel, specs: Sequence[QuerySpec]) -> list[Truth]:
        """Ground truth of every spec, computing (and caching) only the missing ones."""
        known = self._load()
        missing = list({self._key(s): s for s in specs if self._key(s) not in known}.values())
        if missing:
            results = seqq.ground_truth_many(
                model, [list(s.history.tokens) for s in missing], [s.query for s in missing],
                seed=self.seed + int(digest([self._key(s) for s in missing], 8), 16) % 2**31,
                **self.options,
            )
            rows = []
            for spec, gt in zip(missing, results, strict=True):
                truth = Truth(float(gt.value), float(gt.log_value), gt.kind, int(gt.samples),
                              gt.rel_stderr, int(gt.model_calls), gt.entropy)
                known[self._key(spec)] = truth
                rows.append({**self.context, "history_hash": self._key(spec)[0],
                             "label": spec.label, **truth.__dict__})
            frame = pd.DataFrame(rows).astype({"rel_stderr": float, "entropy": float})
            self.store.write(frame, f"gt-{digest(self.context)}-{digest(rows)}")
        return [known[self._key(s)] for s in specs]


class NoGroundTruth:
    """For sweeps that only need estimates (Fig. 14/15): every truth is NaN, kind `none`."""

    def get(self, model: SequenceModel, specs: Sequence[QuerySpec]) -> list[Truth]:
        return [Truth(math.nan, math.nan, "none", 0, None, 0, None)] * len(specs)
