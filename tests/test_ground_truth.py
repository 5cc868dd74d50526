"""Ground truth (docs/decisions.md §6): the model's exact answer, exact enumeration when affordable,
else an estimate (WOR sum-and-sample under the relative rule, adaptive IS under the paper's)."""

import dataclasses
import importlib
import math

import pytest
import torch
from oracles import brute_force, random_markov, tiny_lstm

import seqq
from seqq import queries as Q
from seqq.errors import QueryError
from seqq.estimators import surrogates
from seqq.estimators.ground_truth import TWISTED_FLOOR
from seqq.estimators.surrogates import distill_surrogate
from seqq.models import TemperatureModel
from seqq.models.hpyp import HPYPModel
from seqq.models.markov import MarkovModel

ground_truth_module = importlib.import_module("seqq.estimators.ground_truth")


def opaque(model):
    """The same distribution without the model's exact DP, so ground truth must estimate."""
    return TemperatureModel(model, 1.0)


def test_models_with_an_exact_answer_use_it():
    # issue 7 defect 6: a Markov model used to get a 700 001-call estimate
    model = random_markov(10, 1, seed=4)
    query = Q.a_before_b(2, 5, 9)
    gt = seqq.ground_truth(model, [0], query, exact_max_calls=10)
    assert gt.kind == "exact" and gt.method == "dp" and gt.model_calls == 0
    assert gt.value == pytest.approx(seqq.exact(model, [0], query), rel=1e-12)
    single = seqq.ground_truth(model, [0], Q.hitting_time(3, 7))
    assert single.entropy == pytest.approx(
        model.restricted_entropy([0], Q.hitting_time(3, 7)), rel=1e-9)


def test_cheap_queries_are_exact():
    model = tiny_lstm()
    gt = seqq.ground_truth(model, [0], Q.hitting_time(1, 4))
    assert gt.kind == "exact" and gt.method == "enumeration" and gt.samples == 0
    assert gt.rel_stderr == 0.0
    assert gt.value == pytest.approx(seqq.estimate(model, [0], Q.hitting_time(1, 4), "exact").value)
    assert gt.model_calls == 1 + 4 + 16 + 64


@pytest.mark.parametrize("rule, method", [("absolute", "importance"), ("relative", "wor")])
def test_an_estimated_truth_is_close_and_reports_its_error(rule, method):
    markov = random_markov(10, 1, seed=4)
    queries = [Q.hitting_time(3, 7), Q.a_before_b(2, 5, 6)]
    gts = seqq.ground_truth_many(opaque(markov), [[0], [1]], queries, seed=0,
                                 exact_max_calls=100, rule=rule, rel_tol=0.01, s_low=2000,
                                 s_step=500, s_high=20000, progress=False)
    for gt, query, history in zip(gts, queries, [[0], [1]], strict=True):
        truth = seqq.exact(markov, history, query)
        assert gt.method == method and gt.kind == "estimated"
        assert abs(gt.value - truth) <= 4 * gt.rel_stderr * gt.value
        assert gt.entropy > 0
        if rule == "relative":
            assert gt.rel_stderr < 0.01
        else:
            assert 2000 <= gt.samples <= 20000
    exact_entropy = markov.restricted_entropy([0], queries[0])
    assert gts[0].entropy == pytest.approx(exact_entropy, rel=0.02)


def test_relative_rule_is_exact_when_the_head_exhausts_q():
    markov = random_markov(4, 1, seed=1)  # 3^3 = 27 paths: doubling WOR stages exhaust them
    query = Q.hitting_time(0, 4)
    gt = seqq.ground_truth(opaque(markov), [1], query, exact_max_calls=5, rule="relative",
                           rel_tol=1e-12, progress=False)
    assert gt.kind == "exact" and gt.method == "wor" and gt.rel_stderr == 0.0
    assert gt.value == pytest.approx(seqq.exact(markov, [1], query), rel=1e-9)


def test_relative_rule_stops_when_precise():
    gt = seqq.ground_truth(opaque(random_markov(10, 1, seed=4)), [0], Q.hitting_time(3, 7),
                           seed=1, exact_max_calls=10, rule="relative", rel_tol=0.05,
                           progress=False)
    assert gt.rel_stderr < 0.05 and gt.model_calls < 20_000


