"""`exact` against closed forms (i.i.d.), brute force (Markov, LSTM) and forward DP (Markov)."""

import math

import pytest
from oracles import WithoutConcat, brute_force, random_markov, tiny_gpt2, tiny_lstm

import seqq
from seqq import queries as Q
from seqq.models import MarkovModel, TemperatureModel

PI = [0.5, 0.2, 0.2, 0.1]
IID = MarkovModel.iid(PI)


def enumerate_exact(model, history, query):
    return seqq.estimate(model, history, query, "exact").value


@pytest.mark.parametrize("answer", [seqq.exact, enumerate_exact])
def test_iid_closed_forms(answer):
    a, b, K = 1, 3, 5
    pa, pb = PI[a], PI[b]
    assert answer(IID, [0], Q.event_at(a, K)) == pytest.approx(pa, abs=1e-9)
    assert answer(IID, [0], Q.hitting_time(a, K)) == pytest.approx((1 - pa) ** (K - 1) * pa, abs=1e-9)
    before = answer(IID, [0], Q.a_before_b(a, b, K))
    after = answer(IID, [0], Q.a_before_b(b, a, K))
    closed = pa * (1 - (1 - pa - pb) ** K) / (pa + pb)
    assert before == pytest.approx(closed, abs=1e-9)
    assert 1 - before - after == pytest.approx((1 - pa - pb) ** K, abs=1e-9)  # unaccounted
    for n in range(K + 1):
        binomial = math.comb(K, n) * pa**n * (1 - pa) ** (K - n)
        assert answer(IID, [0], Q.count(a, n, K)) == pytest.approx(binomial, abs=1e-9)


def test_iid_a_before_b_reference_value():
    # seed-notes §6: p(τ(a) < τ(b)) = 0.6662, truncated at K=10: 0.5996, unaccounted 0.1000;
    # those numbers pin π_a + π_b = 1 - 0.1^(1/10) and π_a / (π_a + π_b) = 0.6662
    both = 1 - 0.1**0.1
    pa, pb = 0.6662 * both, 0.3338 * both
    iid = MarkovModel.iid([pa, pb, 1 - both])
    truncated = seqq.exact(iid, [0], Q.a_before_b(0, 1, 10))
    other = seqq.exact(iid, [0], Q.a_before_b(1, 0, 10))
    assert truncated == pytest.approx(pa * (1 - (1 - both) ** 10) / both, abs=1e-12)
    assert truncated == pytest.approx(0.5996, abs=1e-4)
    assert 1 - truncated - other == pytest.approx(0.1000, abs=1e-9)


def test_importance_has_zero_variance_on_iid():
    exact = seqq.exact(IID, [0], Q.hitting_time(1, 6))
    for seed in range(3):
        one = seqq.estimate(IID, [0], Q.hitting_time(1, 6), "importance", samples=1, seed=seed)
        assert one.value == pytest.approx(exact, rel=1e-6)


@pytest.mark.parametrize("V, order, K", [(5, 1, 5), (7, 2, 4), (4, 1, 6)])
def test_markov_dp_equals_brute_force_and_enumeration(V, order, K):
    model = random_markov(V, order, seed=V + K)
    history = [1, 2][:order] or [0]
    for query in [Q.hitting_time(2, K), Q.a_before_b(0, [1, 3], K), Q.count(1, 2, K),
                  Q.event_at([0, 2], K)]:
        truth = brute_force(model, history, query)
        assert seqq.exact(model, history, query) == pytest.approx(truth, rel=1e-9, abs=1e-14)
        assert enumerate_exact(model, history, query) == pytest.approx(truth, rel=1e-5)


@pytest.mark.parametrize("V", [5, 12, 20])
def test_markov_dp_at_long_horizons_is_consistent(V):
    # the hitting-time distribution sums with the survival probability to one, at K = 12
    model = random_markov(V, 1, seed=V)
    hits = sum(seqq.exact(model, [0], Q.hitting_time(3, k)) for k in range(1, 13))
    survive = seqq.exact(model, [0], Q.product([{i for i in range(V) if i != 3}] * 12))
    assert hits + survive == pytest.approx(1.0, abs=1e-12)


def test_lstm_enumeration_equals_brute_force():
    model = tiny_lstm()
    history = [0, 3, 1]
    for query in [Q.hitting_time(2, 4), Q.count(4, 2, 4), Q.a_before_b(1, 2, 3)]:
        truth = brute_force(model, history, query)
        assert enumerate_exact(model, history, query) == pytest.approx(truth, rel=1e-5)


