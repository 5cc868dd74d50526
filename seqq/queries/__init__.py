"""Predictive queries: sets of length-K futures, held as automata over the model's symbols.

    from seqq import queries as Q
    Q.hitting_time(a, K)            # Q3, p(τ(a) = K)
    Q.count(a, 2, 10, op=">=")      # "a at least twice in the next 10"
    Q.event_at(a, 3) | Q.event_at(b, 5)   # overlapping unions are counted once
    Q.choice([" Paris", " Lyon"], tokenizer)   # text, summed over every tokenisation
    Q.parse("count(a, 10) >= 2 or X3 in {b, c}", vocab)   # the query language
"""

from seqq.queries.automaton import Automaton
from seqq.queries.constructors import (
    COUNT_OPS,
    a_before_b,
    automaton,
    count,
    event_at,
    hitting_time,
    next_event,
    occurs_within,
    product,
)
from seqq.queries.domains import ANY, Domain, Symbol, Symbols, Vocabulary, symbol_ids
from seqq.queries.language import parse
from seqq.queries.lattice import Lattice
from seqq.queries.query import Query, intersection, union
from seqq.queries.text import appears_within, choice, text_matches

__all__ = [
    "ANY", "COUNT_OPS", "Automaton", "Domain", "Lattice", "Query", "Symbol", "Symbols",
    "Vocabulary", "a_before_b", "appears_within", "automaton", "choice", "count", "event_at",
    "hitting_time", "intersection", "next_event", "occurs_within", "parse", "product",
    "symbol_ids", "text_matches", "union",
]
