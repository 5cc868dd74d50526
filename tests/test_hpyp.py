"""HPYP n-gram models (sequence memoizer, paper 002): exact DP against enumeration through the
protocol on real Shakespeare text, Pitman–Yor identities, the "oacac" trees, fit quality,
checkpoints and the `seqq train model=hpyp` command."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import seqq
from seqq import queries as Q
from seqq.data import load_dataset
from seqq.errors import CheckpointError
from seqq.models.hpyp import HPYPModel
from seqq.models.loading import load_model
from seqq.training.scoring import held_out_windows, nats_per_symbol

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def shakespeare():
    return load_dataset("shakespeare", REPO / "data", file="tinyshakespeare_input.txt",
                        block_chars=5000, fractions=[0.8, 0.1, 0.1], seed=0)


@pytest.fixture(scope="module")
def model(shakespeare):
    return HPYPModel.fit(shakespeare.train, shakespeare.vocab, order=4)


def enumerate_query(model, history, query) -> float:
    """p(Q) by expanding every allowed prefix through the model's step function (no DP),
    following the query's lattice until each path is decided."""
    lattice = query.lattice(model.vocab_size)
    log_probs, state = model.initial_state([history])
    nodes, joint, total = lattice.roots.clone(), torch.zeros(1, dtype=torch.float64), 0.0
    while len(nodes):
        children = lattice.child_table(nodes)
        rows, tokens = (children >= 0).nonzero(as_tuple=True)
        child, child_joint = children[rows, tokens], joint[rows] + log_probs.double()[rows, tokens]
        done = lattice.free[child]
        total += child_joint[done].exp().sum().item()
        rows, tokens = rows[~done], tokens[~done]
        if not len(rows):
            break
        log_probs, state = model.step(model.select(state, rows), tokens)
        nodes, joint = child[~done], child_joint[~done]
    return total


def test_dp_equals_enumeration_on_shakespeare(shakespeare, model):
    ids = {c: i for i, c in enumerate(shakespeare.vocab)}
    e, t, space = ids["e"], ids["t"], ids[" "]
    histories = [[0], [0, ids["T"]], shakespeare.test[0][:40], shakespeare.test[3][:200]]
    for history in histories:
        for K in range(1, 5):
            queries = [Q.hitting_time(e, K), Q.event_at([space, t], K),
                       Q.a_before_b(e, [t, space], K), Q.count(space, 1, K)]
            if K <= 2:  # the unrestricted product enumerates all 66^K paths
                queries.append(Q.product([None] * K))
            for query in queries:
                truth = enumerate_query(model, history, query)
                assert seqq.exact(model, history, query) == pytest.approx(truth, rel=1e-9)


def test_states_are_longest_context_suffixes(shakespeare, model):
    contexts = {tuple(int(s) for s in row if s >= 0): i for i, row in enumerate(model.contexts.tolist())}
    assert len(contexts) == model.num_contexts
    text = shakespeare.test[5][:300]
    _, state = model.initial_state([text[:1]])
    for i in range(1, len(text)):
        history = tuple(text[max(0, i - model.order + 1):i])
        longest = next(history[j:] for j in range(len(history) + 1) if history[j:] in contexts)
        assert int(state[0]) == contexts[longest] == model._context(text[:i])
        _, state = model.step(state, torch.tensor([text[i]]))


def test_probabilities_are_normalised(shakespeare, model):
    assert torch.allclose(model.log_table.exp().sum(-1), torch.ones(model.num_contexts,
                                                                    dtype=torch.float64))
    survive = sum(seqq.exact(model, [0], Q.hitting_time(5, k)) for k in range(1, 9))
    never = seqq.exact(model, [0], Q.product([[v for v in range(66) if v != 5]] * 8))
    assert survive + never == pytest.approx(1.0, abs=1e-12)


