"""Every horizon of a hitting time from one pass (seqq/estimators/horizons.py): each K's estimate
unbiased against brute force, the pass paid once, repeats independent, other queries untouched."""

import math

import pytest
import torch
from oracles import brute_force, random_markov, tiny_lstm

import seqq
from seqq import queries as Q
from seqq.estimators.horizons import families

SEEDS = 200
K_MAX = 5


def family_estimates(model, history, event, method, **options):
    """SEEDS independent passes, each answering K = 1..K_MAX, as [SEEDS, K_MAX] values."""
    queries = [Q.hitting_time(event, k) for _ in range(SEEDS) for k in range(1, K_MAX + 1)]
    estimates = seqq.estimate_many(model, [history] * len(queries), queries, method, seed=3,
                                   **options)
    return estimates, torch.tensor([e.value for e in estimates],
                                   dtype=torch.float64).reshape(SEEDS, K_MAX)


@pytest.mark.parametrize("make, history, event", [
    (lambda: random_markov(6, 1, seed=5), [2], [3]),
    (tiny_lstm, [0, 3, 1], [2, 4]),
], ids=["markov", "lstm"])
@pytest.mark.parametrize("method, options", [
    ("importance", {"samples": 10}),
    ("naive", {"samples": 30}),
    ("uniform", {"samples": 10}),
    ("importance", {"budget": 30}),
    ("naive", {"budget": 60}),
])
def test_every_horizon_is_unbiased(make, history, event, method, options):
    model = make()
    truths = [brute_force(model, history, Q.hitting_time(event, k)) for k in range(1, K_MAX + 1)]
    _, values = family_estimates(model, history, event, method, **options)
    for k, truth in enumerate(truths, start=1):
        column = values[:, k - 1]
        se = column.std().item() / math.sqrt(SEEDS)
        # K = 1 is exact: p(A | history), equal to brute force up to float32 rounding
        assert abs(column.mean().item() - truth) <= 4 * se + 1e-6 * truth, (k, truth, se)


def test_one_pass_pays_once_and_reports_its_horizon():
    model = tiny_lstm()
    queries = [Q.hitting_time(2, k) for k in (1, 3, 6)]
    estimates = seqq.estimate_many(model, [[0, 1]] * 3, queries, "importance", samples=50, seed=0)
    assert len({e.model_calls for e in estimates}) == 1  # one pass, its calls on every answer
    assert estimates[0].model_calls <= 1 + 50 * 5  # history, then ≤ 5 steps per path
    assert all(e.extras["horizons_pass"] == 6 for e in estimates)
    assert estimates[0].value == pytest.approx(math.exp(model.initial_state([[0, 1]])[0][0, 2]))


def test_a_pass_spends_its_budget_once_and_different_budgets_never_share():
    model = tiny_lstm()
    queries = [Q.hitting_time(2, k) for k in (2, 4)]
    shared = seqq.estimate_many(model, [[0]] * 2, queries, "naive", budget=200, seed=0)
    assert shared[0].model_calls == shared[1].model_calls <= 200
    apart = seqq.estimate_many(model, [[0]] * 2, queries, "naive", budget=[20, 200], seed=0)
    assert apart[0].model_calls <= 20 < apart[1].model_calls <= 200
    assert all("horizons_pass" not in e.extras for e in apart)


def test_families_keep_repeats_and_other_queries_apart():
    event_queries = [Q.hitting_time(1, k) for k in (2, 3, 2)]
    grouped = families([[0], [0], [0]], event_queries)
    assert grouped.members == [(0, 2), (0, 3), (1, 2)]  # the repeated K = 2 starts a new pass
    assert [q.horizon for q in grouped.queries] == [3, 2]
    assert families([[0], [1]], [Q.hitting_time(1, 2), Q.hitting_time(1, 3)]) is None
    assert families([[0], [0]], [Q.hitting_time(1, 2), Q.count(1, 1, 3)]) is None
    assert families([[0], [0]], [Q.hitting_time(1, 2), Q.hitting_time(2, 3)]) is None
    assert families([[0], [0]], event_queries[:2], [10, 20]) is None


def test_only_hitting_times_share_a_pass():
    model = random_markov(5, 1, seed=2)
    within = seqq.estimate_many(model, [[0]] * 2, [Q.occurs_within(1, 2), Q.occurs_within(1, 3)],
                                "importance", samples=10, seed=0)
    assert all("horizons_pass" not in e.extras for e in within)


def test_the_sampled_judge_answers_a_family_from_one_set_of_paths():
    model = tiny_lstm()
    ks = (1, 2, 4)
    queries = [Q.hitting_time(2, k) for k in ks]
    truths = [brute_force(model, [0, 1], q) for q in queries]
    z = []
    for seed in range(20):
        judged = seqq.ground_truth_many(model, [[0, 1]] * 3, queries, seed=seed, rule="sampled",
                                        exact_max_calls=0, rel_tol=0.05, s_low=200,
                                        progress=False)
        assert len({j.model_calls for j in judged}) == 1  # one pass for the family
        assert all(j.rel_stderr < 0.05 for j in judged)
        z += [(j.value - t) / max(j.rel_stderr * j.value, 1e-12) for j, t in zip(judged, truths, strict=True)
              if j.rel_stderr > 0]
    z = torch.tensor(z)
    assert abs(z.mean()) < 4 / math.sqrt(len(z)) + 0.1 and z.std() < 1.5
