"""Randomized beam search against exact answers: unbiased, exact when the beam holds the whole
tree, a lower bound without samples, one call per kept node, in budget."""

import pytest
import torch
from oracles import PrefixRecording, brute_force, chain_masks, random_markov, tiny_gpt2
from test_estimators import CASES, assert_unbiased, replicas
from test_smc import _importance_variance
from test_twisted import CASES as TWISTED_CASES
from test_twisted import HISTORIES, QUERIES, SELF_TWISTED, as_own_surrogate, fitted_surrogate, truth_of

import seqq
from seqq import queries as Q
from seqq.errors import BudgetError, QueryError
from seqq.models import MarkovModel


@pytest.fixture(params=CASES, ids=[c[0] for c in CASES])
def case(request):
    _, make, history, query = request.param
    model = make()
    return model, history, query, brute_force(model, history, query)


@pytest.mark.parametrize("top, sampled", [(2, 2), (0, 3), (3, 1)])
def test_randomized_beam_is_unbiased(case, top, sampled):
    model, history, query, truth = case
    estimates = replicas(model, history, query, "randomized_beam", top=top, sampled=sampled)
    assert_unbiased(estimates, truth)
    # the mean of independent replicates, with their standard error and interval
    assert all(e.stderr is not None and e.ci_low <= e.value <= e.ci_high
               and not e.is_lower_bound for e in estimates)


@pytest.mark.parametrize("V, K", [(5, 12), (12, 9)])
def test_randomized_beam_is_unbiased_at_long_horizons(V, K):
    model = random_markov(V, 1, seed=V + K)
    query = Q.hitting_time(1, K)
    assert_unbiased(replicas(model, [0], query, "randomized_beam", top=3, sampled=4),
                    seqq.exact(model, [0], query))


def test_an_iid_model_is_answered_exactly():
    """The kept nodes' ŵ always sum to the exact mass of all candidates."""
    model = MarkovModel.iid([0.5, 0.3, 0.2])
    for est in replicas(model, [1], Q.hitting_time(0, 6), "randomized_beam", top=1, sampled=2)[:10]:
        assert est.value == pytest.approx(0.5**6, rel=1e-12)


def test_a_beam_that_holds_the_whole_tree_is_exact(case):
    model, history, query, truth = case
    widest = query.size(model.vocab_size)
    est = seqq.estimate(model, history, query, "randomized_beam", top=0, sampled=widest, seed=0)
    assert est.value == pytest.approx(truth, rel=1e-6)  # float32 models


def test_without_samples_it_is_a_lower_bound(case):
    model, history, query, truth = case
    est = seqq.estimate(model, history, query, "randomized_beam", top=3, sampled=0)
    assert est.is_lower_bound and est.value <= truth * (1 + 1e-9)


def test_one_call_per_distinct_prefix():
    """Kept nodes cost one call each: a-before-b is one automaton, so its ways of avoiding
    a and b share every prefix instead of paying for it once per product."""
    model = PrefixRecording(tiny_gpt2())
    query = Q.a_before_b(0, 1, 5)
    for seed in range(4):
        est = seqq.estimate(model, [2, 3], query, "randomized_beam", top=2, sampled=3, seed=seed,
                            replicates=1)  # one run: its own calls
        sizes = est.extras["beam_sizes"][0]  # nodes kept at depths 1..L-1
        assert all(s <= 5 for s in sizes)
        assert len(set(model.evaluated)) == len(model.evaluated) == est.model_calls
        assert est.model_calls == 1 + sum(sizes)
        model.evaluated.clear()


def test_a_budget_buys_the_widest_beam_that_fits():
    model = random_markov(6, 1, seed=3)
    query = Q.hitting_time(2, 5)  # width W costs at most 1 + Σ_{k<5} min(W, 5**k) calls

    def worst(W):
        return 1 + sum(min(W, 5**k) for k in range(1, 5))

    for budget, options in [(30, {}), (200, {}), (200, {"top": 4}), (200, {"sampled": 30})]:
        est = seqq.estimate(model, [0], query, "randomized_beam", budget=budget, seed=0,
                            replicates=1, **options)
        (top,), (sampled,) = est.extras["top"], est.extras["sampled"]
        W = top + sampled
        assert est.model_calls <= worst(W) <= budget < worst(W + 1)
        if not options:
            assert sampled == W - W // 2  # an even split, never without samples
        assert top == options.get("top", top) and sampled == options.get("sampled", sampled)
    with pytest.raises(BudgetError, match="randomized_beam"):
        seqq.estimate(model, [0], query, "randomized_beam", budget=4)