def test_pitman_yor_coincidence_and_theorem_1():
    """Two draws from PY(d, 0) over a (nearly) non-atomic base coincide with probability 1 − d,
    and from PY(d2, 0) over PY(d1, 0) with 1 − d1·d2 (002, Theorem 1): seat one customer, then
    sample the next draw from the model's predictive through the protocol."""
    V, d1, d2, draws = 100_000, 0.3, 0.6, 20_000
    vocab = [str(i) for i in range(V)]
    single = HPYPModel.fit([[7]], vocab, order=2, skip_first=False, discounts=[d1, d2])
    composed = HPYPModel.fit([[3, 7]], vocab, order=2, skip_first=True, discounts=[d1, d2])
    generator = torch.Generator().manual_seed(0)
    for model, history, coincide in ((single, [], 1 - d1), (composed, [3], 1 - d1 * d2)):
        log_probs, _ = model.initial_state([history])
        assert log_probs[0, 7].exp().item() == pytest.approx(coincide + (1 - coincide) / V,
                                                             rel=1e-12)
        same = (torch.multinomial(log_probs[0].exp(), draws, replacement=True,
                                  generator=generator) == 7).double()
        stderr = math.sqrt(coincide * (1 - coincide) / draws)
        assert abs(same.mean().item() - coincide) < 4 * stderr


def test_oacac_trie_and_tree_node_counts():
    """Seed notes §3c: the prefix trie of "oacac" has 10 nodes, the collapsed prefix tree 6."""
    model = HPYPModel.fit([[0, 1, 2, 1, 2]], ["o", "a", "c"], order=6, skip_first=False)
    assert model.num_contexts == 10
    assert model.prefix_tree_nodes() == 6


def test_gibbs_seating_matches_the_posterior():
    """Two customers of one type in a root PY(d, 0) restaurant over a uniform base on V symbols
    sit at two tables with posterior probability d·H / (d·H + 1 − d) (H = 1/V)."""
    d, V, runs = 0.5, 2, 600
    two_tables = sum(int(HPYPModel.fit([[1], [1]], ["a", "b"], order=2, skip_first=False,
                                       discounts=[d, d], sweeps=8, seed=s,
                                       resample_discounts=False).tables[0]) == 2
                     for s in range(runs))
    posterior = d / V / (d / V + 1 - d)
    assert abs(two_tables / runs - posterior) < 4 * math.sqrt(posterior * (1 - posterior) / runs)


def test_gibbs_keeps_the_franchise_consistent_and_is_seeded(shakespeare):
    text = [seq[:3000] for seq in shakespeare.train[:3]]
    kn = HPYPModel.fit(text, shakespeare.vocab, order=3)
    fitted = HPYPModel.fit(text, shakespeare.vocab, order=3, sweeps=2, seed=1)
    again = HPYPModel.fit(text, shakespeare.vocab, order=3, sweeps=2, seed=1)
    assert torch.equal(fitted.tables, again.tables) and torch.equal(fitted.discounts,
                                                                      again.discounts)
    assert not torch.equal(fitted.tables, kn.tables)
    assert (fitted.tables >= 1).all() and (fitted.tables <= fitted.customers).all()
    assert torch.equal(kn.direct_customers(), fitted.direct_customers())  # only seating moved
    assert torch.allclose(fitted.log_table.exp().sum(-1), torch.ones(fitted.num_contexts,
                                                                     dtype=torch.float64))


def test_test_log_likelihood_beats_a_bigram(shakespeare):
    windows = held_out_windows(shakespeare.test, 100, shakespeare.bos_id)
    five, _ = nats_per_symbol(HPYPModel.fit(shakespeare.train, shakespeare.vocab, order=5),
                              windows)
    bigram, count = nats_per_symbol(HPYPModel.fit(shakespeare.train, shakespeare.vocab, order=2),
                                    windows)
    print(f"test nats/symbol on {count} symbols: order 5 {five:.4f}, KN bigram {bigram:.4f}")
    assert five < bigram - 0.5 and bigram < math.log(65)


def test_tempered_keeps_states_and_sharpens(model):
    cold = model.tempered(0.5)
    assert torch.equal(cold.next_context, model.next_context)
    assert torch.allclose(cold.log_table, torch.log_softmax(2 * model.log_table, -1))
    assert (cold.log_table.max(-1).values >= model.log_table.max(-1).values - 1e-12).all()