def test_mixed_batches_give_each_query_its_own_rule():
    # cheap queries enumerate, the rest run WOR on a subset whose calls go to the right tasks
    markov = random_markov(6, 1, seed=2)
    queries = [Q.hitting_time(1, 3), Q.hitting_time(2, 7), Q.next_event(3), Q.count(0, 2, 6)]
    gts = seqq.ground_truth_many(opaque(markov), [[0]] * 4, queries, seed=0, exact_max_calls=40,
                                 rule="relative", rel_tol=0.02, progress=False)
    assert [g.method for g in gts] == ["enumeration", "wor", "enumeration", "wor"]
    assert gts[0].model_calls == 1 + 5 + 25 and gts[2].model_calls == 1
    for gt, query in zip(gts, queries, strict=True):
        truth = seqq.exact(markov, [0], query)
        assert abs(gt.value - truth) <= 4 * gt.rel_stderr * gt.value + 1e-12
        assert gt.model_calls >= 1


def test_the_wor_estimate_runs_in_groups_that_bound_its_trie(monkeypatch):
    """Tasks share a trie only up to `TRIE_CALLS` worst-case calls: with a cap below one
    task's, each runs alone, and each is still within 4 standard errors of the truth."""
    runs = []
    sampler = ground_truth_module.until_method()
    counted = dataclasses.replace(sampler, until=lambda batch, *a, **k: runs.append(
        batch.num_tasks) or sampler.until(batch, *a, **k))
    monkeypatch.setattr(ground_truth_module, "TRIE_CALLS", 1)
    monkeypatch.setattr(ground_truth_module, "until_method", lambda: counted)
    markov = random_markov(6, 1, seed=2)
    queries = [Q.hitting_time(2, 7), Q.count(0, 2, 6), Q.hitting_time(1, 6)]
    gts = seqq.ground_truth_many(opaque(markov), [[0], [1], [2]], queries, seed=0,
                                 exact_max_calls=40, rule="relative", rel_tol=0.02,
                                 progress=False)
    assert runs == [1, 1, 1]
    for gt, history, query in zip(gts, [[0], [1], [2]], queries, strict=True):
        truth = seqq.exact(markov, history, query)
        assert gt.method == "wor" and abs(gt.value - truth) <= 4 * gt.rel_stderr * gt.value


def test_the_absolute_rule_stops_where_one_step_rounds_would(monkeypatch):
    """Rounds draw several checkpoints ahead; each query must still stop at the first
    checkpoint (S_low, then every S_step) where Eq. 66's per-sample variance of *its first n
    samples* is below δ, and report the mean of exactly those n. Replayed from the recorded
    draws, with stops inside rounds (samples after them dropped) among the cases."""
    sampler_module = importlib.import_module("seqq.estimators.adaptive_importance")
    rounds = []
    iid_draws = sampler_module.iid_draws
    monkeypatch.setattr(sampler_module, "iid_draws",
                        lambda *a: rounds.append(iid_draws(*a)) or rounds[-1])
    s_low, s_step, s_high, delta = 200, 100, 5000, 5e-3
    histories = [[h] for h in range(10)]
    gts = seqq.ground_truth_many(opaque(random_markov(10, 1, seed=4)), histories,
                                 Q.hitting_time(2, 5), seed=0, exact_max_calls=10,
                                 rule="absolute", delta=delta, s_low=s_low, s_step=s_step,
                                 s_high=s_high, progress=False)
    checkpoints = list(range(s_low, s_high + 1, s_step))
    assert 1 < len(rounds) < len(checkpoints) / 4
    round_ends = set()
    for task, gt in enumerate(gts):  # hitting-time queries: one branch per task
        mine = [r.row_branch == task for r in rounds]
        ends = torch.tensor([int(m.sum()) for m in mine]).cumsum(0)
        round_ends |= set(ends.tolist())
        w = torch.cat([r.log_w[m] for r, m in zip(rounds, mine, strict=True)]).exp()
        neg_log_q = -torch.cat([r.log_q[m] for r, m in zip(rounds, mine, strict=True)])
        for n in checkpoints:
            mean = w[:n].mean().item()
            per_sample_var = (w[:n] ** 2).mean().item() - mean**2
            if per_sample_var < delta or n == s_high:
                break
        assert gt.samples == n and gt.value == pytest.approx(mean, rel=1e-9)
        assert gt.rel_stderr == pytest.approx((per_sample_var / n) ** 0.5 / mean, rel=1e-6)
        assert gt.entropy == pytest.approx(neg_log_q[:n].mean().item(), rel=1e-9)
    stops = {gt.samples for gt in gts}
    assert stops - round_ends and s_low in stops and s_high in stops


