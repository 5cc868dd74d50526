"""The union estimators (`mixture`, `klm`) against inclusion–exclusion: unbiased over many
seeds, honest standard errors, calls within budget, clear errors."""

import itertools
import math

import pytest
import torch
from oracles import PrefixRecording, brute_force, random_markov, tiny_gpt2, tiny_lstm

import seqq
from seqq import queries as Q
from seqq.errors import BudgetError, QueryError

SEEDS = 240  # independent replicas, run as one batched call
METHODS = ("mixture", "klm")


def inclusion_exclusion(model, history, parts):
    """p(∪ parts) = Σ_S (−1)^{|S|+1} p(∩ S), each intersection compiled and answered exactly."""
    return sum((-1) ** (len(s) + 1) * seqq.exact(model, history, Q.intersection(*s))
               for n in range(1, len(parts) + 1) for s in itertools.combinations(parts, n))


def values(estimates):
    return torch.tensor([e.value for e in estimates], dtype=torch.float64)


def assert_unbiased(estimates, truth):
    v = values(estimates)
    assert not torch.isnan(v).any()
    se = v.std() / math.sqrt(len(v))
    assert abs(v.mean().item() - truth) <= 4 * se.item() + 1e-12, (v.mean(), truth, se)


# Overlapping parts of different kinds (and horizons) on every model family.
CASES = [
    ("markov", lambda: random_markov(5, 1, seed=9), [0],
     [Q.event_at(1, 3), Q.occurs_within(2, 4), Q.count(3, 2, 4, op=">=")]),
    ("markov-order2", lambda: random_markov(6, 2, seed=6), [1, 4],
     [Q.a_before_b(2, [3, 4], 4), Q.count(3, 1, 3, op=">="), Q.event_at([0, 3], 2)]),
    ("lstm", tiny_lstm, [0, 3, 1],
     [Q.occurs_within(3, 4), Q.count(1, 2, 4, op=">="), Q.event_at([0, 3], 2)]),
    ("gpt2", tiny_gpt2, [1, 0, 3],
     [Q.a_before_b(0, 1, 4), Q.event_at(2, 3), Q.occurs_within(4, 3)]),
]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def case(request):
    _, make, history, parts = request.param
    model = make()
    return model, history, parts, inclusion_exclusion(model, history, parts)


def test_inclusion_exclusion_is_the_union(case):
    model, history, parts, truth = case
    assert 0.05 < truth < 0.95  # overlapping, neither trivial nor rare
    assert truth < sum(seqq.exact(model, history, p) for p in parts) - 1e-3  # they overlap
    tolerance = 1e-6  # float32 networks (1e-9 on Markov chains' float64 DP)
    assert brute_force(model, history, Q.union(*parts, compile=False)) == pytest.approx(
        truth, abs=tolerance)
    assert seqq.exact(model, history, Q.union(*parts)) == pytest.approx(truth, abs=tolerance)


@pytest.mark.parametrize("method", METHODS)
def test_unbiased_on_uncompiled_unions(case, method):
    model, history, parts, truth = case
    union = Q.union(*parts, compile=False)
    estimates = seqq.estimate_many(model, [history] * SEEDS, union, method, seed=11, samples=3)
    assert_unbiased(estimates, truth)
    assert all(e.num_samples == 3 * len(parts) for e in estimates)
    # the reported stderr is the spread the estimates really have (one sample of 240)
    reported = torch.tensor([e.stderr ** 2 for e in estimates]).mean()
    assert 0.5 < (values(estimates).var() / reported).item() < 2


@pytest.mark.parametrize("method", METHODS)
def test_unbiased_within_a_budget(case, method):
    model, history, parts, truth = case
    union = Q.union(*parts, compile=False)
    estimates = seqq.estimate_many(model, [history] * SEEDS, union, method, seed=12, budget=40)
    assert_unbiased(estimates, truth)
    assert all(e.model_calls <= 40 for e in estimates)
    # a draw of every part costs at most 3 · (4 − 1) = 9 calls, so rounds leave less than 9
    assert all(e.model_calls > 40 - 9 for e in estimates)