def test_randomized_beam_beats_importance_sampling_on_a_long_horizon():
    """The sticky two-regime chain of test_smc: IS weights vary wildly, the beam's do not."""
    model = MarkovModel(torch.tensor([[0.1, 0.45, 0.45], [0.5, 0.45, 0.05],
                                      [0.01, 0.09, 0.9]]), 1)
    query = Q.hitting_time(0, 20)
    importance = _importance_variance(model, 1, chain_masks(query, 3)) / 16
    values = torch.tensor([e.value for e in seqq.estimate_many(
        model, [[1]] * 400, query, "randomized_beam", top=8, sampled=8, seed=5)],
        dtype=torch.float64)
    assert values.var().item() < importance / 10
    se = (values.var().item() / len(values)) ** 0.5
    assert abs(values.mean().item() - seqq.exact(model, [1], query)) <= 4 * se


def test_negative_sizes_get_a_clear_error():
    with pytest.raises(QueryError, match="top must be an integer ≥ 0"):
        seqq.estimate(random_markov(4, 1), [0], Q.hitting_time(1, 3), "randomized_beam", top=-1)


def test_an_empty_query_gives_zero_beside_others():
    model = random_markov(3, 1)
    empty, other = seqq.estimate_many(model, [[0], [1]], [Q.hitting_time([0, 1, 2], 3),
                                                          Q.hitting_time(1, 3)],
                                      "randomized_beam", budget=50, seed=0)
    assert empty.value == 0.0 and "empty" in empty.note and other.value > 0


@pytest.mark.parametrize("make, history, query, order", [c[1:] for c in TWISTED_CASES],
                         ids=[c[0] for c in TWISTED_CASES])
def test_a_twisted_beam_is_unbiased_with_a_fitted_surrogate(make, history, query, order):
    model = make()
    estimates = replicas(model, history, query, "randomized_beam", top=2, sampled=2,
                         surrogate=fitted_surrogate(model, history, order))
    assert_unbiased(estimates, truth_of(model, history, query))


@pytest.mark.parametrize("make, grouped", [c[1:] for c in SELF_TWISTED],
                         ids=[c[0] for c in SELF_TWISTED])
def test_a_beam_twisted_by_the_model_itself_is_exact(make, grouped, monkeypatch):
    """Then ŵ·ψ of every candidate is its exact share of p(Q), and each draw carries S̃/sampled."""
    estimates, model = as_own_surrogate(make, grouped, "randomized_beam", monkeypatch, top=1,
                                        sampled=2)
    for est, history, query in zip(estimates, HISTORIES, QUERIES, strict=True):
        assert est.value == pytest.approx(seqq.exact(model, history, query), rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("V", [300, 4101])  # and from BLOCKED_VOCAB, the head found by blocks
def test_randomized_beam_is_unbiased_with_excluded_symbol_lists(V):
    # V = 300 lets the lattice list the one excluded symbol per node (`Lattice.excluded`):
    # the domains, the masses left and the tail's domain (head candidates removed) are lists
    # peaked rows: the head holds much of the mass, so a tail that held it too would be biased
    from seqq.estimators.engine.beam_search import BLOCKED_VOCAB
    assert V < BLOCKED_VOCAB or V == BLOCKED_VOCAB + 5
    model = MarkovModel.random(vocab_size=V, order=1, concentration=0.05, seed=4)
    query = Q.hitting_time(3, 3)
    assert batch_domains_are_lists(model, query)
    assert_unbiased(replicas(model, [0], query, "randomized_beam", top=10, sampled=40),
                    seqq.exact(model, [0], query))


def batch_domains_are_lists(model, query) -> bool:
    from seqq.estimators.engine.batch import prepare
    from seqq.estimators.engine.categorical import Excluded
    batch = prepare(model, [[0]], [query], seed=0)
    return isinstance(batch.domain(batch.branch_root, sparse=True), Excluded)
