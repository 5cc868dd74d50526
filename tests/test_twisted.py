"""Twisted importance sampling against exact answers: unbiased with any surrogate, exact with
the model itself as surrogate (Markov or HPYP), IS's call counts, lower variance with a fitted
surrogate; and the surrogate `fit_surrogate` fits, against hand-computed Kneser–Ney values."""

import importlib
import math

import pytest
import torch
from oracles import PrefixRecording, brute_force, random_markov, tiny_gpt2, tiny_lstm

import seqq
from seqq import queries as Q
from seqq.errors import QueryError
from seqq.estimators.surrogates import distill_surrogate, fit_surrogate
from seqq.models import MarkovModel
from seqq.models.hpyp import PAPER_DISCOUNTS, HPYPModel

SEEDS = 240


def draw(model, history, n, length, seed=0):
    """n sequences history + `length` symbols sampled from the model: a surrogate's corpus."""
    g = torch.Generator().manual_seed(seed)
    log_probs, state = model.initial_state([history] * n)
    drawn = []
    for _ in range(length):
        x = torch.multinomial(log_probs.double().exp(), 1, generator=g)[:, 0]
        drawn.append(x)
        log_probs, state = model.step(state, x)
    return [list(history) + row for row in torch.stack(drawn, 1).tolist()]


def symbols(V):
    return [str(v) for v in range(V)]


def fitted_surrogate(model, history, order, n=200, length=12):
    """An HPYP n-gram of `order` (n − 1 symbols of context) fitted on sampled sequences."""
    return fit_surrogate(draw(model, history, n, length), symbols(model.vocab_size), order)


def truth_of(model, history, query):
    """Forward DP for Markov models, brute-force enumeration through the protocol otherwise."""
    if isinstance(model, MarkovModel):
        return seqq.exact(model, history, query)
    return brute_force(model, history, query)


def values(estimates):
    return torch.tensor([e.value for e in estimates], dtype=torch.float64)


# model, history, query, HPYP order of the surrogate fitted on samples of the model
CASES = [
    ("markov", lambda: random_markov(8, 1, seed=5), [2], Q.hitting_time(3, 5), 2),
    ("markov-order2", lambda: random_markov(6, 2, seed=6), [1, 4], Q.hitting_time([0, 5], 4), 2),
    ("markov-count", lambda: random_markov(5, 1, seed=7), [0], Q.count(1, 2, 4), 3),
    ("markov-before", lambda: random_markov(6, 2, seed=8), [0, 1], Q.a_before_b(2, [3, 4], 4), 3),
    ("lstm", tiny_lstm, [0, 3, 1], Q.hitting_time(2, 5), 3),
    ("lstm-count", tiny_lstm, [4], Q.count(0, 1, 4), 3),
    ("gpt2", tiny_gpt2, [1, 0, 3], Q.hitting_time(4, 4), 3),
    ("gpt2-before", tiny_gpt2, [2], Q.a_before_b(0, 1, 4), 4),  # history shorter than the context
]


TRIE_METHODS = [("twisted", {"samples": 10}), ("wor", {"samples": 3, "tail_samples": 3}),
                ("hybrid", {"samples": 4, "max_width": 3}), ("twisted", {"budget": 30})]


@pytest.mark.parametrize("method, options", TRIE_METHODS,
                         ids=[f"{m}-{'-'.join(o)}" for m, o in TRIE_METHODS])
