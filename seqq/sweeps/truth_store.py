"""Ground truth computed once per query and reused by every method, level S and re-run.

Entries are keyed by what determines the answer: dataset, model, temperature, the history's
tokens (hashed), the query label and the ground-truth options (docs/decisions.md §6). The store
is a `PartStore`, so a killed sweep keeps every chunk of ground truth it finished.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

import seqq
from seqq.estimators.estimate import GroundTruth
from seqq.estimators.surrogates import distilled, twistable
from seqq.models import SequenceModel
from seqq.results.store import PartStore
from seqq.sweeps.query_specs import QuerySpec

KEY = ["dataset", "model", "temperature", "history_hash", "label", "gt_options"]
NO_TRUTH_RULE = "none: estimates only, no RAE"


def digest(obj: Any, length: int = 12) -> str:
    """A short stable hash of a JSON-able object."""
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:length]


def describe_rule(options: Mapping[str, Any]) -> str:
    """The ground-truth rule in words (the `truth_rule` column and the report's summary);
    options not given take `ground_truth_many`'s defaults."""
    params = inspect.signature(seqq.ground_truth_many).parameters.values()
    o = {p.name: p.default for p in params if p.default is not p.empty} | dict(options)
    if o["rule"] == "absolute":
        estimate = (f"importance sampling under the restricted proposal: {o['s_low']:,} "
                    f"samples, then {o['s_step']:,} more at a time until the per-sample weight "
                    f"variance is below δ = {o['delta']:g}, at most {o['s_high']:,} samples")
    elif o["rule"] == "sampled":
        estimate = (f"importance sampling under the restricted proposal, paths drawn through "
                    f"a prefix trie held within a byte cap: {o['s_low']:,} samples, then "
                    f"rounds until the relative standard error is below {o['rel_tol']:g}, at "
                    f"most {o['s_high']:,} samples")
    elif o["rule"] == "twisted":
        estimate = (f"sampling without replacement twisted by an HPYP surrogate distilled from "
                    f"the model (twisted WOR, sum-and-sample over the prefix trie) until the "
                    f"relative standard error is below {o['rel_tol']:g}, exact when it exhausts "
                    f"the query, at most {o['s_high']:,}·(K−1) model calls")
    else:
        estimate = (f"sampling without replacement (sum-and-sample over the prefix trie) until "
                    f"the relative standard error is below {o['rel_tol']:g}, exact when it "
                    f"exhausts the query, at most {o['s_high']:,}·(K−1) model calls")
    return (f"the model's own exact answer where it has one (forward DP); else exact "
            f"enumeration when it costs at most {o['exact_max_calls']:,.0f} model calls; "
            f"otherwise {estimate}")


@dataclass
class JudgeSurrogate:
    """The twisted rule's surrogate in a sweep (docs/decisions.md §43): the HPYP its
    `surrogate: distilled` methods use (`distilled` keeps one per model, order and seed),
    distilled from the untempered model on first use only, kept in seqq's cache (`distilled`;
    its listing names the sweep's model id), and tempered like the model it judges. None where
    no surrogate can steer (`twistable`)."""

    model: SequenceModel
    vocab: Sequence[str]
    bos: int | None
    seed: int
    name: str
    temperature: float = 1.0
    _tempered: Any = field(default=None, init=False, repr=False)

    def __call__(self) -> Any:
        if not twistable(len(self.vocab)):
            return None
        if self._tempered is None:
            surrogate = distilled(self.model, self.vocab, self.bos, seed=self.seed,
                                  source=self.name)
            self._tempered = (surrogate if self.temperature == 1
                              else surrogate.tempered(self.temperature))
        return self._tempered


class GroundTruthStore:
    def __init__(self, root: str, dataset: str, model: str, temperature: float,
                 options: Mapping[str, Any], seed: int,
                 judge: Callable[[], Any] | None = None):
        self.store = PartStore(root, KEY)
        self.context = {"dataset": dataset, "model": model, "temperature": float(temperature),
                        "gt_options": digest(dict(options))}
        self.options, self.seed = dict(options), seed
        self.judge = judge  # the twisted rule's surrogate, asked for only when a truth is due
        self.rule = describe_rule(self.options)
        self._known: dict[tuple[str, str], GroundTruth] | None = None
        self.computed = 0  # truths this object computed (the rest came from the store)

    def refined(self, update: Mapping[str, Any]) -> GroundTruthStore:
        """The store of the same model's truths under other options (`refine.py`'s finer ones),
        beside this one."""
        c = self.context
        return GroundTruthStore(str(self.store.root), c["dataset"], c["model"], c["temperature"],
                                {**self.options, **update}, self.seed, self.judge)

    def _key(self, spec: QuerySpec) -> tuple[str, str]:
        return (spec.history.digest, spec.label)

    def _load(self) -> dict[tuple[str, str], GroundTruth]:
        if self._known is None:
            table = self.store.read()
            self._known = {}
            if not table.empty:
                mine = table[(table[list(self.context)] == pd.Series(self.context)).all(axis=1)]
                for row in mine.to_dict("records"):
                    fields = {name: row[name] for name in GroundTruth.__dataclass_fields__}
                    fields["entropy"] = None if pd.isna(row["entropy"]) else row["entropy"]
                    self._known[(row["history_hash"], row["label"])] = GroundTruth(**fields)
        return self._known

    def stored(self) -> dict[tuple[str, str], GroundTruth]:
        """The truths stored under these options, by (history hash, label)."""
        return self._load()

    def get(self, model: SequenceModel, specs: Sequence[QuerySpec]) -> list[GroundTruth | None]:
        """Ground truth of every spec, computing (and caching) only the missing ones."""
        known = self._load()
        missing = list({self._key(s): s for s in specs if self._key(s) not in known}.values())
        if missing:
            twisted = self.options.get("rule") == "twisted" and self.judge is not None
            results = seqq.ground_truth_many(
                model, [list(s.history.tokens) for s in missing], [s.query for s in missing],
                seed=self.seed + int(digest([self._key(s) for s in missing], 8), 16) % 2**31,
                **self.options, **({"surrogate": self.judge()} if twisted else {}),
            )
            rows = []
            for spec, truth in zip(missing, results, strict=True):
                known[self._key(spec)] = truth
                rows.append({**self.context, "history_hash": self._key(spec)[0],
                             "label": spec.label, **asdict(truth)})
            frame = pd.DataFrame(rows).astype({"rel_stderr": float, "entropy": float})
            self.store.write(frame, f"gt-{digest(self.context)}-{digest(rows)}")
            self.computed += len(missing)
        return [known[self._key(s)] for s in specs]


class NoGroundTruth:
    """For sweeps that only need estimates (Fig. 14/15): no query has a ground truth."""

    rule = NO_TRUTH_RULE
    computed = 0

    def get(self, model: SequenceModel, specs: Sequence[QuerySpec]) -> list[GroundTruth | None]:
        return [None] * len(specs)