def test_estimated_truths_answer_queries_without_paths_and_refuse_empty_steps():
    markov = opaque(random_markov(6, 1, seed=2))
    no_paths = Q.hitting_time([0, 1, 2, 3, 4, 5], 3)  # every symbol must be avoided twice
    for rule in ("absolute", "relative", "twisted"):  # exactly 0 at no cost, whatever the limit
        alone = seqq.ground_truth(markov, [0], no_paths, seed=0, exact_max_calls=0, rule=rule,
                                  s_low=100, s_step=100, s_high=300)
        assert alone.value == 0.0 and alone.kind == "exact" and alone.model_calls == 1
    with pytest.raises(ValueError, match="s_step must be at least 1"):
        seqq.ground_truth(markov, [0], Q.hitting_time(2, 5), exact_max_calls=0, s_step=0)


# --- the twisted rule (docs/decisions.md §43) --------------------------------------------------

def judge_for(model, starts, symbols=20_000):
    """A surrogate distilled from `model` as the rule would (fewer symbols: seconds)."""
    return distill_surrogate(model, [str(v) for v in range(model.vocab_size)], None,
                             symbols=symbols, starts=starts)


def test_twisted_rule_is_close_reports_its_error_and_the_restricted_entropy():
    markov = random_markov(10, 1, seed=4)
    model = opaque(markov)
    queries = [Q.hitting_time(3, 7), Q.a_before_b(2, 5, 6), Q.count(1, 3, 12, op=">=")]
    histories = [[0], [1], [2]]
    gts = seqq.ground_truth_many(model, histories, queries, seed=0, exact_max_calls=100,
                                 rule="twisted", rel_tol=0.01, progress=False,
                                 surrogate=judge_for(model, histories))
    for gt, query, history in zip(gts, queries, histories, strict=True):
        truth = seqq.exact(markov, history, query)
        assert gt.method == "twisted_wor" and gt.kind == "estimated"
        assert gt.rel_stderr < 0.01 and gt.samples >= ground_truth_module.TWISTED_MIN_TAIL
        assert abs(gt.value - truth) <= 4 * gt.rel_stderr * gt.value
        # H(q) of the untwisted restricted proposal, though the draws come from q̃
        assert gt.entropy == pytest.approx(markov.restricted_entropy(history, query), rel=0.05)


def test_twisted_rule_is_exact_when_its_head_exhausts_q():
    markov = random_markov(4, 1, seed=1)  # 27 paths
    model = opaque(markov)
    gt = seqq.ground_truth(model, [1], Q.hitting_time(0, 4), exact_max_calls=5, rule="twisted",
                           rel_tol=1e-12, progress=False, surrogate=judge_for(model, [[1]]))
    assert gt.kind == "exact" and gt.method == "twisted_wor" and gt.rel_stderr == 0.0
    assert gt.value == pytest.approx(seqq.exact(markov, [1], Q.hitting_time(0, 4)), rel=1e-9)
    assert gt.entropy == pytest.approx(markov.restricted_entropy([1], Q.hitting_time(0, 4)),
                                       rel=1e-9)


