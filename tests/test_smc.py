"""SMC against exact answers: unbiased, mass-conserving, one call per distinct prefix, in budget."""

import importlib
import math

import pytest
import torch
from oracles import PrefixRecording, brute_force, chain_masks, random_markov, tiny_lstm
from test_estimators import CASES, SEEDS, assert_unbiased, replicas
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


@pytest.mark.parametrize("options", [{"particles": 6}, {"particles": 6, "ess_threshold": 1.0},
                                     {"budget": 60}], ids=["ess-0.5", "ess-1", "budget"])
def test_smc_is_unbiased(case, options):
    model, history, query, truth = case
    estimates = replicas(model, history, query, "smc", **options)
    assert_unbiased(estimates, truth)
    assert all(e.model_calls <= options.get("budget", 1e9) for e in estimates)
    # the mean of independent replicates, with their standard error and interval
    assert all(e.stderr is not None and e.ci_low <= e.value <= e.ci_high
               and not e.is_lower_bound for e in estimates)


@pytest.mark.parametrize("V, K", [(5, 12), (12, 9)])
def test_smc_is_unbiased_at_long_horizons(V, K):
    model = random_markov(V, 1, seed=V + K)
    query = Q.hitting_time(1, K)
    estimates = replicas(model, [0], query, "smc", particles=8, ess_threshold=1.0)
    assert sum(sum(e.extras["resamplings"]) for e in estimates) > SEEDS  # resampling is exercised
    assert_unbiased(estimates, seqq.exact(model, [0], query))


def test_an_iid_model_is_answered_exactly():
    """Incremental weights do not depend on the prefix, so every particle carries the answer."""
    model = MarkovModel.iid([0.5, 0.3, 0.2])
    query = Q.hitting_time(0, 6)
    for est in replicas(model, [1], query, "smc", particles=5)[:10]:
        assert est.value == pytest.approx(0.5**6, rel=1e-12)


def test_particles_on_one_prefix_cost_one_call():
    model = PrefixRecording(tiny_lstm())
    query = Q.a_before_b(2, 1, 5)  # products share the prefixes that avoid 1 and 2
    for seed in range(5):
        est = seqq.estimate(model, [0, 3], query, "smc", particles=40, ess_threshold=1.0, seed=seed,
                            replicates=1)  # one run: its own calls
        calls = len(model.evaluated)
        assert len(set(model.evaluated)) == calls == est.model_calls  # no prefix paid twice
        assert est.model_calls <= 1 + 40 * sum(range(5))  # 40 rows per product and step
        model.evaluated.clear()


def test_a_budget_is_respected_and_spent_on_more_particles():
    """Particles start at the most whose worst case fits, 1 + Σ_{k<5} min(P, 5**k) calls here,
    and grow whenever shared prefixes leave calls unspent; the budget is never exceeded."""
    model = random_markov(6, 1, seed=3)
    query = Q.hitting_time(2, 5)
    for budget in (12, 40, 300):
        start = max(P for P in range(1, budget) if 1 + sum(min(P, 5**k) for k in range(1, 5))
                    <= budget)
        for est in replicas(model, [0], query, "smc", budget=budget, replicates=1)[:20]:
            assert est.model_calls <= budget
            assert est.extras["particles"][0] > start  # grown into the unspent calls
    small = replicas(model, [0], query, "smc", budget=40, replicates=1)
    assert sum(e.model_calls for e in small) >= 0.95 * 40 * len(small)
    assert_unbiased(small, brute_force(model, [0], query))
    with pytest.raises(BudgetError, match="smc"):
        seqq.estimate(model, [0], query, "smc", budget=4)