def test_exact_entropy_matches_markov_dp():
    model = random_markov(6, 1, seed=1)
    query = Q.hitting_time(2, 5)
    est = seqq.estimate(model, [0], query, "exact")
    assert est.entropy == pytest.approx(model.restricted_entropy([0], query), rel=1e-5)


def test_temperature_changes_the_target():
    model = random_markov(5, 1, seed=2)
    for T in (0.5, 2.0):
        wrapped = TemperatureModel(model, T)
        query = Q.hitting_time(1, 4)
        expected = seqq.exact(model.tempered(T), [0], query)
        assert enumerate_exact(wrapped, [0], query) == pytest.approx(expected, rel=1e-5)
    assert seqq.exact(model.tempered(0.5), [0], query) != pytest.approx(seqq.exact(model, [0], query))


def test_probabilities_below_float32_range_come_out_right():
    iid = MarkovModel.iid([1e-12, 1 - 1e-12])
    query = Q.count(0, 8, 8)  # p = 1e-96, far below float32's smallest normal
    for method in ("exact", "importance", "hybrid", "beam"):
        est = seqq.estimate(iid, [1], query, method, seed=0)
        assert est.log_value == pytest.approx(8 * math.log(1e-12), rel=1e-6)
        assert est.value == pytest.approx(1e-96, rel=1e-5)
    assert seqq.exact(iid, [1], query) == pytest.approx(1e-96, rel=1e-9)
    assert not math.isnan(seqq.estimate(iid, [1], query, "naive", samples=50, seed=0).value)


@pytest.mark.parametrize("method", ["exact", "importance", "naive", "uniform", "beam", "tail_beam",
                                    "coverage_beam", "hybrid"])
def test_impossible_events_give_zero_never_nan(method):
    model = MarkovModel.iid([0.5, 0.5, 0.0])  # symbol 2 has probability exactly 0
    for query in (Q.hitting_time(2, 3), Q.count(2, 1, 3), Q.a_before_b(2, 0, 3)):
        est = seqq.estimate(model, [0], query, method, seed=0)
        assert est.value == 0.0 and not math.isnan(est.log_value)
        assert est.entropy is None or not math.isnan(est.entropy)
        assert est.stderr is None or not math.isnan(est.stderr)


@pytest.mark.parametrize("joinable", [True, False])
@pytest.mark.parametrize("network", [tiny_lstm, tiny_gpt2])
def test_enumeration_through_many_row_chunks_equals_brute_force(network, joinable, monkeypatch):
    """Enumeration steps each level's children in pieces of 5 rows, each stepped in chunks of 2
    rows whose states are never joined; a child's parents then lie in several chunks (joined
    by `concat`, or stepped apart without it). The answers of several queries at once must
    still be brute force's, and the restricted entropies those of one piece per level."""
    from seqq.estimators.methods import exact as exact_module
    from seqq.models.batching import set_chunk_rows

    model = network(V=4, seed=2) if joinable else WithoutConcat(network(V=4, seed=2))
    histories = [[1], [2, 0], [3]]
    queries = [Q.hitting_time(2, 4), Q.a_before_b(0, 3, 3), Q.count(1, 2, 4)]
    whole = seqq.estimate_many(model, histories, queries, "exact")
    monkeypatch.setattr(exact_module, "rows_within", lambda width: 5)
    set_chunk_rows(model, 2)
    pieces = seqq.estimate_many(model, histories, queries, "exact")
    for history, query, one, many in zip(histories, queries, whole, pieces, strict=True):
        assert many.value == pytest.approx(brute_force(model, history, query), rel=1e-5)
        assert many.value == pytest.approx(one.value, rel=1e-6)
        assert many.entropy == pytest.approx(one.entropy, rel=1e-6)
        assert many.model_calls == one.model_calls


def test_a_budget_given_to_exact_is_its_cost_cap() -> None:
    """A budget means at most that many calls, for every method: `exact`, which spends no
    budget, refuses a query costlier than it (it ran 21 calls on `budget=5` before), answers
    within it, and refuses a budget beside its own cap as ambiguous (the rule lives once, in
    the driver: `auto` and `seqq ask` pass budgets through it)."""
    model, query = random_markov(V=5, seed=1), Q.hitting_time(2, K=3)
    with pytest.raises(seqq.BudgetError, match="max_calls"):
        seqq.estimate(model, [0], query, "exact", budget=5)
    within = seqq.estimate(model, [0], query, "exact", budget=100)
    assert within.exact and within.model_calls <= 100
    with pytest.raises(seqq.QueryError, match="not both"):
        seqq.estimate(model, [0], query, "exact", budget=100, max_calls=100)
