"""Queries as automata: membership against direct definitions on every path, lattices, unions
counted once (inclusion–exclusion), and forward DP over (Markov state × automaton state)
against brute-force enumeration."""

import itertools
import math

import pytest
import torch
from oracles import all_paths, brute_force, random_markov

import seqq
from seqq import queries as Q
from seqq.errors import QueryError

V = 3


def members(query, V=V):
    paths = all_paths(V, query.horizon)
    return {tuple(p) for p, inside in zip(paths.tolist(), query.contains(paths, V).tolist(),
                                          strict=True) if inside}


def paths_where(K, rule, V=V):
    return {p for p in itertools.product(range(V), repeat=K) if rule(p)}


def first(p, symbols):
    return next((i + 1 for i, x in enumerate(p) if x in symbols), math.inf)


def test_hitting_time_matches_figure_2():
    # V = {a, b, c}, K = 3: Q = {b,c} × {b,c} × {a} = {bba, bca, cba, cca}
    q = Q.hitting_time("a", 3, vocab=["a", "b", "c"])
    assert members(q) == {(1, 1, 0), (1, 2, 0), (2, 1, 0), (2, 2, 0)}
    assert q.size(3) == 4
    lattice = q.lattice(3)  # a chain: one node per position, no per-symbol children stored
    assert lattice.num_nodes == 4 and (lattice.successor[:3] >= 0).all()
    assert len(lattice.children) == 0


@pytest.mark.parametrize("K", [1, 3, 5])
@pytest.mark.parametrize("query, rule", [
    (lambda K: Q.next_event(1), lambda p: p[0] == 1),
    (lambda K: Q.event_at([0, 2], K), lambda p: p[-1] in (0, 2)),
    (lambda K: Q.hitting_time(0, K), lambda p: first(p, {0}) == len(p)),
    (lambda K: Q.occurs_within(2, K), lambda p: 2 in p),
    (lambda K: Q.a_before_b(0, 1, K), lambda p: first(p, {0}) < first(p, {1})),
    (lambda K: Q.a_before_b([0, 2], 1, K), lambda p: first(p, {0, 2}) < first(p, {1})),
], ids=["next_event", "event_at", "hitting_time", "occurs_within", "a_before_b", "sets"])
def test_membership_equals_the_definition_on_every_path(K, query, rule):
    q = query(K)
    assert members(q) == paths_where(q.horizon, rule)
    assert q.size(V) == len(paths_where(q.horizon, rule))


@pytest.mark.parametrize("op, test", [("=", lambda c, n: c == n), (">=", lambda c, n: c >= n),
                                      ("<=", lambda c, n: c <= n), (">", lambda c, n: c > n),
                                      ("<", lambda c, n: c < n), ("!=", lambda c, n: c != n)])
@pytest.mark.parametrize("n", [0, 1, 2])
def test_count_thresholds_are_one_small_automaton(op, test, n):
    K = 4
    if op == "<" and n == 0:
        with pytest.raises(QueryError, match="holds for no path"):
            Q.count(1, n, K, op=op)
        return
    q = Q.count(1, n, K, op=op)
    assert members(q) == paths_where(K, lambda p: test(p.count(1), n))
    assert q.automaton.num_states == n + 2  # counts 0..n and "more than n"
    if op == "=":
        assert q.size(V) == math.comb(K, n) * (V - 1) ** (K - n)


def test_overlapping_unions_are_counted_once():
    """Inclusion–exclusion is the oracle: |A ∪ B| and p(A ∪ B) = p(A) + p(B) − p(A ∩ B)."""
    a, b, c = Q.event_at(0, 2), Q.event_at(1, 3), Q.occurs_within(2, 3)
    union = a | b | c
    assert members(union) == members(a.extend(3)) | members(b) | members(c)
    model = random_markov(V, 1)
    p = lambda q: seqq.exact(model, [0], q)  # noqa: E731
    inclusion_exclusion = (p(a) + p(b) + p(c) - p(a & b) - p(a & c) - p(b & c) + p(a & b & c))
    assert p(union) == pytest.approx(inclusion_exclusion, rel=1e-12)
    assert p(union) == pytest.approx(brute_force(model, [0], union), rel=1e-12)