def test_later_passes_spend_what_shared_prefixes_leave():
    """On a peaky chain most particles share few prefixes, so one pass spends a fraction of the
    budget; later passes buy far more particles with the rest. On a flatter chain a pass asked
    to be too large (ROUND_SHARE and the cap forced up) is dropped before it overruns: the
    budget holds, and the estimate, from the passes kept, stays unbiased."""
    model = MarkovModel.random(vocab_size=12, order=1, concentration=0.05, seed=4)
    query = Q.count([2, 5], 2, 4)
    truth = brute_force(model, [0], query)
    estimates = replicas(model, [0], query, "smc", budget=300, replicates=1)
    assert all(e.model_calls <= 300 for e in estimates)
    assert min(e.extras["passes"][0] for e in estimates) > 1
    assert min(e.extras["particles"][0] for e in estimates) > 300  # more than one per call
    assert_unbiased(estimates, truth)
    smc_module = importlib.import_module("seqq.estimators.methods.smc")
    overruns = []

    def recorded(*args):
        overruns.append(bool(smc_module_overrun(*args).any()))
        return smc_module_overrun(*args)

    smc_module_overrun = smc_module._overrun
    flat = MarkovModel.random(vocab_size=12, order=1, concentration=1.0, seed=4)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(smc_module, "ROUND_SHARE", 1e6)
        patch.setattr(smc_module, "CAP_FACTOR", 10**6)
        patch.setattr(smc_module, "_overrun", recorded)
        greedy = replicas(flat, [0], query, "smc", budget=300, replicates=1)
    assert any(overruns)  # some passes were dropped
    assert all(e.model_calls <= 300 for e in greedy)
    assert_unbiased(greedy, brute_force(flat, [0], query))


def test_budgeted_twisted_smc_in_message_groups_keeps_every_tasks_budget(monkeypatch):
    """Messages too big for one batch make every task a group of its own: a subset whose task
    ids are not the call counter's. Each task still spends at most its own budget."""
    monkeypatch.setattr(importlib.import_module("seqq.estimators.driver"), "MESSAGE_VALUES", 1)
    model = random_markov(6, 1, seed=3)
    surrogate = fitted_surrogate(model, HISTORIES[0], order=2)
    budgets = [300, 60, 400, 90]
    estimates = seqq.estimate_many(model, HISTORIES, QUERIES, "smc", budget=budgets, seed=0,
                                   surrogate=surrogate, replicates=1)
    assert all(0 < e.model_calls <= b for e, b in zip(estimates, budgets, strict=True))
    assert estimates[2].model_calls > 90  # the large budget was spent, not a neighbour's


def test_shared_batches_charge_each_query_its_own_calls():
    model = PrefixRecording(random_markov(6, 1, seed=2))
    histories, queries = [[0], [0], [4]], [Q.hitting_time(1, 3), Q.a_before_b(2, 3, 6),
                                          Q.count(3, 1, 2)]
    many = seqq.estimate_many(model, histories, queries, "smc", particles=9, seed=0,
                              replicates=1)
    # history [0] is encoded once and charged to both of its tasks
    assert sum(e.model_calls for e in many) == len(model.evaluated) + 1
    worst = [1 + 9 * 2, 1 + sum(9 * k for k in range(1, 6)), 1 + 9 * 1]  # 9 rows per step
    assert all(1 < e.model_calls <= w for e, w in zip(many, worst, strict=True))


def _importance_variance(model: MarkovModel, start: int, mask: torch.Tensor) -> float:
    """Exact per-sample variance of IS under the restricted proposal on an order-1 chain:
    E_q[w²] − p², by a forward pass carrying q(prefix)·w(prefix)² per last symbol."""
    probs = model.log_table.exp()
    moment = torch.zeros(model.vocab_size, dtype=torch.float64)
    moment[start] = 1.0
    truth = torch.zeros_like(moment)
    truth[start] = 1.0
    for allowed in mask:
        kept = probs * allowed
        mass = kept.sum(-1)
        proposal = kept / mass.clamp_min(1e-300)[:, None]
        moment = (moment * mass**2) @ proposal
        truth = truth @ kept
    return moment.sum().item() - truth.sum().item() ** 2