@pytest.mark.parametrize("oracle", ["markov", "hpyp", "tiny_lstm"])
def test_twisted_truths_are_unbiased_within_their_errors(oracle):
    """Against exact answers (forward DP, or enumeration for the LSTM), over seeds: every
    |z| = |p̂ − p|/SE below 4, and their mean square near 1 (the errors are honest)."""
    if oracle == "tiny_lstm":
        model = tiny_lstm()
        queries = [Q.hitting_time(1, 8), Q.a_before_b(0, 2, 8), Q.count(3, 2, 8)]
        exact = [brute_force(model, [0], q) for q in queries]
    else:
        base = (random_markov(8, 2, seed=5) if oracle == "markov" else
                HPYPModel.fit([torch.randint(6, (300,), generator=torch.Generator()
                                             .manual_seed(s)).tolist() for s in range(8)],
                              [str(v) for v in range(6)], order=3, skip_first=False))
        model = opaque(base)
        queries = [Q.hitting_time(1, 9), Q.a_before_b(0, 2, 20), Q.count(3, 8, 30, op=">=")]
        exact = [math.exp(base.log_probability([0, 1], q)) for q in queries]
    history = [0] if oracle == "tiny_lstm" else [0, 1]
    judge = judge_for(model, [history])
    z = []
    for seed in range(8):
        gts = seqq.ground_truth_many(model, [history] * 3, queries, seed=seed, exact_max_calls=0,
                                     rule="twisted", rel_tol=0.02, progress=False,
                                     surrogate=judge)
        for g, p in zip(gts, exact, strict=True):
            assert g.kind == "estimated" or g.value == pytest.approx(p, rel=1e-9)
            z += [(g.value - p) / (g.rel_stderr * g.value)] if g.kind == "estimated" else []
    z = torch.tensor(z)
    assert len(z) > 12
    assert z.abs().max() < 4 and 0.3 < (z**2).mean() < 2.5, z


def test_twisted_rule_distils_its_surrogate_once_per_model(monkeypatch, tmp_path):
    """No surrogate given: one is distilled from the model (its calls are the surrogate's,
    not a truth's), kept for the model object, and saved in SEQQ_CACHE under a hash of the
    weights, from which a fresh copy of the model loads it without a call."""
    monkeypatch.setenv("SEQQ_CACHE", str(tmp_path))
    monkeypatch.setattr(surrogates, "DISTILL_SYMBOLS", 20_000)
    distilled = []
    real = surrogates.distill_surrogate
    monkeypatch.setattr(surrogates, "distill_surrogate",
                        lambda *a, **k: distilled.append(1) or real(*a, **k))
    query = Q.hitting_time(1, 7)
    first = seqq.ground_truth(tiny_lstm(), [0], query, seed=0, exact_max_calls=0,
                              rule="twisted", progress=False)
    model = tiny_lstm()
    again = seqq.ground_truth_many(model, [[0], [2]], query, seed=0, exact_max_calls=0,
                                   rule="twisted", progress=False)
    seqq.ground_truth(model, [1], query, seed=0, exact_max_calls=0, rule="twisted",
                      progress=False)
    assert len(distilled) == 1 and len(list((tmp_path / "surrogates").glob("*.pt"))) == 1
    assert first.method == again[0].method == "twisted_wor"
    assert first.model_calls < 20_000  # the distillation's calls are not the truth's
    truth = brute_force(tiny_lstm(), [0], query)
    assert abs(first.value - truth) <= 4 * first.rel_stderr * first.value


def test_twisted_rule_runs_untwisted_where_no_surrogate_can_steer(monkeypatch):
    monkeypatch.setattr(surrogates, "SURROGATE_TABLE", 10)  # not even a bigram fits
    monkeypatch.setattr(surrogates, "distill_surrogate", None)  # and none is distilled
    markov = random_markov(6, 1, seed=2)
    gt = seqq.ground_truth(opaque(markov), [0], Q.hitting_time(2, 6), seed=0,
                           exact_max_calls=0, rule="twisted", progress=False)
    assert gt.method == "wor" and gt.rel_stderr < 0.01
    assert abs(gt.value - seqq.exact(markov, [0], Q.hitting_time(2, 6))) <= 4 * gt.rel_stderr * gt.value


