"""Benchmark queries built from a history's observed future (config group `query/`).

Symbols given as `observed` are read off the held-out continuation: the target of the horizon-K
hitting-time query is the observed K-th next symbol (docs/decisions.md §7). Explicit symbol lists
(ids or tokens) are used as given, e.g. the app categories of the Fig. 15 case study. Kind `expr`
asks any question of the query language (docs/query-language.md): a template such as
`tau({observed}) = {K}` is filled in per history and horizon.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from seqq import queries
from seqq.errors import ConfigError, QueryError
from seqq.queries import Query
from seqq.queries.language import check_syntax, parse, quote
from seqq.sweeps.histories import History

KINDS = ("hitting_time", "event_at", "count", "a_before_b", "expr")
OBSERVED = ("observed", "observed_first", "observed_other")
# `{K}` and the `observed*` symbols in a `kind: expr` template; other braces are the language's
PLACEHOLDER = re.compile(r"\{(K|observed|observed_first|observed_other)\}")


@dataclass(frozen=True)
class QueriesSpec:
    """The `query` group, typed: which kind of question every (history, K) asks, and its
    symbols (`observed*` keywords, or ids and tokens checked against the vocabulary in
    `build_specs`); `expr` is a `kind: expr` template."""

    kind: str
    a: Any = "observed"
    b: Any = "observed_other"
    n: Any = "observed"
    expr: str | None = None
    both_orders: bool = True

    @classmethod
    def of(cls, given: QueriesSpec | Mapping[str, Any]) -> QueriesSpec:
        """`given` as a spec; a mapping's missing keys take the defaults above."""
        if isinstance(given, QueriesSpec):
            return given
        return cls(**{k: given[k] for k in ("kind", "a", "b", "n", "expr", "both_orders")
                      if k in given})


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


def resolve_symbols(key: str, spec: Any, vocab: Sequence[str]) -> tuple[int, ...] | str:
    """An `observed*` keyword as given, else the sorted ids of an explicit list of ids and
    tokens, each checked against the vocabulary (`key` names the setting in errors)."""
    if isinstance(spec, str) and spec in OBSERVED:
        return spec
    items = list(spec) if isinstance(spec, Iterable) and not isinstance(spec, str) else [spec]
    lookup = {t: i for i, t in enumerate(vocab)}
    example = vocab[1] if len(vocab) > 1 else vocab[0]
    how = (f"use {', '.join(OBSERVED)}, ids in 0..{len(vocab) - 1} or tokens such as "
           f"{example!r}")
    ids = []
    for s in items:
        if isinstance(s, bool) or not isinstance(s, int | str):
            raise QueryError(f"{key}: {s!r} is not a symbol; {how}")
        if isinstance(s, str) and s not in lookup:
            raise QueryError(f"{key}: {s!r} is not a symbol of this dataset's vocabulary; {how}")
        if isinstance(s, int) and not 0 <= s < len(vocab):
            raise QueryError(f"{key}={s} is outside this dataset's vocabulary of {len(vocab)} "
                             f"symbols; {how}")
        ids.append(lookup[s] if isinstance(s, str) else s)
    if not ids:
        raise QueryError(f"{key} is an empty list; {how}")
    return tuple(sorted(set(ids)))


def _symbols(spec: tuple[int, ...] | str, history: History, K: int) -> tuple[int, ...] | None:
    """Read an `observed*` keyword off the history's future: the K-th next symbol, the first
    one, or the first later symbol that differs from the first (None: there is none)."""
    if not isinstance(spec, str):
        return spec
    future = history.future
    if spec == "observed":
        return (future[K - 1],)
    if spec == "observed_first":
        return (future[0],)
    other = [s for s in future if s != future[0]]
    return (other[0],) if other else None


