"""Model calls are counted exactly as docs/decisions.md §1 says; reuse across horizons (§4.3)."""

import pytest
import torch
from oracles import PrefixRecording, random_markov, tiny_lstm

import seqq
from seqq import queries as Q
from seqq.errors import BudgetError, QueryError
from seqq.estimators import METHODS
from seqq.estimators.engine.allowance import NO_CUT, Allowance
from seqq.models import CallCounter

Recording = PrefixRecording  # counts rows evaluated, independently of seqq's counter


@pytest.mark.parametrize("K, S", [(1, 7), (4, 10), (6, 3), (5, 200)])
def test_importance_pays_once_per_distinct_prefix(K, S):
    model = Recording(tiny_lstm())
    est = seqq.estimate(model, [0], Q.hitting_time(1, K), "importance", samples=S, seed=0)
    assert est.model_calls == model.rows and model.distinct()
    assert K <= est.model_calls <= 1 + S * (K - 1)
    if S == 200:  # 4^4 paths: many samples share prefixes, and those cost nothing
        assert est.model_calls < 1 + S * (K - 1) // 2


@pytest.mark.parametrize("method, options", [
    ("hybrid", {"samples": 40, "max_width": 4}),
    ("wor", {"samples": 20, "tail_samples": 20}),
    ("hindsight_gumbel", {"samples": 30}),
    ("importance", {"samples": 50}),
])
def test_trie_methods_never_pay_twice_for_a_prefix(method, options):
    # single-product queries on different histories: every (task, prefix) is a distinct prefix
    # (products of one union each keep their own tree, so a prefix they share is paid per product;
    # a replicate method's independent copies of a task each pay for theirs)
    model = Recording(tiny_lstm())
    queries = [Q.hitting_time(2, 5), Q.event_at(1, 4), Q.hitting_time([0, 1], 4)]
    estimates = seqq.estimate_many(model, [[1], [0, 2], [3]], queries, method, seed=0, **options)
    assert model.distinct(copies=METHODS[method].replicates or 1)
    assert sum(e.model_calls for e in estimates) == model.rows


def test_trie_works_for_models_without_concat():
    class NoConcat(Recording):
        concat = None

    model = NoConcat(random_markov(5, 1, seed=2))
    query = Q.hitting_time(2, 5)
    est = seqq.estimate(model, [0], query, "wor", budget=150, seed=0)
    assert model.distinct() and est.model_calls == model.rows <= 150
    assert est.lower <= seqq.exact(random_markov(5, 1, seed=2), [0], query) <= est.upper


def test_beam_costs_one_plus_sum_of_beam_sizes():
    model = Recording(random_markov(7, 1, seed=1))
    est = seqq.estimate(model, [0], Q.hitting_time(2, 5), "beam", beam_width=4)
    sizes = est.extras["beam_sizes"][0]  # beams kept at depths 1..K
    assert sizes == [4, 4, 4, 4, 4]
    assert est.model_calls == 1 + sum(sizes[:-1]) == model.rows


def test_exact_costs_the_size_of_the_prefix_tree():
    model = Recording(random_markov(5, 1, seed=1))
    est = seqq.estimate(model, [0], Q.hitting_time(2, 4), "exact")
    assert est.model_calls == 1 + 4 + 16 + 64 == model.rows


def test_hybrid_calls_are_beam_plus_tail():
    model = Recording(tiny_lstm())
    est = seqq.estimate(model, [1], Q.hitting_time(2, 5), "hybrid", samples=30, seed=0)
    beam = 1 + sum(est.extras["beam_sizes"][0][:-1])
    assert beam <= est.model_calls <= beam + 30 * 4
    assert est.model_calls == model.rows