def test_checkpoint_round_trip(tmp_path, shakespeare, model):
    path = tmp_path / "shakespeare_hpyp.pt"
    model.save(path)
    for loaded in (HPYPModel.load(path),
                   load_model({"type": "hpyp", "checkpoint": str(path)}, vocab=shakespeare.vocab),
                   load_model({"type": "hpyp"}, dataset="shakespeare", checkpoint_dir=tmp_path)):
        assert loaded.vocab == model.vocab and loaded.order == model.order
        assert torch.equal(loaded.log_table, model.log_table)
        assert torch.equal(loaded.next_context, model.next_context)
    with pytest.raises(CheckpointError, match="different vocabulary"):
        load_model({"type": "hpyp", "checkpoint": str(path)}, vocab=shakespeare.vocab[:-1])
    with pytest.raises(CheckpointError, match="not found"):
        HPYPModel.load(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"\x00junk")
    with pytest.raises(CheckpointError, match="corrupt"):
        HPYPModel.load(tmp_path / "junk.pt")


@pytest.mark.slow
def test_seqq_train_fits_saves_and_compares_with_the_lstm(tmp_path, shakespeare):
    from seqq.models.checkpoint import save_checkpoint
    from seqq.models.lstm import LSTMNet

    save_checkpoint(tmp_path / "shakespeare_lstm.pt", LSTMNet(66, 8, 1, 0.0), shakespeare.vocab)
    run = subprocess.run(
        [sys.executable, "-m", "seqq.commands.cli", "train", "model=hpyp", "model.order=3",
         "dataset=shakespeare", f"checkpoint_dir={tmp_path}", f"data_root={REPO / 'data'}",
         f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    import json

    info = json.loads((tmp_path / "run" / "run_info.json").read_text())
    assert info["checkpoint"] == str(tmp_path / "shakespeare_hpyp.pt")
    assert 1.0 < info["test_nats_per_symbol"] < info["lstm_test_nats_per_symbol"]  # untrained LSTM
    model = HPYPModel.load(tmp_path / "shakespeare_hpyp.pt")
    assert model.order == 3 and model.info["dataset"] == "shakespeare"


@pytest.mark.slow
def test_exact_figure_presets_run_on_hpyp(tmp_path, shakespeare):
    """`make fig3-exact` / `make fig14-exact`: the presets query HPYP models at K = 3..11 and up
    to K = 30, and every row's ground truth is the model's exact DP answer."""
    from conftest import compose_sweep

    from seqq.reports.tables import load_results
    from seqq.sweeps import sweep

    common = ["dataset=shakespeare", f"checkpoint_dir={tmp_path}", f"data_root={REPO / 'data'}",
              f"sweep.root={tmp_path}", "sweep.progress=false"]
    fig3 = compose_sweep(["preset=fig3_exact", *common])
    fig14 = compose_sweep(["preset=unaccounted_exact", *common])
    assert fig3.model.type == fig14.model.type == "hpyp" and fig14.sweep.ground_truth
    assert sweep.horizons(fig3) == list(range(3, 12)) and max(sweep.horizons(fig14)) == 30
    model = HPYPModel.fit(shakespeare.train, shakespeare.vocab, order=3)
    model.save(tmp_path / "shakespeare_hpyp.pt")
    probe = seqq.ground_truth(model, [0], Q.hitting_time(1, 11), seed=0, exact_max_calls=1,
                              s_low=10, s_step=10, s_high=10)
    assert probe.kind == "exact" and probe.method == "dp"  # the model's own DP, never sampled
    run = compose_sweep(["preset=fig3_exact", *common, "sweep.histories=2",
                         "sweep.ks=[3,11]", "levels.S=[10]"])
    table = load_results([str(sweep.run(run) / "results")])
    assert len(table) == 2 * 2 * 3 and (table.truth_kind == "exact").all()
    assert (table.truth > 0).all() and (table.truth_samples == 0).all()