@pytest.mark.parametrize("make, history, query, order", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_trie_methods_are_unbiased_with_a_fitted_surrogate(make, history, query, order, method,
                                                           options):
    """twisted, and wor and hybrid with surrogate=, draw from q̃ through the prefix trie."""
    model = make()
    surrogate = fitted_surrogate(model, history, order)
    truth = truth_of(model, history, query)
    estimates = seqq.estimate_many(model, [history] * SEEDS, query, method, seed=3,
                                   surrogate=surrogate, **options)
    if method != "twisted":  # p(S) bounds below under any proposal; 1 − q̃(S) bounds nothing
        assert all(e.lower <= truth * (1 + 1e-5) and (e.exact or e.upper == 1.0)
                   for e in estimates), [(e.lower, e.upper, truth) for e in estimates]
    v = values(estimates)
    se = v.std().item() / math.sqrt(SEEDS)
    assert abs(v.mean().item() - truth) <= 4 * se + 1e-12, (v.mean(), truth, se)


def fitted_hpyp(V=6, order=4, seed=0):
    """A sparse-context HPYP model over V symbols (some contexts unseen), used as a model."""
    g = torch.Generator().manual_seed(seed)
    corpus = [[0] + torch.randint(1, V, (30,), generator=g).tolist() for _ in range(20)]
    return HPYPModel.fit(corpus, symbols(V), order)


SELF_TWISTED = [("markov-1", lambda: random_markov(6, 1, seed=1), False),
                ("markov-2", lambda: random_markov(6, 2, seed=2), False),
                ("markov-2-grouped", lambda: random_markov(6, 2, seed=2), True),
                ("hpyp", fitted_hpyp, False)]
HISTORIES = [[0, 1], [3, 3], [5, 2], [1, 0]]  # shorter than the HPYP context
QUERIES = [Q.hitting_time(2, 6), Q.a_before_b(1, [0, 4], 5), Q.count(3, 2, 5),
           Q.union(Q.product([[0, 1], None, [2]]), Q.product([[3], [4, 5], None]))]


def as_own_surrogate(make, grouped, method, monkeypatch, **options):
    """Estimates of QUERIES with the model as its own surrogate, and the model.
    `grouped`: messages too big for one batch make every task a group of its own."""
    if grouped:
        monkeypatch.setattr(importlib.import_module("seqq.estimators.driver"), "MESSAGE_VALUES", 1)
        monkeypatch.setattr(importlib.import_module("seqq.estimators.methods.smc"), "rows_within",
                            lambda width: 1)
    model = make()
    return seqq.estimate_many(model, HISTORIES, QUERIES, method, seed=0, surrogate=model,
                              **options), model


@pytest.mark.parametrize("make, grouped", [c[1:] for c in SELF_TWISTED],
                         ids=[c[0] for c in SELF_TWISTED])
def test_the_model_as_its_own_surrogate_gives_zero_variance(make, grouped, monkeypatch):
    """Then q̃ is p(· | X ∈ product), so every weight equals the product's probability."""
    estimates, model = as_own_surrogate(make, grouped, "twisted", monkeypatch, samples=5)
    for est, history, query in zip(estimates, HISTORIES, QUERIES, strict=True):
        truth = seqq.exact(model, history, query)
        assert est.value == pytest.approx(truth, rel=1e-9)
        assert est.stderr <= 1e-6 * truth  # the sample variance formula's rounding floor
        full_price = 1 + 5 * (int(query.lattice(6).effective_lengths()[0]) - 1)
        assert est.model_calls <= full_price  # shared prefixes and early decisions are free


def test_a_fitted_surrogate_beats_importance_at_equal_calls():
    """A hitting time far ahead: q ignores the target, the twist steers towards it. The
    surrogate is an HPYP trigram fitted on 4,000 sampled symbols, so it is close but not equal
    to the model."""
    model = random_markov(6, 2, seed=11)
    history, query = [0, 1], Q.hitting_time(5, 7)
    surrogate = fitted_surrogate(model, history, order=3, n=200, length=20)
    spread = {}
    for method, options in (("importance", {}), ("twisted", {"surrogate": surrogate})):
        estimates = seqq.estimate_many(model, [history] * SEEDS, query, method, budget=61,
                                       seed=5, **options)  # importance re-uses cached prefixes
        spread[method] = values(estimates).var().item()
        assert max(e.model_calls for e in estimates) <= 61
    assert spread["twisted"] < spread["importance"] / 10, spread


@pytest.mark.parametrize("K, S", [(1, 7), (4, 10), (6, 3)])
def test_twisted_pays_once_per_distinct_prefix(K, S):
    """Twisted draws go through the prefix trie: one call per distinct prefix evaluated."""
    model = PrefixRecording(tiny_lstm())
    surrogate = MarkovModel.random(5, 2, seed=0)
    est = seqq.estimate(model, [0], Q.hitting_time(1, K), "twisted", samples=S, seed=0,
                        surrogate=surrogate)
    assert est.model_calls == len(model.evaluated) == len(set(model.evaluated))
    assert est.model_calls <= 1 + S * (K - 1)


def test_a_budget_is_spent_in_rounds_through_the_trie():
    """The first round buys what the calls left pay for at full price (3 calls for a-before-b
    at K = 4); later ones what they buy at the last cost per draw, so the budget is spent up to
    less than one full-price draw, unless the cap on cached draws comes first."""
    surrogate = MarkovModel.random(5, 2, seed=0)
    query = Q.a_before_b(1, 2, 4)
    for budget in (4, 60, 64):
        est = seqq.estimate(tiny_lstm(), [0], query, "twisted", budget=budget, seed=0,
                            surrogate=surrogate)
        full_price_draws = (budget - 1) // 3
        assert full_price_draws <= est.num_samples
        assert est.model_calls <= budget
        assert budget - 3 < est.model_calls or est.num_samples == 100 * full_price_draws


def test_messages_are_computed_once_per_surrogate_and_query(monkeypatch):
    """A second call with the same surrogate and queries reads the cached messages (and gives
    the same estimates); another surrogate object computes its own."""
    twisted_module = importlib.import_module("seqq.estimators.engine.twist")
    computed = []
    backward = twisted_module.backward_messages
    monkeypatch.setattr(twisted_module, "backward_messages",
                        lambda *args: computed.append(len(args[3])) or backward(*args))
    model = random_markov(6, 2, seed=11)
    queries = [Q.hitting_time(5, 4), Q.a_before_b(1, 2, 3), Q.hitting_time(5, 4)]
    histories = [[0, 1], [2, 3], [4, 0]]
    surrogate = MarkovModel.random(6, 2, seed=3)
    first = seqq.estimate_many(model, histories, queries, "twisted", samples=50, seed=1,
                               surrogate=surrogate)
    assert len(computed) == 1
    again = seqq.estimate_many(model, histories[:2], queries[:2], "wor", samples=50, seed=1,
                               surrogate=surrogate)
    assert len(computed) == 1 and len(again) == 2
    same = seqq.estimate_many(model, histories, queries, "twisted", samples=50, seed=1,
                              surrogate=surrogate)
    assert [e.value for e in same] == [e.value for e in first] and len(computed) == 1
    seqq.estimate_many(model, histories, queries, "twisted", samples=50, seed=1,
                       surrogate=MarkovModel.random(6, 2, seed=3))
    assert len(computed) == 2


@pytest.mark.parametrize("make", [lambda: random_markov(5, 1, seed=2), tiny_gpt2],
                         ids=["markov", "gpt2"])
@pytest.mark.parametrize("method, options, untwisted", [
    ("twisted", {"samples": 20}, "importance"), ("wor", {"samples": 3}, "wor"),
    ("smc", {"particles": 20}, "smc"), ("randomized_beam", {}, "randomized_beam")])
def test_a_one_state_surrogate_on_a_chain_is_the_untwisted_method(make, method, options,
                                                                   untwisted):
    """An i.i.d. surrogate cannot tell prefixes apart, and a product's lattice is a chain, so
    the twist is flat (one value per row, never spread over V): q̃ = q, and every twisted
    method gives its untwisted estimate for the same seed. (On a-before-b it is not: reaching
    b ends the query.) To float32 rounding: the twisted path adds the twist in float64."""
    model = make()
    query = Q.hitting_time(1, 4)
    iid = MarkovModel.iid([0.1, 0.2, 0.3, 0.2, 0.2])
    twisted = seqq.estimate(model, [0], query, method, seed=4, surrogate=iid, **options)
    plain = seqq.estimate(model, [0], query, untwisted, seed=4, **options)
    assert twisted.value == pytest.approx(plain.value, rel=1e-6) and twisted.method == method


def test_an_empty_query_is_zero_alone_or_in_a_batch():
    model = random_markov(4, 1, seed=2)
    empty = Q.hitting_time([0, 1, 2, 3], 2)  # no symbol is left for position 1
    alone = seqq.estimate(model, [0], empty, "twisted", samples=4, seed=0, surrogate=model)
    mixed = seqq.estimate_many(model, [[0], [1]], [empty, Q.hitting_time(1, 3)], "twisted",
                               samples=4, seed=0, surrogate=model)
    for est in (alone, mixed[0]):
        assert est.value == 0.0 and "empty" in est.note and est.model_calls == 1
    assert mixed[1].value == pytest.approx(seqq.exact(model, [1], Q.hitting_time(1, 3)))


def test_bad_surrogates_are_refused():
    model = random_markov(5, 1, seed=2)
    with pytest.raises(QueryError, match="fit_surrogate"):
        seqq.estimate(model, [0], Q.hitting_time(1, 3), "twisted")
    for method in ("twisted", "smc"):
        with pytest.raises(QueryError, match="4 symbols"):
            seqq.estimate(model, [0], Q.hitting_time(1, 3), method,
                          surrogate=MarkovModel.random(4, 1))
        with pytest.raises(QueryError, match="ContextAutomaton"):
            seqq.estimate(model, [0], Q.hitting_time(1, 3), method, surrogate=tiny_lstm())


@pytest.mark.slow
def test_the_sweep_fits_the_surrogate_on_the_training_split(tmp_path):
    from conftest import compose_sweep, tiny_overrides

    from seqq.reports.tables import load_results
    from seqq.sweeps import sweep

    cfg = compose_sweep(tiny_overrides(tmp_path, "twisted", "estimator=twisted",
                                       "estimator.options.twisted.order=2"))
    table = load_results([str(sweep.run(cfg) / "results")])
    twisted = table[table.method == "twisted"].set_index(["history_id", "K", "budget_level"])
    hybrid = table[table.method == "hybrid"].set_index(["history_id", "K", "budget_level"])
    assert len(twisted) == len(hybrid) > 0
    [options] = set(twisted.options)
    assert options.startswith('{"surrogate": "HPYPModel(order=2, vocab_size=9, contexts=')
    assert (twisted.budget_calls == hybrid.model_calls.reindex(twisted.index)).all()
    assert (twisted.model_calls <= twisted.budget_calls).all()
    assert twisted.rae.notna().all()


CORPUS = [[0, 1, 2, 1], [1, 2]]  # the first symbol of each is a <BOS>: context, never predicted


def test_the_surrogate_is_interpolated_kneser_ney():
    """Bigram by hand: predicted 1|0, 2|1, 1|2, 2|1. One table per type sends 1 twice (from
    contexts 0 and 2) and 2 once (from 1) to the root, which discounts d_0 and backs off to the
    uniform; context u keeps (N(u,x) − d_1)/N(u) and gives d_1·types/N(u) to the root."""
    d0, d1 = PAPER_DISCOUNTS[:2]
    root = torch.tensor([0.0, 2 - d0, 1 - d0], dtype=torch.float64) / 3 + d0 * 2 / 3 / 3
    expected = torch.stack([
        torch.tensor([0.0, 1 - d1, 0.0], dtype=torch.float64) + d1 * root,  # after 0
        torch.tensor([0.0, 0.0, (2 - d1) / 2], dtype=torch.float64) + d1 / 2 * root,  # after 1
        torch.tensor([0.0, 1 - d1, 0.0], dtype=torch.float64) + d1 * root,  # after 2
    ])
    model = fit_surrogate(CORPUS, symbols(3), order=2)
    log_probs, _ = model.initial_state([[0], [1], [2]])
    torch.testing.assert_close(log_probs.exp(), expected, rtol=1e-12, atol=0)
    assert (log_probs.exp() > 0).all()  # a surrogate never rules out a path
    trigram = fit_surrogate(CORPUS, symbols(3), order=3)
    unseen, seen = trigram.initial_state([[2, 2], [2]])[0]  # (2, 2) never seen: P(·|2)
    torch.testing.assert_close(unseen, seen)


def test_the_order_is_chosen_to_keep_the_table_small():
    corpus = [list(range(60)) * 20]
    assert fit_surrogate(corpus, symbols(67)).order == 5  # Shakespeare's characters
    assert fit_surrogate(corpus, symbols(67), order=3).order == 3
    assert fit_surrogate(corpus, symbols(50257)).order == 4  # 60 contexts per length; order 5
    # would not fit its int64 context keys
    gpt2 = fit_surrogate([list(range(3000))], symbols(50257))  # up to 3,001 × V: too many
    assert gpt2.num_contexts == 1  # i.i.d.: `twisted` is plain importance sampling


def test_a_distilled_surrogate_is_the_models_own_ngram_at_one_call_per_symbol() -> None:
    """Fitted on the model's samples, a bigram surrogate of a first-order chain recovers the
    chain's transition table; it pays one call per sampled symbol (counted apart from seqq's
    counter) and is seeded."""
    chain = random_markov(6, 1, seed=4)
    recorded = PrefixRecording(chain)
    surrogate = distill_surrogate(recorded, symbols(6), bos=0, order=2, symbols=120_000, seed=1)
    assert recorded.rows == surrogate.info["model_calls"] == 120_000
    assert "distilled from 120,000 model samples" in repr(surrogate)
    contexts = [[c] for c in range(6)]
    fitted = surrogate.initial_state(contexts)[0].exp()
    assert (fitted - chain.log_table.exp()).abs().max() < 0.02
    again = distill_surrogate(chain, symbols(6), 0, 2, symbols=120_000, seed=1)
    assert torch.equal(again.initial_state(contexts)[0], surrogate.initial_state(contexts)[0])