def test_shared_batches_charge_each_query_its_own_calls():
    model = Recording(random_markov(6, 1, seed=2))
    queries = [Q.hitting_time(1, 3), Q.hitting_time(2, 6), Q.count(3, 1, 2)]
    many = seqq.estimate_many(model, [[0], [0], [4]], queries, "importance", samples=9, seed=0)
    alone = [seqq.estimate(random_markov(6, 1, seed=2), h, q, "importance", samples=9, seed=0)
             for h, q in zip([[0], [0], [4]], queries, strict=True)]
    for together, apart, full in zip(many, alone, [1 + 9 * 2, 1 + 9 * 5, 1 + 9 * 2 * 1],
                                     strict=True):
        assert together.model_calls <= full and apart.model_calls <= full
    assert sum(e.model_calls for e in many) == model.rows + 1  # history [0] encoded once, charged twice


@pytest.mark.parametrize("method", ["importance", "uniform", "naive", "beam", "tail_beam"])
def test_budgets_are_respected_and_used(method):
    model = random_markov(6, 1, seed=3)
    for budget in (40, 100, 350):
        est = seqq.estimate(model, [0], Q.hitting_time(2, 5), method, budget=budget, seed=0)
        assert est.model_calls <= budget
        if method in ("uniform", "naive"):
            assert est.model_calls > budget - 4  # one more full-price sample would not fit
        if method == "importance":  # spends it all, or reaches the cap on cached samples
            full_price = (budget - 1) // 4
            assert est.num_samples >= full_price
            assert est.model_calls > budget - 4 or est.num_samples == 100 * full_price


@pytest.mark.parametrize("method", ["importance", "naive", "twisted", "hybrid"])
def test_a_budget_is_spent_in_a_few_rounds(method, monkeypatch):
    """Rounds after the first are sized at the last round's cost per draw and cut where the
    calls run out, so the budget is spent, up to less than one full-price draw, in a few
    rounds (sizing every round at full price took 179–213 rounds here at 3,000 calls)."""
    rounds = []
    of = Allowance.of
    monkeypatch.setattr(Allowance, "of", staticmethod(lambda left: rounds.append(1) or of(left)))
    model = random_markov(8, 2, seed=4)
    options = {"surrogate": model} if method == "twisted" else {}
    for budget in (200, 3000):
        rounds.clear()
        est = seqq.estimate(model, [0, 1], Q.hitting_time(2, 6), method, budget=budget, seed=0,
                            **options)
        assert budget - 5 < est.model_calls <= budget and 1 <= len(rounds) <= 12


def test_an_allowance_pays_in_draw_order_and_cuts_at_the_first_unpaid_draw():
    allowance = Allowance.of(torch.tensor([2, 5]))
    task = torch.tensor([0, 0, 0, 1, 0])
    first_draw = torch.tensor([4, 1, 7, 3, 2])
    paid = allowance.pay(task, first_draw)
    assert paid.tolist() == [False, True, False, True, True]  # task 0 pays draws 1 and 2
    assert allowance.cut.tolist() == [4, NO_CUT] and allowance.left.tolist() == [0, 4]
    assert allowance.keeps(torch.tensor([0, 0, 1]), torch.tensor([3, 4, 99])).tolist() == [
        True, False, True]
    later = allowance.pay(torch.tensor([0, 1]), torch.tensor([0, 8]))  # nothing left for task 0
    assert later.tolist() == [False, True] and allowance.cut.tolist() == [0, NO_CUT]
    assert allowance.kept(torch.tensor([10, 10])).tolist() == [0, 10]


def test_a_budget_buys_the_widest_beam_that_fits():
    model = random_markov(6, 1, seed=3)
    query = Q.hitting_time(2, 5)  # width w costs 1 + Σ_{d<5} min(w, 5**d) calls
    est = seqq.estimate(model, [0], query, "beam", budget=200)
    width = max(max(sizes) for sizes in est.extras["beam_sizes"])
    assert width > 10 and est.model_calls <= 200
    wider = seqq.estimate(model, [0], query, "beam", beam_width=width + 1)
    assert wider.model_calls > 200
    capped = seqq.estimate(model, [0], query, "beam", budget=200, beam_width=8)
    assert max(max(sizes) for sizes in capped.extras["beam_sizes"]) == 8


