"""Sampling without replacement through the trie: sum-and-sample (`wor`) and the Hindsight
Gumbel Estimator, against exact answers; exhaustion is exact; bounds always hold."""

import math

import pytest
import torch
from oracles import brute_force, random_markov, tiny_gpt2, tiny_lstm

import seqq
from seqq import queries as Q
from seqq.errors import QueryError
from seqq.estimators.engine.trie.gumbel import (
    BlockLogits,
    block_width,
    top_perturbed,
    top_truncated_gumbel,
)

SEEDS = 240

CASES = [
    ("markov", lambda: random_markov(5, 1, seed=5), [2], Q.hitting_time(3, 4)),
    ("markov-order2", lambda: random_markov(4, 2, seed=6), [1, 3], Q.a_before_b(0, 2, 3)),
    ("lstm", tiny_lstm, [0, 3, 1], Q.hitting_time(2, 4)),
    ("gpt2", tiny_gpt2, [1, 0, 3], Q.count(4, 1, 3)),
]


@pytest.fixture(params=CASES, ids=[c[0] for c in CASES])
def case(request):
    _, make, history, query = request.param
    model = make()
    return model, history, query, brute_force(model, history, query)


def test_wor_to_exhaustion_is_exact(case):
    model, history, query, truth = case
    for method in ("wor", "hindsight_gumbel"):
        # exact up to the float noise of the batch the model runs in: hindsight_gumbel's
        # replicates put 8 copies of the history in it (decisions §38)
        est = seqq.estimate(model, history, query, method, samples=200, seed=0)
        assert est.value == pytest.approx(truth, rel=1e-5, abs=1e-15)
        # the certain bounds meet but for their float tolerance τ, 16 ulps per step: lower is
        # p(S)·(1 − τ), upper p(S) + (1 − q(S)) + 2τ (1 − q(S) is a difference: its error is
        # absolute)
        assert est.lower == pytest.approx(truth, rel=3e-4)
        assert est.upper == pytest.approx(truth, rel=3e-4, abs=3e-5)
        assert est.lower <= truth <= est.upper
        if method == "wor":
            assert est.stderr == 0.0


@pytest.mark.parametrize("method, options", [
    ("wor", {"samples": 3, "tail_samples": 2}),
    ("wor", {"budget": 25}),
    ("hindsight_gumbel", {"samples": 4}),
    ("hindsight_gumbel", {"samples": 4, "repeats": 5}),
])
def test_wor_estimators_are_unbiased_and_bounded(case, method, options):
    model, history, query, truth = case
    estimates = seqq.estimate_many(model, [history] * SEEDS, query, method, seed=7, **options)
    values = torch.tensor([e.value for e in estimates], dtype=torch.float64)
    se = values.std().item() / math.sqrt(SEEDS)
    assert abs(values.mean().item() - truth) <= 4 * se + 1e-12, (values.mean(), truth, se)
    for e in estimates:
        assert e.lower <= truth * (1 + 1e-9) and truth <= e.upper * (1 + 1e-9)
        if method == "wor":
            assert e.lower <= e.value * (1 + 1e-9) and e.value <= e.upper * (1 + 1e-9)
        if "budget" in options:
            assert e.model_calls <= options["budget"]


@pytest.mark.parametrize("method", ["exact", "beam", "tail_beam", "coverage_beam", "hybrid",
                                    "wor", "hindsight_gumbel"])
def test_bounds_always_contain_the_exact_value(method):
    model = random_markov(7, 1, seed=11)
    queries = [Q.hitting_time(2, 5), Q.a_before_b(1, [3, 4], 4), Q.count(0, 2, 4)]
    for query in queries:
        truth = seqq.exact(model, [0], query)
        est = seqq.estimate(model, [0], query, method, seed=3)
        assert est.lower <= truth * (1 + 1e-9) + 1e-15 and truth <= est.upper * (1 + 1e-9)


def test_budgets_are_respected_and_mostly_spent():
    model = random_markov(8, 1, seed=2)
    query = Q.hitting_time(1, 6)
    for method in ("wor", "hindsight_gumbel", "hybrid", "importance"):
        for budget in (60, 300):
            # one run; replicates split the budget and each leaves its own remainder
            one = {"replicates": 1} if method == "hindsight_gumbel" else {}
            est = seqq.estimate(model, [0], query, method, budget=budget, seed=1, **one)
            assert budget * 0.8 <= est.model_calls <= budget, (method, budget, est.model_calls)
    pooled = seqq.estimate(model, [0], query, "hindsight_gumbel", budget=300, seed=1)
    assert 300 * 0.6 <= pooled.model_calls <= 300


