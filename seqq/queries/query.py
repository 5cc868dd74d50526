"""A predictive query: the length-K paths an automaton accepts (paper §3, generalised).

`Query` pairs an `Automaton` with a horizon K. Estimators never look at the automaton itself:
they walk its `lattice(V)`, compiled once per vocabulary size and cached.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.errors import QueryError
from seqq.queries.automaton import Automaton, combine, complement
from seqq.queries.domains import ANY, Domain, check_horizon
from seqq.queries.lattice import Lattice, unroll


@dataclass(frozen=True)
class Query:
    """p(X_{1:K} ∈ Q | history) with Q the paths `automaton` accepts after exactly K symbols."""

    automaton: Automaton | None
    horizon: int
    name: str = "query"
    parts: tuple[Query, ...] = ()  # what a union was built from (kept for union estimators)
    # A for τ(A) = K: the event whose first occurrence the query dates. Its restricted proposal
    # (avoid A, then A) is the same for every K, so one set of paths answers every horizon.
    first_passage: Domain | None = None

    def __repr__(self) -> str:
        """Its name and horizon, not its automaton's edge lists."""
        states = ("" if self.automaton is None
                  else f", {self.automaton.num_states} automaton states")
        parts = f", union of {len(self.parts)}" if self.parts else ""
        return f"Query({self.name!r}, K = {self.horizon}{states}{parts})"

    def __post_init__(self) -> None:
        check_horizon(self.horizon)
        if self.automaton is None and not self.parts:
            raise QueryError("a query needs an automaton (or, for an uncompiled union, parts)")

    def lattice(self, vocab_size: int) -> Lattice:
        """The automaton unrolled over K steps for a vocabulary of `vocab_size` symbols."""
        if self.automaton is None:
            raise QueryError(f"this union of {len(self.parts)} queries was not compiled into one "
                             "automaton; estimate it with method 'mixture' or 'klm', or build it "
                             "with union(..., compile=True)")
        return _lattice(self.automaton, self.horizon, vocab_size)

    def size(self, vocab_size: int) -> int:
        """|Q|, the number of paths in the query (exact integer, may be astronomically large)."""
        lattice = self.lattice(vocab_size)
        return lattice.count(int(lattice.roots[0]))

    def contains(self, paths: Tensor, vocab_size: int) -> Tensor:
        """Which rows of `paths` [N, K] lie in Q."""
        if paths.shape[1] != self.horizon:
            raise QueryError(f"paths have {paths.shape[1]} symbols but the query's horizon is "
                             f"{self.horizon}")
        if self.automaton is None:
            return torch.stack([q.extend(self.horizon).contains(paths, vocab_size)
                                for q in self.parts]).any(0)
        final = self.automaton.run(paths, vocab_size)
        accepting = torch.tensor(sorted(self.automaton.accepting), dtype=torch.long)
        return torch.isin(final, accepting).to(paths.device)

    def extend(self, horizon: int) -> Query:
        """The same event seen over a longer horizon: the first K symbols are accepted, the
        rest are free (p is unchanged). Lets queries of different K be combined."""
        check_horizon(horizon)
        if horizon < self.horizon:
            raise QueryError(f"cannot shorten a query's horizon from {self.horizon} to {horizon}")
        if horizon == self.horizon:
            return self
        if self.automaton is None:
            return Query(None, horizon, self.name, tuple(q.extend(horizon) for q in self.parts))
        a, S, K = self.automaton, self.automaton.num_states, self.horizon
        sink = K * S  # reached at step K in an accepting state; free from then on
        edges = []
        for k in range(K):
            for s in range(S):
                edges.append(tuple(
                    (d, (k + 1) * S + t if k + 1 < K else sink)
                    for d, t in a.edges[s] if k + 1 < K or t in a.accepting))
        edges.append(((ANY, sink),))
        return Query(Automaton(tuple(edges), frozenset({sink}), a.start), horizon, self.name)

    def __or__(self, other: Query) -> Query:
        return union(self, other)

    def __and__(self, other: Query) -> Query:
        return intersection(self, other)

    def __invert__(self) -> Query:
        return Query(complement(self.automaton), self.horizon, f"not {self.name}")


@functools.lru_cache(maxsize=256)
def _lattice(automaton: Automaton, horizon: int, vocab_size: int) -> Lattice:
    return unroll(automaton, horizon, vocab_size)


def _combined(queries: tuple[Query, ...], accept: str, name: str, compile: bool = True
              ) -> Query:
    if not queries:
        raise QueryError(f"an {name} needs at least one query")
    K = max(q.horizon for q in queries)
    parts = tuple(q.extend(K) for q in queries)
    if not compile:
        return Query(None, K, name, parts)
    if any(q.automaton is None for q in parts):
        raise QueryError(f"an {name} of an uncompiled union must be uncompiled too "
                         "(compile=False)")
    automaton = parts[0].automaton
    for q in parts[1:]:
        automaton = combine(automaton, q.automaton, accept)
    return Query(automaton, K, name, parts if accept == "or" else ())


def union(*queries: Query, compile: bool = True) -> Query:
    """Paths in any of the queries; overlaps are counted once. Compiled (default), the automata
    run side by side (the product construction; its size is `automaton.num_states`) and every
    estimator applies. A union too large to compile (`compile=False`) keeps only its parts,
    for the union estimators (`mixture`, `klm`). Horizons are extended to the longest."""
    return _combined(queries, "or", "union", compile)


def intersection(*queries: Query) -> Query:
    """Paths in all of the queries (horizons extended to the longest)."""
    return _combined(queries, "and", "intersection")