def test_intersection_complement_and_longer_horizons():
    a, b = Q.event_at(0, 2), Q.count(1, 1, 3, op=">=")
    assert members(a & b) == members(a.extend(3)) & members(b)
    assert members(~b) == set(itertools.product(range(V), repeat=3)) - members(b)
    assert members(a.extend(4)) == {p + (x,) for p in members(a.extend(3)) for x in range(V)}
    with pytest.raises(QueryError, match="shorten"):
        b.extend(2)


def test_a_pattern_automaton_and_within():
    """"0 then 1" read as a pattern: accepted at exactly K, or (within) as soon as it appears."""
    zero, one = Q.Domain(frozenset({0})), Q.Domain(frozenset({1}))
    edges = (((zero, 1), (~zero, 0)), ((one, 2), (zero, 1), (~(zero | one), 0)), ())
    pattern = Q.Automaton(edges, frozenset({2}))
    exactly = Q.automaton(pattern, 4)
    within = Q.automaton(pattern, 4, within=True)
    assert members(exactly) == paths_where(4, lambda p: p[2:] == (0, 1) and
                                           all(p[i:i + 2] != (0, 1) for i in range(2)))
    assert members(within) == paths_where(4, lambda p: any(p[i:i + 2] == (0, 1)
                                                            for i in range(3)))


@pytest.mark.parametrize("order", [1, 2])
def test_dp_over_states_and_automaton_equals_enumeration(order):
    model = random_markov(4, order, seed=order)
    for q in [Q.count(1, 2, 5, op=">="), Q.occurs_within([2, 3], 4), Q.a_before_b(0, [1, 2], 5),
              Q.event_at(0, 2) | Q.hitting_time(3, 4), Q.count(0, 1, 4, op="!=")]:
        truth = brute_force(model, [0, 1], q)
        assert seqq.exact(model, [0, 1], q) == pytest.approx(truth, rel=1e-9, abs=1e-15)
        assert seqq.estimate(model, [0, 1], q, "exact").value == pytest.approx(truth, rel=1e-9)


def test_a_lattice_prunes_what_cannot_be_accepted_in_time():
    """Two 2s are needed in the last 3 steps: the lattice allows 0/1 only while time is left."""
    q = Q.count(2, 2, 4)
    lattice = q.lattice(V)
    root = int(lattice.roots[0])
    assert lattice.allowed[root].all()  # 4 steps left: anything goes
    after_no_two = lattice.advance(torch.tensor([root, root]), torch.tensor([0, 0]))
    after_two_misses = lattice.advance(after_no_two, torch.tensor([1, 1]))
    assert lattice.allowed[after_two_misses[0]].tolist() == [False, False, True]


def test_sets_of_symbols_and_tokens():
    q = Q.event_at(["x", "y"], 2, vocab={"x": 0, "y": 2, "z": 1})
    assert members(q) == paths_where(2, lambda p: p[1] in (0, 2))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Q.hitting_time(7, 3).lattice(5), "outside the model's vocabulary"),
        (lambda: Q.hitting_time(1, 0), "horizon K"),
        (lambda: Q.event_at([], 3), "empty"),
        (lambda: Q.product([[0], []]), "empty"),
        (lambda: Q.a_before_b(1, [1, 2], 3), "share symbols"),
        (lambda: Q.count(0, 4, 3), "count n"),
        (lambda: Q.count(0, 1, 3, op="=="), "comparison"),
        (lambda: Q.hitting_time("q", 2), "vocab="),
        (lambda: Q.hitting_time(-1, 2), "negative"),
        (lambda: Q.Automaton(((( Q.ANY, 3),),), frozenset({0})), "not one of its"),
        (lambda: Q.automaton(Q.Automaton(((((Q.Domain(frozenset({0})), 0),
                                              (Q.Domain(frozenset({0, 1})), 0))),),
                                         frozenset({0})), 2).lattice(3), "two transitions"),
    ],
)
def test_bad_queries_raise_clear_errors(make, message):
    with pytest.raises(QueryError, match=message):
        make()


def test_a_query_without_paths_is_zero_and_costs_nothing():
    q = Q.hitting_time([0, 1, 2], 3)  # a must be avoided twice, but every symbol is a
    assert q.size(V) == 0 and int(q.lattice(V).roots[0]) == -1
    est = seqq.estimate(random_markov(V, 1), [0], q, "importance", samples=10, seed=0)
    assert est.value == 0.0 and est.model_calls == 1


