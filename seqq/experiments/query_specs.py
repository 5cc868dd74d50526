"""Benchmark queries built from a history's observed future (config group `query/`).

Symbols given as `observed` are read off the held-out continuation: the target of the horizon-K
hitting-time query is the observed K-th next symbol (docs/decisions.md §7). Explicit symbol lists
(ids or tokens) are used as given, e.g. the app categories of the Fig. 15 case study.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from seqq import queries
from seqq.experiments.histories import History
from seqq.queries import Query

KINDS = ("hitting_time", "event_at", "count", "a_before_b")


@dataclass(frozen=True)
class QuerySpec:
    """One query of the sweep; `key` identifies it in every table."""

    history: History
    K: int
    kind: str
    label: str
    query: Query

    @property
    def key(self) -> tuple[int, str, int, str]:
        return (self.history.history_id, self.history.digest, self.K, self.label)


def _symbols(spec: Any, history: History, K: int, vocab: Sequence[str]) -> tuple[int, ...] | None:
    """Resolve `observed` (the K-th next symbol), `observed_first`, `observed_other` (the first
    observed symbol that differs from the first) or an explicit list of ids/tokens."""
    future = history.future
    if spec == "observed":
        return (future[K - 1],)
    if spec == "observed_first":
        return (future[0],)
    if spec == "observed_other":
        other = [s for s in future if s != future[0]]
        return (other[0],) if other else None
    lookup = {t: i for i, t in enumerate(vocab)}
    items = [spec] if isinstance(spec, (int, str)) else list(spec)
    return tuple(sorted(int(lookup[s]) if isinstance(s, str) else int(s) for s in items))


def _fmt(symbols: tuple[int, ...]) -> str:
    return ",".join(map(str, symbols))


def build_specs(
    histories: Sequence[History], ks: Sequence[int], cfg: Mapping[str, Any], vocab: Sequence[str]
) -> list[QuerySpec]:
    """Every (history, K) query of the configured kind; `a_before_b` with `both_orders` adds the
    reversed query so the unaccounted probability (Fig. 14) can be reported."""
    kind = cfg["kind"]
    if kind not in KINDS:
        raise ValueError(f"unknown query kind {kind!r}; choose one of {KINDS}")
    specs = []
    for h in histories:
        for K in ks:
            a = _symbols(cfg.get("a", "observed"), h, K, vocab)
            if kind == "hitting_time":
                specs.append(
                    QuerySpec(h, K, kind, f"tau({_fmt(a)})={K}", queries.hitting_time(a, K)))
            elif kind == "event_at":
                specs.append(QuerySpec(h, K, kind, f"X{K}in({_fmt(a)})", queries.event_at(a, K)))
            elif kind == "count":
                n = cfg.get("n", "observed")
                n = sum(s in a for s in h.future[:K]) if n == "observed" else int(n)
                specs.append(QuerySpec(h, K, kind, f"N({_fmt(a)},{K})={n}", queries.count(a, n, K)))
            else:
                b = _symbols(cfg.get("b", "observed_other"), h, K, vocab)
                if b is None or set(a) & set(b):
                    continue
                pairs = [(a, b), (b, a)] if cfg.get("both_orders", True) else [(a, b)]
                specs += [
                    QuerySpec(h, K, kind, f"tau({_fmt(x)})<tau({_fmt(y)})@{K}",
                              queries.a_before_b(x, y, K))
                    for x, y in pairs
                ]
    return specs