def test_twisted_rule_refuses_bad_settings():
    model = opaque(random_markov(6, 1, seed=2))
    with pytest.raises(ValueError, match="rule must be one of 'absolute', 'relative', 'twisted'"):
        seqq.ground_truth(model, [0], Q.hitting_time(2, 5), exact_max_calls=0, rule="twist")
    with pytest.raises(ValueError, match="rel_tol must be positive"):
        seqq.ground_truth(model, [0], Q.hitting_time(2, 5), exact_max_calls=0, rule="twisted",
                          rel_tol=0.0)
    wrong = MarkovModelOf(5)
    with pytest.raises(QueryError, match="the surrogate has 5 symbols but the model has 6"):
        seqq.ground_truth(model, [0], Q.hitting_time(2, 5), exact_max_calls=0, rule="twisted",
                          surrogate=wrong)


def MarkovModelOf(V: int):
    return random_markov(V, 1, seed=0)


def test_the_twisted_rule_reruns_alone_a_truth_that_spends_its_share(monkeypatch):
    """First pass: tasks share a trie, each capped at TRIE_CALLS / TWISTED_GROUP calls; one
    that runs out is computed again under the full cap, its first calls counted too."""
    runs = []
    sampler = ground_truth_module.until_method()
    counted = dataclasses.replace(sampler, until=lambda batch, rel, cap, **k: runs.append(
        (batch.num_tasks, int(cap))) or sampler.until(batch, rel, cap, **k))
    monkeypatch.setattr(ground_truth_module, "TRIE_CALLS", 32_000)
    monkeypatch.setattr(ground_truth_module, "until_method", lambda: counted)
    markov = random_markov(10, 1, seed=4)
    model = opaque(markov)
    queries = [Q.hitting_time(3, 4), Q.hitting_time(3, 12)]
    gts = seqq.ground_truth_many(model, [[0], [1]], queries, seed=0, exact_max_calls=0,
                                 rule="twisted", rel_tol=0.005, s_high=20_000, progress=False,
                                 surrogate=judge_for(model, [[0], [1]]))
    share = 32_000 // ground_truth_module.TWISTED_GROUP
    assert runs == [(2, share), (1, 20_000 * 11 + 1)]
    assert gts[0].model_calls <= share < gts[1].model_calls and gts[1].rel_stderr < 0.005
    for gt, query, history in zip(gts, queries, [[0], [1]], strict=True):
        truth = seqq.exact(markov, history, query)
        assert abs(gt.value - truth) <= 4 * gt.rel_stderr * gt.value + 1e-12 * truth


def _misled_judge(floor, monkeypatch):
    """z of twisted truths over seeds where the surrogate rules out the route to the event:
    the model reaches 3 mostly through 2 (p(3 | 2) = 0.9), the surrogate thinks 2 never leads
    to 3 (1e-9), so its twist all but hides the paths holding most of p."""
    monkeypatch.setattr(ground_truth_module, "TWISTED_FLOOR", floor)
    table = torch.full((5, 5), 0.2, dtype=torch.float64)
    table[:, 3], table[2, 3] = 0.002, 0.9
    model = MarkovModel(table, order=1)
    believed = table.clone()
    believed[2, 3] = 1e-9
    query = Q.hitting_time(3, 6)
    p = seqq.exact(model, [0], query)
    z = []
    for seed in range(12):
        gt = seqq.ground_truth(opaque(model), [0], query, seed=seed, exact_max_calls=0,
                               rule="twisted", rel_tol=0.02, progress=False,
                               surrogate=MarkovModel(believed, order=1))
        z.append((gt.value - p) / (gt.rel_stderr * gt.value))
    return torch.tensor(z)


def test_the_judges_twist_is_defensive(monkeypatch):
    """With the twist floored at TWISTED_FLOOR of each step's largest, a surrogate that
    underrates a symbol cannot hide its paths, so a truth's error stays honest; floored at
    1e-30 instead (a plain twist), the same judge is confidently wrong."""
    z = _misled_judge(TWISTED_FLOOR, monkeypatch)
    assert z.abs().max() < 4 and (z**2).mean() < 2.5, z
    assert _misled_judge(1e-30, monkeypatch).abs().max() > 4
