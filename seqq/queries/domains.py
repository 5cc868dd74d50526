"""Sets of symbols, held symbolically so a query does not depend on the vocabulary size.

A `Domain` is a finite set of ids or the complement of one ("anything but a"); it becomes a
boolean mask [V] only when a model's vocabulary size is known. Intersections and unions stay
symbolic, which is what building automata from smaller ones needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.errors import QueryError

Symbol = int | str
Symbols = Symbol | Iterable[Symbol]
Vocabulary = Sequence[str] | Mapping[str, int]


@dataclass(frozen=True)
class Domain:
    """The symbols allowed on one transition: `symbols`, or everything but them if `complement`."""

    symbols: frozenset[int]
    complement: bool = False

    def mask(self, vocab_size: int) -> Tensor:
        bad = [s for s in self.symbols if not 0 <= s < vocab_size]
        if bad:
            raise QueryError(
                f"symbol {min(bad)} is outside the model's vocabulary of size {vocab_size}; "
                f"use ids in 0..{vocab_size - 1}"
            )
        mask = torch.zeros(vocab_size, dtype=torch.bool)
        mask[list(self.symbols)] = True
        return ~mask if self.complement else mask

    @property
    def is_empty(self) -> bool:
        """Certainly empty (a complement is empty only for a known V, so it never is here)."""
        return not self.complement and not self.symbols

    def __and__(self, other: Domain) -> Domain:
        a, b = self.symbols, other.symbols
        if not self.complement and not other.complement:
            return Domain(a & b)
        if not self.complement:
            return Domain(a - b)
        if not other.complement:
            return Domain(b - a)
        return Domain(a | b, complement=True)

    def __or__(self, other: Domain) -> Domain:
        return ~(~self & ~other)

    def __invert__(self) -> Domain:
        return Domain(self.symbols, complement=not self.complement)


ANY = Domain(frozenset(), complement=True)
NOTHING = Domain(frozenset())


def symbol_ids(symbols: Symbols, vocab: Vocabulary | None, what: str) -> frozenset[int]:
    """Ids of one symbol or a set of them; tokens (strings) are looked up in `vocab`."""
    if isinstance(symbols, (int, str)):
        symbols = [symbols]
    ids = set()
    lookup = None
    for s in symbols:
        if isinstance(s, str):
            if vocab is None:
                raise QueryError(f"symbol {s!r} is a token; pass vocab= to map tokens to ids")
            if lookup is None:
                lookup = vocab if isinstance(vocab, Mapping) else {t: i for i, t in enumerate(vocab)}
            if s not in lookup:
                raise QueryError(f"token {s!r} is not in the vocabulary")
            ids.add(int(lookup[s]))
        else:
            if int(s) < 0:
                raise QueryError(f"symbol {s} is negative; symbols are ids in 0..V-1")
            ids.add(int(s))
    if not ids:
        raise QueryError(f"the symbol set {what} is empty; give at least one symbol")
    return frozenset(ids)


def domain(symbols: Symbols | Domain, vocab: Vocabulary | None, what: str) -> Domain:
    """A `Domain` as given (e.g. a complement, "anything but a"), else the set of the symbols."""
    if isinstance(symbols, Domain):
        return symbols
    return Domain(symbol_ids(symbols, vocab, what))


def check_horizon(K: object) -> int:
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise QueryError(f"horizon K must be an integer >= 1, got {K!r}")
    return K
