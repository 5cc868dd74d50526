"""The trie within a byte cap (`eviction.py`): dropping rows and states changes no draw and
no answer, only the calls, and each re-expansion is one counted model call."""

import pytest
import torch
from oracles import PrefixRecording, random_markov, tiny_gpt2, tiny_lstm

from seqq import queries as Q
from seqq.estimators.engine.batch import prepare
from seqq.estimators.engine.budget import draw_paths
from seqq.estimators.engine.trie import Trie
from seqq.estimators.engine.trie.eviction import state_bytes, storages

MODELS = {"markov": lambda: random_markov(6, 2, seed=1), "lstm": lambda: tiny_lstm(6, seed=2),
          "gpt2": lambda: tiny_gpt2(6, seed=3)}


def _trie(model, max_bytes: int | None, seed: int = 0) -> Trie:
    batch = prepare(model, [[0, 1], [2, 3]], [Q.hitting_time(3, 5), Q.count(1, 2, 4)], seed)
    return Trie(batch) if max_bytes is None else Trie(batch, max_bytes=max_bytes)


def _rounds(trie: Trie, rounds: int = 6, per_round: int = 40) -> list:
    """Several rounds of i.i.d. walks, each round revisiting the prefixes of the last."""
    draws = []
    for _ in range(rounds):
        got = draw_paths(trie, torch.full((len(trie.batch.branch_task),), per_round), "proposal")
        draws.append((got.log_w, got.depth, got.leaf))
    return draws


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_capped_trie_draws_what_the_uncapped_one_draws(name):
    """With a byte cap that holds a few blocks, rows are dropped and re-expanded many times; the
    draws (their weights and the nodes they end at) are the uncapped trie's, and the extra calls
    are exactly the re-expansions."""
    model = MODELS[name]()
    whole, capped = _trie(model, None), _trie(model, max_bytes=2_000)
    ours, theirs = _rounds(whole), _rounds(capped)
    assert capped.keeper.dropped > 10 and whole.keeper.dropped == 0
    for (w0, d0, l0), (w1, d1, l1) in zip(ours, theirs, strict=True):
        assert torch.equal(d0, d1) and torch.equal(l0, l1)
        torch.testing.assert_close(w0, w1, rtol=1e-6, atol=0.0)
    assert capped.keeper.used <= 2_000 or len(capped.keeper.blocks) == 0
    extra = int(capped.batch.task_calls().sum() - whole.batch.task_calls().sum())
    assert extra == capped.keeper.reexpanded > 0  # every extra call is a re-expansion


def test_a_dropped_node_is_expanded_again_at_one_counted_call():
    """A node whose block is dropped loses its row; the next walk through it calls the model
    for it once (the recording wrapper sees the prefix a second time) and draws as before."""
    model = PrefixRecording(random_markov(4, 1, seed=4))
    trie = Trie(prepare(model, [[0]], [Q.hitting_time(1, 3)], seed=0), max_bytes=0)
    trie.walk(torch.zeros(1, dtype=torch.long))
    assert all(not len(level.row) or bool((level.row < 0).all()) for level in trie.levels[1:])
    calls = int(trie.batch.task_calls().sum())
    assert calls == model.rows == 1 + 2  # the history and the path's two new prefixes
    trie.walk(torch.zeros(1, dtype=torch.long))
    assert int(trie.batch.task_calls().sum()) - calls == model.rows - 3 > 0


def test_residual_masses_read_dropped_rows_by_expanding_them_again():
    """Sampling without replacement and removing leaves read rows of nodes the byte cap has
    dropped: they are re-expanded (ancestors first), and the masses equal the uncapped trie's."""
    model = random_markov(5, 1, seed=6)
    query = Q.hitting_time(2, 4)
    tries = [Trie(prepare(model, [[1]], [query], seed=3), max_bytes=b) for b in (2**40, 0)]
    for trie in tries:
        for _ in range(4):
            depth, leaf, _ = trie.sample_without_replacement(torch.tensor([5]))
            trie.remove([(int(d), leaf[depth == d]) for d in torch.unique(depth).tolist()])
    torch.testing.assert_close(tries[0].root_residual(), tries[1].root_residual())
    assert tries[1].keeper.dropped > 0


def test_a_state_counts_its_own_tensors_not_the_history_it_shares():
    """The byte cap counts a GPT-2 row's keys and values after the history, not the history's
    cache every row points to."""
    model = tiny_gpt2(6, seed=3)
    trie = _trie(model, None)
    draw_paths(trie, torch.full((2,), 5), "proposal")
    shared = storages(trie.levels[0].chunks[0].inner)
    level = trie.levels[1]
    state = level.chunks[0].inner
    assert 0 < state_bytes(state, shared) < state_bytes(state, set())