def test_long_horizon_against_forward_dp():
    model = random_markov(12, 1, seed=21)
    query = Q.hitting_time(1, 9)
    truth = seqq.exact(model, [0], query)
    estimates = seqq.estimate_many(model, [[0]] * SEEDS, query, "wor", budget=200, seed=2)
    values = torch.tensor([e.value for e in estimates], dtype=torch.float64)
    assert abs(values.mean().item() - truth) <= 4 * values.std().item() / math.sqrt(SEEDS)


def test_bad_options_are_named():
    model = random_markov(4, 1)
    with pytest.raises(QueryError, match="no option 'head_share'"):
        seqq.estimate(model, [0], Q.hitting_time(1, 3), "wor", head_share=0.5)
    with pytest.raises(QueryError, match="repeats"):
        seqq.estimate(model, [0], Q.hitting_time(1, 3), "hindsight_gumbel", repeats=0)


def test_relative_error_target_stops_when_met_and_respects_the_budget():
    model = random_markov(10, 1, seed=4)
    query = Q.hitting_time(3, 6)
    truth = seqq.exact(model, [0], query)
    est = seqq.estimate(model, [0], query, "wor", rel_tol=0.02, seed=1)
    assert est.stderr < 0.02 * est.value and abs(est.value - truth) <= 4 * est.stderr
    assert est.lower <= truth <= est.upper
    capped = seqq.estimate(model, [0], query, "wor", rel_tol=1e-6, budget=500, seed=1)
    assert capped.model_calls <= 500


