"""The paper's queries (Table 1) and their generalisations, each as one small automaton.

Q1–Q3 are products (a chain of positions); Q4 and the counts are automata with a handful of
states, so each is answered with one restricted proposal instead of a union of K or C(K, n)
products.
"""

from __future__ import annotations

from collections.abc import Sequence

from seqq.errors import QueryError
from seqq.queries.automaton import Automaton, absorbing, positions
from seqq.queries.domains import ANY, Domain, Symbols, Vocabulary, check_horizon, domain
from seqq.queries.query import Query

COUNT_OPS = ("=", ">=", "<=", ">", "<", "!=")


def product(domains: Sequence[Symbols | Domain | None], vocab: Vocabulary | None = None) -> Query:
    """One product V_1 × … × V_K; `None` at a position means any symbol."""
    check_horizon(len(domains))
    return Query(positions([
        ANY if d is None else domain(d, vocab, f"at position {k + 1}")
        for k, d in enumerate(domains)]), len(domains), "product")


def automaton(automaton: Automaton, K: int, within: bool = False, name: str = "automaton") -> Query:
    """Paths the automaton accepts after exactly K symbols, or (`within`) at any step ≤ K."""
    check_horizon(K)
    return Query(absorbing(automaton) if within else automaton, K, name)


def next_event(a: Symbols | Domain, vocab: Vocabulary | None = None) -> Query:
    """Q1: p(X_1 ∈ A)."""
    return Query(positions([domain(a, vocab, "a")]), 1, "next_event")


def event_at(a: Symbols | Domain, K: int, vocab: Vocabulary | None = None) -> Query:
    """Q2: p(X_K ∈ A) = V^{K-1} × A."""
    check_horizon(K)
    return Query(positions([ANY] * (K - 1) + [domain(a, vocab, "a")]), K, "event_at")


def hitting_time(a: Symbols | Domain, K: int, vocab: Vocabulary | None = None) -> Query:
    """Q3: p(τ(A) = K) = (V∖A)^{K-1} × A."""
    check_horizon(K)
    A = domain(a, vocab, "a")
    return Query(positions([~A] * (K - 1) + [A]), K, "hitting_time", first_passage=A)


def occurs_within(a: Symbols | Domain, K: int, vocab: Vocabulary | None = None) -> Query:
    """p(τ(A) ≤ K): some symbol of A among the next K (paths stop mattering at the first A)."""
    check_horizon(K)
    A = domain(a, vocab, "a")
    return Query(absorbing(Automaton((((~A, 0), (A, 1)), ()), frozenset({1}))), K,
                 "occurs_within")


def a_before_b(a: Symbols | Domain, b: Symbols | Domain, K: int, vocab: Vocabulary | None = None) -> Query:
    """Q4 truncated at K: p(τ(A) < τ(B), τ(A) ≤ K).

    One automaton: wait on V∖(A∪B), accept (and stop caring) on A, reject on B. The pair
    `a_before_b(B, A, K)` gives the other order; 1 minus both is the unaccounted mass.
    """
    check_horizon(K)
    A, B = domain(a, vocab, "a"), domain(b, vocab, "b")
    shared = A & B
    if not shared.is_empty:
        what = sorted(shared.symbols) if not shared.complement else "all but finitely many"
        raise QueryError(f"A and B share symbols {what}; 'A before B' needs disjoint sets")
    waiting = ((~(A | B), 0), (A, 1))
    return Query(absorbing(Automaton((waiting, ()), frozenset({1}))), K, "a_before_b")


def count(a: Symbols | Domain, n: int, K: int, vocab: Vocabulary | None = None, op: str = "=") -> Query:
    """Q5 and its thresholds: p(N_A(K) op n) with op one of =, >=, <=, >, <, !=.

    State c counts the A's seen so far (capped at n + 1), so the proposal steers every path
    towards a count that can still satisfy the condition.
    """
    check_horizon(K)
    if op not in COUNT_OPS:
        raise QueryError(f"count comparison {op!r} is not one of {', '.join(COUNT_OPS)}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise QueryError(f"count n must be an integer >= 0, got {n!r}")
    if op == "=" and n > K:
        raise QueryError(f"count n must lie in 0..K={K}, got {n}")
    A = domain(a, vocab, "a")
    top = n + 1  # "more than n": absorbing
    edges = tuple(((~A, c), (A, min(c + 1, top))) for c in range(top)) + (((ANY, top),),)
    keep = {"=": {n}, ">=": set(range(n, top + 1)), "<=": set(range(n + 1)), ">": {top},
            "<": set(range(n)), "!=": set(range(top + 1)) - {n}}[op]
    if not keep:
        raise QueryError(f"count(a) {op} {n} holds for no path; use a satisfiable comparison")
    return Query(Automaton(edges, frozenset(keep)), K, "count")
