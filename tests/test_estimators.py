"""Every estimator against exact answers: unbiasedness over many seeds, bounds that hold."""

import math

import pytest
import torch
from oracles import brute_force, random_markov, tiny_gpt2, tiny_lstm

import seqq
from seqq import queries as Q

SEEDS = 240  # independent replicas, run as one batched call


def replicas(model, history, query, method, **options):
    """SEEDS independent estimates of one query, computed together in shared batches."""
    return seqq.estimate_many(model, [history] * SEEDS, query, method, seed=11, **options)


def assert_unbiased(estimates, truth):
    values = torch.tensor([e.value for e in estimates], dtype=torch.float64)
    assert not torch.isnan(values).any()
    se = values.std() / math.sqrt(len(values))
    assert abs(values.mean().item() - truth) <= 4 * se.item() + 1e-12, (values.mean(), truth, se)


CASES = [
    ("markov", lambda: random_markov(8, 1, seed=5), [2], Q.hitting_time(3, 5)),
    ("markov-order2", lambda: random_markov(6, 2, seed=6), [1, 4], Q.hitting_time([0, 5], 4)),
    ("markov-count", lambda: random_markov(5, 1, seed=7), [0], Q.count(1, 2, 4)),
    ("markov-before", lambda: random_markov(6, 1, seed=8), [0], Q.a_before_b(2, [3, 4], 4)),
    ("lstm", tiny_lstm, [0, 3, 1], Q.hitting_time(2, 5)),
    ("lstm-count", tiny_lstm, [4], Q.count(0, 1, 4)),
    ("gpt2", tiny_gpt2, [1, 0, 3], Q.hitting_time(4, 4)),
    ("gpt2-before", tiny_gpt2, [2], Q.a_before_b(0, 1, 4)),
    # automaton queries beyond unions of products, and overlapping (DNF) unions
    ("markov-atleast", lambda: random_markov(5, 1, seed=9), [0], Q.count(1, 2, 5, op=">=")),
    ("lstm-within", tiny_lstm, [1, 2], Q.occurs_within(3, 4)),
    ("lstm-overlap", tiny_lstm, [0], Q.event_at(1, 2) | Q.count(2, 1, 3, op=">=")),
    ("gpt2-overlap", tiny_gpt2, [3], Q.event_at(0, 1) | Q.occurs_within(2, 3)),
]


@pytest.fixture(params=CASES, ids=[c[0] for c in CASES])
def case(request):
    _, make, history, query = request.param
    model = make()
    return model, history, query, brute_force(model, history, query)


@pytest.mark.parametrize("method, options", [
    ("importance", {"samples": 20}),
    ("hybrid", {"samples": 5, "max_width": 6}),
    ("naive", {"samples": 50}),
    ("uniform", {"samples": 20}),
    ("wor", {"samples": 3, "tail_samples": 3}),
    ("hindsight_gumbel", {"samples": 6, "repeats": 2}),
    ("importance", {"budget": 40}),
    ("hybrid", {"budget": 60, "max_width": 4}),
])
def test_sampling_estimators_are_unbiased(case, method, options):
    model, history, query, truth = case
    assert_unbiased(replicas(model, history, query, method, **options), truth)


@pytest.mark.parametrize("method, options", [
    ("beam", {"beam_width": 3}),
    ("tail_beam", {}),
    ("coverage_beam", {"alpha": 0.6}),
])
def test_beams_never_exceed_the_exact_value(case, method, options):
    model, history, query, truth = case
    est = seqq.estimate(model, history, query, method, **options)
    assert est.is_lower_bound and est.stderr is None
    assert est.value <= truth * (1 + 1e-6)


def test_coverage_bound_and_exactness(case):
    model, history, query, truth = case
    for alpha in (0.3, 0.7, 0.95):
        est = seqq.estimate(model, history, query, "coverage_beam", alpha=alpha)
        assert truth - est.value <= est.extras["gap_bound"] + 1e-6 * truth  # Thm. 1 (float32 model)
    full = seqq.estimate(model, history, query, "coverage_beam", alpha=1.0)
    assert full.value == pytest.approx(truth, rel=1e-5)
    wide = seqq.estimate(model, history, query, "beam", beam_width=query.size(model.vocab_size))
    assert wide.value == pytest.approx(truth, rel=1e-5)


def test_hybrid_is_at_least_its_beam_mass(case):
    model, history, query, truth = case
    for est in replicas(model, history, query, "hybrid", samples=3, max_width=4)[:20]:
        assert est.value >= est.extras["beam_mass"] * (1 - 1e-9)