def test_truncated_gumbel_over_half_the_row_conditions_every_value():
    """With k over half the row (30 of 40) every value comes back in symbol order, each
    Gumbel(logits) perturbation conditioned on the row's maximum being the bound (Kool et al.
    2019, App. B), from float64 noise over the whole row."""

    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 40, generator=generator, dtype=torch.float64)
    logits[:, ::4] = -math.inf
    bound = torch.randn(5, generator=generator, dtype=torch.float64)
    top, token = top_truncated_gumbel(logits, bound, torch.Generator().manual_seed(1), 30)

    u = torch.rand(logits.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    g = logits - torch.log(-torch.log(u.clamp_min(1e-300)))
    z = g.amax(-1, keepdim=True)
    v = bound[:, None] - g + torch.log(-torch.expm1((g - z).clamp_max(0)))
    every = torch.where(torch.isneginf(g), -math.inf,
                        bound[:, None] - v.clamp_min(0) - torch.log1p(torch.exp(-v.abs())))
    assert token is None
    torch.testing.assert_close(top, every, rtol=0, atol=1e-12)
    torch.testing.assert_close(top.amax(-1), bound, rtol=0, atol=1e-12)


def test_truncated_gumbel_top_k_is_conditioned_sorted_and_distinct():
    """Below half the row only the top k come back: decreasing, the first one the bound,
    distinct symbols, never a ruled-out symbol while enough others are left."""

    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(50, 400, generator=generator, dtype=torch.float64)
    logits[:, ::4] = -math.inf
    bound = torch.randn(50, generator=generator, dtype=torch.float64)
    top, token = top_truncated_gumbel(logits, bound, torch.Generator().manual_seed(1), 7)
    torch.testing.assert_close(top[:, 0], bound, rtol=0, atol=1e-12)
    assert bool((top[:, 1:] <= top[:, :-1]).all()) and bool(torch.isfinite(top).all())
    assert all(len(set(row)) == 7 for row in token.tolist())
    assert bool((token % 4 != 0).all())


def _chi_square_p_value(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's test of counts against probabilities (Wilson–Hilferty normal approximation)."""
    expected = probs * counts.sum()
    statistic = float(((counts - expected) ** 2 / expected).sum())
    dof = len(counts) - 1
    z = ((statistic / dof) ** (1 / 3) - (1 - 2 / (9 * dof))) / math.sqrt(2 / (9 * dof))
    return 0.5 * math.erfc(z / math.sqrt(2))


def test_top_perturbed_draws_plackett_luce_orders_and_a_gumbel_maximum():
    """The top-k of logits + Gumbel noise, drawn top-down through blocks of symbols, has the
    law of independent noise on every symbol: ordered pairs follow Plackett–Luce
    p(i) p(j) / (1 − p(i)), and the largest key is Gumbel(logsumexp(logits))."""

    logits = torch.tensor([[1.5, -math.inf, 0.2, -1.0, 0.7, -math.inf, -0.3, 0.0]],
                          dtype=torch.float64)
    rows = 60_000
    keys, token = top_perturbed(BlockLogits.of(logits.expand(rows, -1), block_width(8, 2)),
                                 torch.Generator().manual_seed(3), 2)
    p = torch.softmax(logits[0], -1)
    live = torch.isfinite(logits[0]).nonzero().flatten().tolist()
    pairs = [(i, j) for i in live for j in live if i != j]
    probs = torch.tensor([float(p[i] * p[j] / (1 - p[i])) for i, j in pairs])
    code = token[:, 0] * 8 + token[:, 1]
    counts = torch.tensor([float((code == i * 8 + j).sum()) for i, j in pairs])
    assert counts.sum() == rows
    assert _chi_square_p_value(counts, probs) > 1e-4

    gumbel_cdf = torch.exp(-torch.exp(-(keys[:, 0].sort().values - logits.logsumexp(-1))))
    ks = float((gumbel_cdf - torch.arange(1, rows + 1) / rows).abs().max())
    assert ks < 1.95 / math.sqrt(rows)  # Kolmogorov–Smirnov at about 1e-3


def test_top_perturbed_on_a_wide_row_matches_float64_noise():
    """On a 3 000-symbol row with a near-flat bulk and a shorter last block, the first and the
    k-th key have the same law as under float64 noise for every symbol (two-sample KS)."""

    generator = torch.Generator().manual_seed(0)
    logits = 0.01 * torch.randn(1, 3000, generator=generator, dtype=torch.float64)
    logits[0, :5] += 3.0
    rows, k = 4_000, 5
    wide = logits.expand(rows, -1)
    keys, _ = top_perturbed(BlockLogits.of(wide, block_width(3000, k)),
                             torch.Generator().manual_seed(4), k)
    u = torch.rand(wide.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    dense = (wide - torch.log(-torch.log(u))).topk(k, dim=-1).values
    for column in (0, k - 1):
        a, b = keys[:, column].sort().values, dense[:, column].sort().values
        both = torch.cat([a, b]).sort().values
        cdf_a = torch.searchsorted(a, both, right=True) / rows
        cdf_b = torch.searchsorted(b, both, right=True) / rows
        assert float((cdf_a - cdf_b).abs().max()) < 1.95 * math.sqrt(2 / rows)


def test_top_perturbed_with_fewer_live_symbols_than_k():
    """Three live symbols (one in the shorter last block) and k = 5: the three come first,
    then −inf; empty blocks are never opened ahead of live ones."""

    logits = torch.full((6, 67), -math.inf, dtype=torch.float64)
    logits[:, [5, 40, 66]] = torch.tensor([0.3, -2.0, 1.0], dtype=torch.float64)
    keys, token = top_perturbed(BlockLogits.of(logits, block_width(67, 5)),
                                 torch.Generator().manual_seed(2), 5)
    assert bool(torch.isfinite(keys[:, :3]).all()) and bool(torch.isneginf(keys[:, 3:]).all())
    assert all(sorted(row[:3]) == [5, 40, 66] for row in token.tolist())
    assert bool((token < 67).all())


@pytest.mark.parametrize("method", ["wor", "hindsight_gumbel"])
def test_wor_estimators_are_unbiased_on_a_wide_vocabulary(method):
    """40 symbols and 4 draws per query: each node's top 4 come from the block-wise noise."""
    model = random_markov(40, 1, seed=8)
    query = Q.hitting_time(3, 4)
    truth = seqq.exact(model, [0], query)
    estimates = seqq.estimate_many(model, [[0]] * SEEDS, query, method, samples=4, seed=9)
    values = torch.tensor([e.value for e in estimates], dtype=torch.float64)
    se = values.std().item() / math.sqrt(SEEDS)
    assert abs(values.mean().item() - truth) <= 4 * se, (values.mean(), truth, se)