@pytest.mark.parametrize("method", METHODS)
def test_one_batch_of_different_unions(method):
    """Tasks with 3 parts, 2 parts (one empty, one a nested uncompiled union) and a plain
    query (its own one part) share one batch; each stays unbiased."""
    model = random_markov(5, 1, seed=3)
    history = [2]
    a, b, c = Q.hitting_time(1, 3), Q.occurs_within(0, 3), Q.count(4, 2, 4, op="=")
    empty = Q.event_at(1, 2) & Q.event_at(2, 2)
    queries = [Q.union(a, b, c, compile=False),
               Q.union(Q.union(a, empty, compile=False), c, compile=False),
               c,
               a | b]  # compiled: estimated from its parts
    truths = [inclusion_exclusion(model, history, [a, b, c]),
              inclusion_exclusion(model, history, [a, c]),
              seqq.exact(model, history, c),
              inclusion_exclusion(model, history, [a, b])]
    reps = 120
    estimates = seqq.estimate_many(model, [history] * (reps * 4), queries * reps, method,
                                   seed=5, samples=4)
    for i, truth in enumerate(truths):
        assert_unbiased(estimates[i::4], truth)


@pytest.mark.parametrize("method", METHODS)
def test_calls_are_counted_and_bounded(method):
    model = PrefixRecording(tiny_lstm())
    parts = [Q.event_at(1, 2), Q.occurs_within(2, 4), Q.count(0, 2, 3, op=">=")]
    union = Q.union(*parts, compile=False)
    estimates = seqq.estimate_many(model, [[0], [3, 1]], union, method, seed=0, samples=10)
    assert sum(e.model_calls for e in estimates) == model.rows  # every row served is charged
    # a path runs until all parts are decided: at most L_max − 1 = 3 calls
    assert all(1 <= e.model_calls <= 1 + 3 * 10 * 3 for e in estimates)
    # parts all decided by the first symbol: nothing to pay beyond p(X_1 | history)
    first = Q.union(Q.next_event(1), Q.next_event([1, 2]), compile=False)
    assert seqq.estimate(model, [0], first, method, samples=50, seed=0).model_calls == 1


@pytest.mark.parametrize("method", METHODS)
def test_disjoint_single_symbol_parts_are_exact(method):
    """Parts decided by X_1 and disjoint: every path of part i weighs p(Q_i), and with equal
    samples per part (stratified, not a random choice of part) the sum has no noise."""
    model = random_markov(5, 1, seed=1)
    union = Q.union(Q.next_event([1, 2]), Q.next_event(3), compile=False)
    estimate = seqq.estimate(model, [0], union, method, samples=7, seed=0)
    assert estimate.value == pytest.approx(seqq.exact(model, [0], Q.next_event([1, 2, 3])),
                                           abs=1e-9)
    assert estimate.stderr == pytest.approx(0, abs=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_union_of_empty_parts_is_zero(method):
    model = random_markov(5, 1, seed=1)
    empty = Q.event_at(1, 2) & Q.event_at(2, 2)
    union = Q.union(empty, Q.hitting_time(3, 1) & Q.event_at(4, 1), compile=False)
    for budget in (None, 10):
        estimate = seqq.estimate(model, [0], union, method, budget=budget, seed=0)
        assert (estimate.value, estimate.model_calls) == (0.0, 1)
        assert "empty" in estimate.note


def test_bad_input_is_one_line():
    model = random_markov(5, 1, seed=1)
    union = Q.union(Q.event_at(1, 2), Q.event_at(2, 3), compile=False)
    failures = [
        (QueryError, "mixture", lambda: seqq.estimate(model, [0], union, "importance")),
        (QueryError, "samples", lambda: seqq.estimate(model, [0], union, "klm", samples=0)),
        (QueryError, "beam_width", lambda: seqq.estimate(model, [0], union, "mixture",
                                                         beam_width=3)),
        (BudgetError, "raise the budget", lambda: seqq.estimate(model, [0], union, "klm",
                                                                budget=3)),
        (QueryError, "at least one query", lambda: Q.union(compile=False)),
    ]
    for error, words, call in failures:
        with pytest.raises(error, match=words) as raised:
            call()
        assert "\n" not in str(raised.value)