def test_hybrid_fits_its_tail_into_the_budget():
    model = random_markov(6, 1, seed=3)
    est = seqq.estimate(model, [0], Q.hitting_time(2, 5), "hybrid", budget=400, max_width=5, seed=0)
    assert est.model_calls <= 400 and est.num_samples >= 1
    with pytest.raises(BudgetError, match="leaving none"):
        seqq.estimate(model, [0], Q.hitting_time(2, 5), "hybrid", budget=10, max_width=5)


def test_hitting_time_distribution_is_one_pass_with_an_interval_at_every_k():
    """The library's distribution is the CLI's: one pass of S paths to K (each k reports the
    pass's 1 + S·(K − 1) calls, paid once), every k with its interval; K = 1 is p(A | history)
    itself, and under a budget the pass keeps to it."""
    model = tiny_lstm()
    K, S = 5, 64
    dist = seqq.hitting_time_distribution(model, [0, 2], 3, K, samples=S, seed=4)
    assert [e.model_calls for e in dist] == [1 + S * (K - 1)] * K
    assert all(e.ci_low is not None and e.ci_low <= e.value <= e.ci_high for e in dist)
    assert dist[0].value == pytest.approx(seqq.exact(model, [0, 2], Q.hitting_time(3, 1)),
                                          rel=1e-5)
    assert all(e.model_calls <= 200 for e in
               seqq.hitting_time_distribution(model, [0, 2], 3, K, budget=200, seed=4))
    with pytest.raises(ValueError, match="answers every K from one pass"):
        seqq.hitting_time_distribution(model, [0, 2], 3, K, method="wor")


def test_hitting_time_distribution_is_unbiased():
    model = random_markov(6, 1, seed=9)
    truth = torch.tensor([seqq.exact(model, [0], Q.hitting_time(1, k)) for k in range(1, 7)])
    runs = torch.tensor([[e.value for e in seqq.hitting_time_distribution(model, [0], 1, 6, 10, s)]
                         for s in range(200)])
    se = runs.std(0) / 200**0.5
    assert ((runs.mean(0) - truth).abs() <= 4 * se + 1e-12).all()


def test_call_counter_attributes_rows_to_owners():
    counter = CallCounter(random_markov(4, 1), num_tasks=2)
    log_probs, state = counter.initial_state([[0], [1], [0]], owners=torch.tensor([0, 1, 1]))
    state = counter.select(state, torch.tensor([0, 0, 2]))
    counter.step(state, torch.tensor([1, 2, 3]))
    assert counter.calls.tolist() == [1 + 2, 2 + 1]


@pytest.mark.parametrize("call, error, message", [
    (lambda m: seqq.estimate(m, [0], Q.hitting_time(2, 5), "importance", budget=3), BudgetError,
     "cannot buy one sample"),
    (lambda m: seqq.estimate(m, [0], Q.hitting_time(2, 5), "beam", budget=2), BudgetError,
     "width 1"),
    (lambda m: seqq.estimate(m, [0], Q.hitting_time(9, 3), "importance"), QueryError, "vocabulary"),
    (lambda m: seqq.estimate(m, [0], Q.hitting_time(1, 3), "magic"), QueryError, "unknown method"),
    (lambda m: seqq.estimate(m, [0], Q.hitting_time(1, 3), "beam", alpha=0.5), QueryError,
     "no option 'alpha'"),
    (lambda m: seqq.estimate(m, [7], Q.hitting_time(1, 3), "importance"), QueryError, "history"),
])
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call(random_markov(6, 1))


def test_empty_query_gives_zero_with_a_reason():
    model = random_markov(3, 1)
    est = seqq.estimate(model, [0], Q.hitting_time([0, 1, 2], 3), "importance", seed=0)
    assert est.value == 0.0 and "empty" in est.note