def test_importance_entropy_estimates_the_restricted_entropy():
    model = random_markov(8, 1, seed=5)
    query = Q.hitting_time(3, 5)
    truth = model.restricted_entropy([2], query)
    for method in ("importance", "hybrid"):
        entropies = [e.entropy for e in replicas(model, [2], query, method, samples=10)]
        values = torch.tensor(entropies, dtype=torch.float64)
        assert abs(values.mean().item() - truth) <= 4 * values.std().item() / math.sqrt(SEEDS)


def test_naive_returns_zero_for_rare_queries():
    model = seqq.models.MarkovModel.iid([1e-9, 1 - 1e-9])
    est = seqq.estimate(model, [1], Q.hitting_time(0, 5), "naive", samples=1000, seed=0)
    assert est.value == 0.0 and not math.isnan(est.value)


def test_uniform_can_exceed_one():
    model = seqq.models.MarkovModel.iid([0.98, 0.01, 0.01])
    values = [e.value for e in replicas(model, [0], Q.event_at([0, 1], 3), "uniform", samples=1)]
    assert max(values) > 1.0


@pytest.mark.parametrize("V, K", [(5, 12), (12, 9), (20, 12)])
def test_long_horizons_against_forward_dp(V, K):
    model = random_markov(V, 1, seed=V + K)
    query = Q.hitting_time(1, K)
    truth = seqq.exact(model, [0], query)  # forward DP: brute force is out of reach here
    assert_unbiased(replicas(model, [0], query, "importance", samples=10), truth)
    assert_unbiased(replicas(model, [0], query, "hybrid", samples=5, max_width=30), truth)
    assert seqq.estimate(model, [0], query, "tail_beam").value <= truth * (1 + 1e-6)


def test_naive_scores_each_task_of_a_mixed_batch_against_its_own_query():
    model = random_markov(4, 1, seed=2)
    queries = [Q.count(1, 1, 3), Q.hitting_time([0, 1, 2, 3], 2), Q.next_event([0, 2]),
               Q.a_before_b(2, 3, 4), Q.hitting_time(3, 2)]
    histories = [[0], [1], [2], [3], [1]]
    estimates = seqq.estimate_many(model, histories, queries, "naive", samples=4000, seed=1)
    assert "empty" in estimates[1].note and estimates[1].value == 0.0
    for est, history, query in zip(estimates, histories, queries, strict=True):
        truth = seqq.exact(model, history, query)
        se = math.sqrt(truth * (1 - truth) / 4000)
        assert abs(est.value - truth) <= 4 * se + 1e-12, (query.name, est.value, truth)


def test_budgeted_beam_at_astronomical_tree_sizes():
    # issue 7 defect 1: V^K = 100^11 overflowed int64 when sizing the beam for a budget
    model = seqq.models.MarkovModel.random(vocab_size=100, order=1, seed=0)
    query = Q.hitting_time(3, 11)
    est = seqq.estimate(model, [0], query, "beam", budget=2000)
    assert 1000 < est.model_calls <= 2000
    truth = seqq.exact(model, [0], query)
    # p(B) itself, less the float tolerance that makes the bound certain (decisions §38)
    assert est.lower == pytest.approx(est.value, rel=1e-4) and est.lower <= truth <= est.upper