def test_resampling_beats_importance_sampling_on_a_long_horizon():
    """Two sticky regimes (symbol 1: `0` is likely next; symbol 2: it is rare) make IS weights
    span orders of magnitude over 20 steps; SMC's variance at equal particles is far lower."""
    model = MarkovModel(torch.tensor([[0.1, 0.45, 0.45], [0.5, 0.45, 0.05],
                                      [0.01, 0.09, 0.9]]), 1)
    query = Q.hitting_time(0, 20)
    particles = 16
    importance = _importance_variance(model, 1, chain_masks(query, 3)) / particles
    values = torch.tensor([e.value for e in seqq.estimate_many(
        model, [[1]] * 400, query, "smc", particles=particles, seed=5)], dtype=torch.float64)
    assert values.var().item() < importance / 3
    assert abs(values.mean().item() - seqq.exact(model, [1], query)) <= 4 * math.sqrt(
        values.var().item() / 400)


@pytest.mark.parametrize("options, message", [({"ess_threshold": 2}, "ess_threshold"),
                                              ({"particles": 0}, "particles")])
def test_bad_options_get_a_clear_error(options, message):
    with pytest.raises(QueryError, match=message):
        seqq.estimate(random_markov(4, 1), [0], Q.hitting_time(1, 3), "smc", **options)


@pytest.mark.slow
def test_tasks_run_in_memory_bounded_groups(monkeypatch):
    module = importlib.import_module("seqq.estimators.methods.smc")
    monkeypatch.setattr(module, "rows_within", lambda width: 1)  # every task its own group
    model = random_markov(6, 1, seed=8)
    query = Q.a_before_b(2, [3, 4], 4)
    assert_unbiased(replicas(model, [0], query, "smc", particles=6), brute_force(model, [0], query))


def test_an_empty_query_gives_zero_beside_others():
    model = random_markov(3, 1)
    empty, other = seqq.estimate_many(model, [[0], [1]], [Q.hitting_time([0, 1, 2], 3),
                                                          Q.hitting_time(1, 3)], "smc", seed=0)
    assert empty.value == 0.0 and "empty" in empty.note and other.value > 0


@pytest.mark.parametrize("make, history, query, order", [c[1:] for c in TWISTED_CASES],
                         ids=[c[0] for c in TWISTED_CASES])
@pytest.mark.parametrize("options", [{"particles": 6}, {"budget": 60}], ids=["P6", "budget"])
def test_twisted_smc_is_unbiased_with_a_fitted_surrogate(make, history, query, order, options):
    model = make()
    surrogate = fitted_surrogate(model, history, order)
    estimates = replicas(model, history, query, "smc", surrogate=surrogate, **options)
    assert_unbiased(estimates, truth_of(model, history, query))
    assert all(e.model_calls <= options.get("budget", 1e9) for e in estimates)


@pytest.mark.parametrize("make, grouped", [c[1:] for c in SELF_TWISTED],
                         ids=[c[0] for c in SELF_TWISTED])
def test_twisted_smc_with_the_model_as_surrogate_is_exact(make, grouped, monkeypatch):
    """Every incremental weight Z_k/β_k is then the same constant for all particles."""
    estimates, model = as_own_surrogate(make, grouped, "smc", monkeypatch, particles=7,
                                        ess_threshold=1.0)
    for est, history, query in zip(estimates, HISTORIES, QUERIES, strict=True):
        assert est.value == pytest.approx(seqq.exact(model, history, query), rel=1e-9)


def test_the_twist_lowers_smc_variance_on_a_far_hitting_time():
    model = random_markov(6, 2, seed=11)
    history, query = [0, 1], Q.hitting_time(5, 8)
    surrogate = fitted_surrogate(model, history, order=3, n=200, length=20)
    spread = {}
    for name, options in (("smc", {}), ("twisted", {"surrogate": surrogate})):
        values = torch.tensor([e.value for e in replicas(model, history, query, "smc",
                                                         particles=10, **options)])
        spread[name] = values.var().item()
    assert spread["twisted"] < spread["smc"] / 5, spread
