"""Ground truth (docs/decisions.md §6): exact when affordable, adaptive IS otherwise."""

import pytest
from oracles import random_markov, tiny_lstm

import seqq
from seqq import queries as Q


def test_cheap_queries_are_exact():
    model = tiny_lstm()
    gt = seqq.ground_truth(model, [0], Q.hitting_time(1, 4))
    assert gt.kind == "exact" and gt.samples == 0 and gt.rel_stderr == 0.0
    assert gt.value == pytest.approx(seqq.estimate(model, [0], Q.hitting_time(1, 4), "exact").value)
    assert gt.model_calls == 1 + 4 + 16 + 64


@pytest.mark.parametrize("rule", ["absolute", "relative"])
def test_surrogate_is_close_and_reports_its_error(rule):
    model = random_markov(10, 1, seed=4)
    queries = [Q.hitting_time(3, 7), Q.a_before_b(2, 5, 6)]
    gts = seqq.ground_truth_many(model, [[0], [1]], queries, seed=0, exact_max_calls=100,
                                 rule=rule, rel_tol=0.01, s_low=2000, s_step=500, s_high=20000)
    for gt, query, history in zip(gts, queries, [[0], [1]], strict=True):
        truth = seqq.exact(model, history, query)
        assert gt.kind == "surrogate" and 2000 <= gt.samples <= 20000
        assert abs(gt.value - truth) <= 4 * gt.rel_stderr * gt.value
        assert gt.entropy > 0
        if rule == "relative" and gt.samples < 20000:
            assert gt.rel_stderr < 0.01
    exact_entropy = model.restricted_entropy([0], queries[0].masks(10)[0])
    assert gts[0].entropy == pytest.approx(exact_entropy, rel=0.02)


def test_relative_rule_stops_when_precise():
    model = random_markov(10, 1, seed=4)
    gt = seqq.ground_truth(model, [0], Q.hitting_time(3, 7), seed=1, exact_max_calls=10,
                           rule="relative", rel_tol=0.05, s_low=1000, s_step=1000, s_high=50000)
    assert gt.samples < 50000 and gt.rel_stderr < 0.05