def fill(template: str, history: History | None, K: int, vocab: Sequence[str]) -> str | None:
    """The expression a template asks for one history and horizon: `{K}`, and each `{observed*}`
    as the quoted token read off the history's future (None where there is no such symbol)."""
    missing = False

    def value(match: re.Match) -> str:
        nonlocal missing
        if match.group(1) == "K":
            return str(K)
        symbols = _symbols(match.group(1), history, K) if history is not None else (0,)
        missing |= symbols is None
        return quote(vocab[symbols[0]]) if symbols else ""

    text = PLACEHOLDER.sub(value, template)
    return None if missing else text


def check_template(template: object, ks: Sequence[int]) -> None:
    """Refuse a `query.expr` that is not a string or not well-formed at some K, before any data
    or model is loaded (its symbols are checked against the vocabulary in `build_specs`)."""
    if not isinstance(template, str) or not template.strip():
        raise ConfigError(f"query.expr must be a query-language expression such as "
                          f"'tau({{observed}}) = {{K}}', got {template!r}")
    for K in ks:
        try:
            check_syntax(fill(template, None, K, ["0"]))
        except QueryError as error:
            raise ConfigError(f"query.expr at K={K}: {error}") from None


def _expr_specs(histories: Sequence[History], ks: Sequence[int], template: str,
                vocab: Sequence[str]) -> list[QuerySpec]:
    """One query per (history, K) of a template; each distinct expression is parsed once."""
    lookup = {t: i for i, t in enumerate(vocab)}
    parsed: dict[str, Query] = {}
    specs = []
    for h in histories:
        for K in ks:
            text = fill(template, h, K, vocab)
            if text is None:
                continue
            if text not in parsed:
                try:
                    parsed[text] = parse(text, lookup)
                except QueryError as error:
                    raise QueryError(f"query.expr: {error}") from None
            specs.append(QuerySpec(h, K, template, text, parsed[text]))
    return specs


def _fmt(symbols: tuple[int, ...]) -> str:
    return ",".join(map(str, symbols))


def build_specs(
    histories: Sequence[History], ks: Sequence[int], query: QueriesSpec | Mapping[str, Any],
    vocab: Sequence[str],
) -> list[QuerySpec]:
    """Every (history, K) query of the configured kind; `a_before_b` with `both_orders` adds the
    reversed query so the unaccounted probability (Fig. 14) can be reported. An `expr` query's
    kind (the results' `query` column) is its template, so two templates never share a panel."""
    q = QueriesSpec.of(query)
    kind = q.kind
    if kind not in KINDS:
        raise QueryError(f"unknown query kind {kind!r}; choose one of {', '.join(KINDS)}")
    if kind == "expr":
        return _expr_specs(histories, ks, q.expr, vocab)
    a_spec = resolve_symbols("query.a", q.a, vocab)
    b_spec = resolve_symbols("query.b", q.b, vocab)
    specs = []
    for h in histories:
        for K in ks:
            a = _symbols(a_spec, h, K)
            if a is None:
                continue
            if kind == "hitting_time":
                specs.append(
                    QuerySpec(h, K, kind, f"tau({_fmt(a)})={K}", queries.hitting_time(a, K)))
            elif kind == "event_at":
                specs.append(QuerySpec(h, K, kind, f"X{K}in({_fmt(a)})", queries.event_at(a, K)))
            elif kind == "count":
                n = q.n
                n = sum(s in a for s in h.future[:K]) if n == "observed" else int(n)
                specs.append(QuerySpec(h, K, kind, f"N({_fmt(a)},{K})={n}", queries.count(a, n, K)))
            else:
                b = _symbols(b_spec, h, K)
                if b is None or set(a) & set(b):
                    continue
                pairs = [(a, b), (b, a)] if q.both_orders else [(a, b)]
                specs += [
                    QuerySpec(h, K, kind, f"tau({_fmt(x)})<tau({_fmt(y)})@{K}",
                              queries.a_before_b(x, y, K))
                    for x, y in pairs
                ]
    return specs