def test_lattice_copies_on_a_device_are_made_once_and_walk_alike():
    """Step loops on a GPU index the lattice there (`on`): one cached copy per device, and
    advancing or tabulating children gives the same nodes wherever it runs. ("meta" stands
    in for a second device: it checks placement and caching, not values.)"""
    from seqq.queries.lattice import concat

    lattice = concat([(Q.hitting_time(1, 3) | Q.hitting_time(2, 4)).lattice(4),
                      Q.hitting_time(0, 2).lattice(4)])
    assert lattice.on("cpu") is lattice  # already there: no copy
    copy = lattice.on("meta")
    assert copy is lattice.on("meta") is lattice.on(torch.device("meta"))  # asked either way
    assert lattice.on(torch.device("cpu")) is lattice
    assert all(c is not lattice for c in lattice.copies.values())  # no cycle keeps copies alive
    assert {t.device.type for t in copy.tables()} == {"meta"}
    nodes = torch.tensor([int(r) for r in lattice.roots])
    assert lattice.advance(nodes.to("meta"), torch.tensor([3, 1])).device.type == "meta"
    assert lattice.child_table(nodes.to("meta")).shape == (2, 4)
    assert lattice.advance(nodes, torch.tensor([3, 1])).device.type == "cpu"


@pytest.mark.parametrize("query", [Q.hitting_time(1, 4), Q.count(2, 2, 4), Q.a_before_b(0, 2, 4),
                                   Q.hitting_time(1, 3) | Q.count(0, 2, 4)],
                         ids=["chain", "count", "before", "union"])
def test_ending_symbols_are_the_allowed_ones_with_a_free_child(query):
    """`ending` skips the [n, V] child table on chain nodes, and `deciding` the [n, V] mask; both
    must agree with the child table everywhere."""
    lattice = query.lattice(4)
    nodes = torch.arange(lattice.num_nodes)
    children = lattice.child_table(nodes)
    expected = (children >= 0) & lattice.free[children.clamp_min(0)]
    assert torch.equal(lattice.ending(nodes), expected)
    assert expected.any()
    assert torch.equal(lattice.deciding(nodes), expected.any(-1))  # nodes with an ending symbol
    assert not lattice.deciding(nodes).all()


def test_excluded_symbols_list_exactly_what_a_node_disallows():
    """`excluded` lists each node's disallowed symbols where all of the nodes disallow at most
    V/EXCLUDED_SHARE, and declines (None) when one disallows more."""
    from seqq.queries.lattice import EXCLUDED_SHARE

    V = 2 * EXCLUDED_SHARE  # nodes may list up to 2 symbols
    lattice = Q.a_before_b(0, 2, 3).lattice(V)  # open nodes disallow {2}; ...
    nodes = (~lattice.free).nonzero().flatten()
    listed = lattice.allowed[nodes].logical_not().sum(-1) <= 2
    assert listed.any() and not listed.all()  # ... the last step allows only 0
    some = nodes[listed]
    excluded = lattice.excluded(some)
    for node, symbols in zip(some.tolist(), excluded.tolist(), strict=True):
        disallowed = (~lattice.allowed[node]).nonzero().flatten().tolist()
        assert sorted(s for s in symbols if s >= 0) == disallowed
    assert lattice.excluded(nodes) is None
    assert lattice.excluded(some[:1]).shape[0] == 1


@pytest.mark.parametrize("query, fits", [(Q.occurs_within([5], 100_000), "K ≤ 1,364"),
                                         (Q.occurs_within([5], 3_000), "K ≤ 1,364"),
                                         (Q.occurs_within([5], 1_000), "K ≤ 682"),
                                         (Q.hitting_time([5], 3_000), "K ≤ 1,364")])
def test_a_lattice_too_large_for_its_cap_is_refused_before_it_is_built(query, fits):
    """Over 49,152 symbols a lattice row is ~1.5 MB while it is built: a horizon whose lattice
    would pass the 2 GiB cap is refused at once, naming the K that fits (two nodes a step for
    `occurs_within` once its states are known), instead of growing until the kernel kills it."""
    from seqq.queries.query import _lattice

    with pytest.raises(QueryError, match=fits):
        _lattice(query.automaton, query.horizon, 49_152)


def test_a_query_prints_as_its_name_and_horizon_not_its_automaton():
    assert repr(Q.hitting_time([5], 4)) == "Query('hitting_time', K = 4, 5 automaton states)"
