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
from seqq.queries.domains import ANY, check_horizon
from seqq.queries.lattice import Lattice, unroll


@dataclass(frozen=True)
class Query:
    """p(X_{1:K} ∈ Q | history) with Q the paths `automaton` accepts after exactly K symbols."""

    automaton: Automaton
    horizon: int
    name: str = "query"

    def __post_init__(self) -> None:
        check_horizon(self.horizon)

    def lattice(self, vocab_size: int) -> Lattice:
        """The automaton unrolled over K steps for a vocabulary of `vocab_size` symbols."""
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


def _combined(queries: tuple[Query, ...], accept: str, name: str) -> Query:
    if not queries:
        raise QueryError(f"an {name} needs at least one query")
    K = max(q.horizon for q in queries)
    parts = [q.extend(K) for q in queries]
    automaton = parts[0].automaton
    for q in parts[1:]:
        automaton = combine(automaton, q.automaton, accept)
    return Query(automaton, K, name)


def union(*queries: Query) -> Query:
    """Paths in any of the queries; overlaps are counted once (the automata run side by side).
    Queries of different horizons are extended to the longest."""
    return _combined(queries, "or", "union")


def intersection(*queries: Query) -> Query:
    """Paths in all of the queries (horizons extended to the longest)."""
    return _combined(queries, "and", "intersection")
