"""Predictive queries as disjoint unions of products of restricted domains (paper §3, Table 1).

A query over the next K symbols is Q = ∪_i V_1^(i) × … × V_K^(i). Every estimator works on the
products, so a query is held symbolically (which symbols each position allows) and turned into
boolean masks [P, K, V] once the vocabulary size is known.
"""

from __future__ import annotations

import itertools
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
    """The symbols allowed at one position: `symbols`, or everything but them if `complement`."""

    symbols: frozenset[int]
    complement: bool = False

    def mask(self, vocab_size: int) -> Tensor:
        bad = [s for s in self.symbols if not 0 <= s < vocab_size]
        if bad:
            raise QueryError(
                f"symbol {bad[0]} is outside the model's vocabulary of size {vocab_size}; "
                f"use ids in 0..{vocab_size - 1}"
            )
        mask = torch.zeros(vocab_size, dtype=torch.bool)
        mask[list(self.symbols)] = True
        return ~mask if self.complement else mask


ANY = Domain(frozenset(), complement=True)


@dataclass(frozen=True)
class Query:
    """A disjoint union of products; `products[i][k]` is the domain of position k in product i."""

    products: tuple[tuple[Domain, ...], ...]
    name: str = "query"
    check_disjoint: bool = False

    def __post_init__(self) -> None:
        if not self.products:
            raise QueryError("a query needs at least one product of domains")
        horizons = {len(p) for p in self.products}
        if len(horizons) != 1:
            raise QueryError(f"all products of a query must have one horizon K, got {horizons}")
        if self.horizon < 1:
            raise QueryError("horizon K must be at least 1")

    @property
    def horizon(self) -> int:
        return len(self.products[0])

    def masks(self, vocab_size: int) -> Tensor:
        """Boolean masks [P, K, V] of the non-empty products (empty ones contribute nothing)."""
        masks = torch.stack(
            [torch.stack([d.mask(vocab_size) for d in product]) for product in self.products]
        )
        masks = masks[masks.any(-1).all(-1)]
        if self.check_disjoint and len(masks) > 1:
            _raise_if_overlapping(masks)
        return masks

    def size(self, vocab_size: int) -> int:
        """|Q|, the number of paths in the query (exact integer, may be astronomically large)."""
        total = 0
        for row in self.masks(vocab_size).sum(-1).tolist():
            n = 1
            for c in row:
                n *= c
            total += n
        return total

    def contains(self, paths: Tensor, vocab_size: int) -> Tensor:
        """Which rows of `paths` [N, K] lie in Q."""
        masks = self.masks(vocab_size)
        allowed = masks[:, torch.arange(self.horizon), paths.cpu()]  # [P, N, K]: mask_i[k, x_k]
        return allowed.all(-1).any(0).to(paths.device)

    def __or__(self, other: Query) -> Query:
        return union(self, other)


def _raise_if_overlapping(masks: Tensor) -> None:
    m = masks.float()
    shared = torch.einsum("ikv,jkv->kij", m, m) > 0  # position k allows a common symbol
    overlap = shared.all(0) & ~torch.eye(len(masks), dtype=torch.bool)
    if overlap.any():
        i, j = overlap.nonzero()[0].tolist()
        raise QueryError(
            f"products {i} and {j} of the union overlap, so their probabilities would be counted "
            "twice; make the union disjoint (e.g. A ∪ B = A ⊔ (B ∖ A))"
        )


def _ids(symbols: Symbols, vocab: Vocabulary | None, what: str) -> frozenset[int]:
    if isinstance(symbols, (int, str)):
        symbols = [symbols]
    ids = set()
    for s in symbols:
        if isinstance(s, str):
            if vocab is None:
                raise QueryError(f"symbol {s!r} is a token; pass vocab= to map tokens to ids")
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


def _check_horizon(K: int) -> None:
    if not isinstance(K, int) or K < 1:
        raise QueryError(f"horizon K must be an integer >= 1, got {K!r}")


def product(domains: Sequence[Symbols | None], vocab: Vocabulary | None = None) -> Query:
    """One product V_1 × … × V_K; `None` at a position means any symbol."""
    _check_horizon(len(domains))
    return Query(
        (tuple(ANY if d is None else Domain(_ids(d, vocab, f"at position {k + 1}"))
               for k, d in enumerate(domains)),),
        name="product",
    )


def union(*queries: Query) -> Query:
    """Disjoint union of queries; overlapping products raise `QueryError` when materialised."""
    return Query(
        tuple(p for q in queries for p in q.products), name="union", check_disjoint=True
    )


def next_event(a: Symbols, vocab: Vocabulary | None = None) -> Query:
    """Q1: p(X_1 ∈ A)."""
    return Query(((Domain(_ids(a, vocab, "a")),),), name="next_event")


def event_at(a: Symbols, K: int, vocab: Vocabulary | None = None) -> Query:
    """Q2: p(X_K ∈ A) = V^{K-1} × A."""
    _check_horizon(K)
    return Query(((ANY,) * (K - 1) + (Domain(_ids(a, vocab, "a")),),), name="event_at")


def hitting_time(a: Symbols, K: int, vocab: Vocabulary | None = None) -> Query:
    """Q3: p(τ(A) = K) = (V∖A)^{K-1} × A."""
    _check_horizon(K)
    A = _ids(a, vocab, "a")
    return Query(((Domain(A, complement=True),) * (K - 1) + (Domain(A),),), name="hitting_time")


def a_before_b(a: Symbols, b: Symbols, K: int, vocab: Vocabulary | None = None) -> Query:
    """Q4 truncated at K: p(τ(A) < τ(B), τ(A) ≤ K) = ⊔_{i≤K} (V∖(A∪B))^{i-1} × A × V^{K-i}.

    The pair `a_before_b(B, A, K)` gives the other order; 1 minus both is the unaccounted mass.
    """
    _check_horizon(K)
    A, B = _ids(a, vocab, "a"), _ids(b, vocab, "b")
    if A & B:
        raise QueryError(f"A and B share symbols {sorted(A & B)}; 'A before B' needs disjoint sets")
    neither = Domain(A | B, complement=True)
    products = tuple(
        (neither,) * (i - 1) + (Domain(A),) + (ANY,) * (K - i) for i in range(1, K + 1)
    )
    return Query(products, name="a_before_b")


def count(a: Symbols, n: int, K: int, vocab: Vocabulary | None = None) -> Query:
    """Q5: p(N_A(K) = n), the C(K, n) ways to place A at n of the K positions."""
    _check_horizon(K)
    if not 0 <= n <= K:
        raise QueryError(f"count n must lie in 0..K={K}, got {n}")
    A = _ids(a, vocab, "a")
    hit, miss = Domain(A), Domain(A, complement=True)
    products = tuple(
        tuple(hit if k in places else miss for k in range(K))
        for places in itertools.combinations(range(K), n)
    )
    return Query(products, name="count")