def _kept_by_sorting(scores, branch, widths):
    """The reference choice: every branch's finite candidates sorted, its best `widths[b]`."""
    kept = set()
    for b in branch.unique().tolist():
        nodes = (branch == b).nonzero().flatten()
        flat = scores[nodes].flatten()
        order = flat.argsort(descending=True)[: int(widths[b])]
        order = order[torch.isfinite(flat[order])]
        kept |= {(int(nodes[i // scores.shape[1]]), int(i % scores.shape[1])) for i in order}
    return kept


@pytest.mark.parametrize("excluded_share", [0.0, 0.97])
@pytest.mark.parametrize("domain_kind", [None, "mask", "few", "list"])
def test_block_preselection_keeps_each_branchs_best_candidates(excluded_share, domain_kind):
    # large vocabularies pre-select a branch's best by blocks of symbols, not per-node top-k
    from seqq.estimators.engine.beam_search import BLOCKED_VOCAB, CANDIDATE_BLOCK, TopB, best_candidates
    from seqq.estimators.engine.categorical import Excluded
    V = BLOCKED_VOCAB + 77  # a shorter last block
    gen = torch.Generator().manual_seed(0)
    nodes_per_branch = torch.tensor([1, 40, 7, 0, 25])
    branch = torch.repeat_interleave(torch.arange(5), nodes_per_branch)
    scores = torch.randn(len(branch), V, generator=gen) * 3
    scores[torch.rand(scores.shape, generator=gen) < excluded_share] = -torch.inf
    scores[3] = -torch.inf  # a node without candidates
    # a decoy: a symbol far above the rest of its block, left out of the domain
    W = CANDIDATE_BLOCK
    scores[:, 31 * W: 32 * W] -= 30.0
    decoy = 31 * W + 5
    scores[:, decoy] = 50.0 + torch.arange(len(branch))
    others = scores.clone()
    others[:, decoy] = -torch.inf
    # the domain leaves out the decoy, each node's best other symbol, a run, the last symbol
    left_out = torch.cat([torch.full((len(branch), 1), decoy), others.argmax(-1, keepdim=True),
                          torch.arange(300, 560).expand(len(branch), -1),
                          torch.full((len(branch), 1), V - 1)], 1)
    allowed = torch.ones(scores.shape, dtype=torch.bool).scatter_(1, left_out, False)
    if domain_kind == "few":  # a handful of symbols per node, the decoy's block among them
        allowed = torch.zeros_like(allowed).scatter_(
            1, torch.randint(V, (len(branch), 5), generator=gen), True)
        allowed[:, decoy + 1] = True
    domain = {None: None, "mask": allowed, "few": allowed, "list": Excluded(left_out)}[domain_kind]
    ranked = scores if domain is None else torch.where(allowed, scores, -torch.inf)
    offset = torch.randn(len(branch), generator=gen, dtype=torch.float64) * 4
    widths = torch.tensor([40, 30, 1, 5, 20])  # branch 0 has fewer blocks than 40
    lengths = torch.full((5,), 4)
    node, token = best_candidates(scores, branch, 0, TopB(widths), lengths, domain=domain)
    assert set(zip(node.tolist(), token.tolist(), strict=True)) == _kept_by_sorting(
        ranked, branch, widths)
    # and ranked by a joint score: a per-node offset on float64
    def joint(values, rows):
        return values.double() + (offset if rows is None else offset[rows])[:, None]
    node, token = best_candidates(scores, branch, 0, TopB(widths), lengths, joint=joint,
                                  domain=domain)
    assert list(branch[node]) == sorted(branch[node].tolist())  # grouped by branch
    assert set(zip(node.tolist(), token.tolist(), strict=True)) == _kept_by_sorting(
        joint(ranked, None), branch, widths)


def test_block_preselection_with_no_candidate_keeps_nothing():
    from seqq.estimators.engine.beam_search import BLOCKED_VOCAB, TopB, best_candidates
    scores = torch.full((3, BLOCKED_VOCAB + 1), -torch.inf)  # p = 0 for every allowed symbol
    node, token = best_candidates(scores, torch.tensor([0, 0, 1]), 0, TopB(torch.tensor([5, 5])),
                                  torch.full((2,), 3))
    assert node.shape == token.shape == (0,)


@pytest.mark.parametrize("targets", [[1, 2, 3], list(range(40))])  # listed, or a dense mask
def test_beam_over_a_large_vocabulary_matches_the_per_node_top_k(monkeypatch, targets):
    from seqq.estimators.engine import beam_search as beam
    model = seqq.models.MarkovModel.random(vocab_size=beam.BLOCKED_VOCAB + 5, order=1, seed=3)
    query = Q.hitting_time(targets, 3)
    blocked_calls = []
    best_blocks = beam._best_blocks
    monkeypatch.setattr(beam, "_best_blocks", lambda *a: blocked_calls.append(1) or best_blocks(*a))
    runs = {}
    for blocked in (beam.BLOCKED_VOCAB, 10**9):
        monkeypatch.setattr(beam, "BLOCKED_VOCAB", blocked)
        blocked_calls.clear()
        runs[blocked] = [seqq.estimate(model, [0], query, method, seed=0, **options)
                         for method, options
                         in (("beam", {"beam_width": 40}),
                             ("coverage_beam", {"alpha": 0.5, "max_width": 30}),
                             ("hybrid", {"samples": 20, "max_width": 30}))]
        assert bool(blocked_calls) == (blocked < 10**9)  # the blocks ran, then the top-k
    for blocks, per_node in zip(*runs.values(), strict=True):
        assert blocks.value == per_node.value
        assert blocks.model_calls == per_node.model_calls
