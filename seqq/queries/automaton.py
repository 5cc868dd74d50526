"""Deterministic finite automata over symbol ids: the one representation of every query.

A query over the next K symbols is the set of length-K paths an automaton accepts after exactly
K symbols. Products of domains are automata whose state is the position; counts, "a before b",
patterns and regexes over tokens have a few more states. Transitions are held symbolically
(`Domain`s), so an automaton does not depend on the vocabulary size until it is compiled to a
table, and unions, intersections and complements are built by the product construction without
knowing V.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.errors import QueryError
from seqq.queries.domains import ANY, Domain

Edges = tuple[tuple[Domain, int], ...]


@dataclass(frozen=True)
class Automaton:
    """`edges[s]` are state s's transitions (domain, next state) with disjoint domains; a symbol
    no edge covers rejects the path. A path is accepted if it ends in an `accepting` state."""

    edges: tuple[Edges, ...]
    accepting: frozenset[int]
    start: int = 0

    def __post_init__(self) -> None:
        S = len(self.edges)
        if not 0 <= self.start < S:
            raise QueryError(f"automaton start state {self.start} is not one of its {S} states")
        bad = [t for edges in self.edges for _, t in edges if not 0 <= t < S]
        bad += [s for s in self.accepting if not 0 <= s < S]
        if bad:
            raise QueryError(f"automaton state {bad[0]} is not one of its {S} states")

    @property
    def num_states(self) -> int:
        return len(self.edges)

    def transition_table(self, vocab_size: int) -> Tensor:
        """[S, V] long: the next state per (state, symbol), −1 where the path is rejected."""
        table = torch.full((self.num_states, vocab_size), -1, dtype=torch.long)
        for s, edges in enumerate(self.edges):
            for domain, target in edges:
                mask = domain.mask(vocab_size)
                if (table[s, mask] >= 0).any():
                    raise QueryError(f"automaton state {s} has two transitions on symbol "
                                     f"{int(mask.nonzero()[0])}; make its edges disjoint")
                table[s, mask] = target
        return table

    def run(self, paths: Tensor, vocab_size: int) -> Tensor:
        """Final state of each row of `paths` [N, K] (−1 if rejected on the way)."""
        table = self.transition_table(vocab_size)
        state = torch.full((len(paths),), self.start, dtype=torch.long)
        for k in range(paths.shape[1]):
            alive = state >= 0
            state[alive] = table[state[alive], paths[alive, k].cpu()]
        return state


def positions(domains: Sequence[Domain]) -> Automaton:
    """The product V_1 × … × V_K: state k means k symbols read, all inside their domains."""
    K = len(domains)
    edges = tuple(((d, k + 1),) for k, d in enumerate(domains)) + ((),)
    return Automaton(edges, frozenset({K}))


def combine(a: Automaton, b: Automaton, accept: str) -> Automaton:
    """The product construction: run both; accept where either ("or") or both ("and") accept.

    Only reachable state pairs are built; a side that has rejected is carried as −1, so an
    "or" keeps going on the other side alone.
    """
    both = accept == "and"
    pairs: dict[tuple[int, int], int] = {(a.start, b.start): 0}
    order = [(a.start, b.start)]
    edges: list[Edges] = []
    for sa, sb in order:  # grows while we walk it (breadth-first)
        out = []
        for da, ta in _with_rejection(a, sa):
            for db, tb in _with_rejection(b, sb):
                if (ta < 0 and tb < 0) or (both and (ta < 0 or tb < 0)):
                    continue
                domain = da & db
                if domain.is_empty:
                    continue
                if (ta, tb) not in pairs:
                    pairs[(ta, tb)] = len(order)
                    order.append((ta, tb))
                out.append((domain, pairs[(ta, tb)]))
        edges.append(tuple(out))
    joined = all if both else any
    accepting = frozenset(i for i, (sa, sb) in enumerate(order)
                          if joined((sa in a.accepting, sb in b.accepting)))
    return Automaton(tuple(edges), accepting)


def _with_rejection(automaton: Automaton, state: int) -> list[tuple[Domain, int]]:
    """A state's edges plus one edge to −1 on every symbol they do not cover."""
    if state < 0:
        return [(ANY, -1)]
    edges = list(automaton.edges[state])
    covered = Domain(frozenset(), complement=False)
    for d, _ in edges:
        covered = covered | d
    return edges + [(~covered, -1)]


def complement(a: Automaton) -> Automaton:
    """The paths `a` rejects (of the same length): complete it with a sink, flip acceptance."""
    sink = a.num_states
    edges = tuple(tuple(e for e in _with_rejection(a, s) if not e[0].is_empty)
                  for s in range(a.num_states))
    edges = tuple(tuple((d, sink if t < 0 else t) for d, t in e) for e in edges) + (((ANY, sink),),)
    accepting = frozenset(range(sink + 1)) - a.accepting
    return Automaton(edges, accepting, a.start)


def absorbing(a: Automaton) -> Automaton:
    """Acceptance at any step: once an accepting state is reached, every continuation is kept
    ("within K" queries). The accepting states become one absorbing state."""
    sink = a.num_states
    edges = tuple(
        () if s in a.accepting else tuple((d, sink if t in a.accepting else t) for d, t in e)
        for s, e in enumerate(a.edges)
    ) + (((ANY, sink),),)
    start = sink if a.start in a.accepting else a.start
    return Automaton(edges, frozenset({sink}), start)
