"""Row chunks (seqq.models.batching): the size rule, the cache, and that chunked work equals the
unchunked work row for row. No timings are asserted: only which sizes are tried and picked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from oracles import WithoutConcat, random_markov

from seqq.models import CallCounter, LSTMModel, LSTMNet, batching
from seqq.models.batching import (
    chunk_rows,
    default_chunk_rows,
    group_chunks,
    map_row_chunks,
    measure_chunk_rows,
    pick_rows,
    set_chunk_rows,
    step_in_chunks,
)


def tiny_lstm(vocab: int = 7) -> LSTMModel:
    torch.manual_seed(0)
    return LSTMModel(LSTMNet(vocab, hidden_size=8, num_layers=2, dropout=0.0), device="cpu")


def test_pick_rows_takes_the_smallest_size_within_tolerance_of_the_best():
    assert pick_rows({256: 90.0, 512: 96.0, 1024: 100.0, 2048: 80.0}) == 512
    assert pick_rows({256: 50.0, 512: 100.0}) == 512
    assert pick_rows({256: 100.0, 512: 100.0}) == 256


def test_measurement_stays_under_the_memory_cap_and_picks_a_measured_size():
    model = tiny_lstm(vocab=7)
    choice = measure_chunk_rows(model, sizes=(4, 8, 16, 64), max_elements=7 * 10, repeats=1,
                                rows_per_timing=8)
    assert list(choice.throughput) == [4, 8, 10]  # 16 and 64 rows exceed 70 elements / V=7
    assert choice.rows in choice.throughput
    assert all(r > 0 for r in choice.throughput.values())
    assert choice.device == "cpu"


def test_measurement_stops_growing_once_a_step_is_slow():
    choice = measure_chunk_rows(tiny_lstm(), sizes=(4, 8, 16), repeats=1, slow_step_s=0.0)
    assert list(choice.throughput) == [4]


def test_chunk_rows_is_the_devices_default_unless_set_and_never_measures(monkeypatch):
    """A fixed default, so a seeded estimate never depends on a timing: a network on the CPU
    gets CPU_CHUNK_ROWS, a table model (no `device`) or a GPU model the memory cap."""
    monkeypatch.setattr(batching, "measure_chunk_rows", pytest.fail)
    model = tiny_lstm()
    counter = CallCounter(model, num_tasks=2)
    assert chunk_rows(model) == chunk_rows(counter) == batching.CPU_CHUNK_ROWS
    assert chunk_rows(random_markov(7)) == batching.MAX_ELEMENTS // 7
    gpu = SimpleNamespace(vocab_size=50_000, device=torch.device("cuda"))
    assert default_chunk_rows(gpu) == batching.MAX_ELEMENTS // 50_000
    set_chunk_rows(counter, 512)  # sets the counter's model
    assert chunk_rows(model) == 512
    assert counter.calls.tolist() == [0, 0]


def test_a_measured_size_can_be_adopted():
    model = tiny_lstm()
    choice = measure_chunk_rows(model, sizes=(4, 8), repeats=1, rows_per_timing=8)
    set_chunk_rows(model, choice.rows)
    assert chunk_rows(model) == choice.rows in (4, 8)


def test_counter_steps_big_batches_in_chunks_row_for_row():
    """Every estimator steps through `CallCounter.step`: chunks of the model's size, the same
    outputs as one step, each row charged once to its task."""
    model = tiny_lstm()
    set_chunk_rows(model, 100)
    sizes = []
    step = model.step
    model.step = lambda state, tokens: sizes.append(len(tokens)) or step(state, tokens)
    counter = CallCounter(model, num_tasks=2)
    _, root = counter.initial_state([[1, 2], [3]])
    state = counter.select(root, torch.arange(250) % 2)
    tokens = torch.randint(7, (250,), generator=torch.Generator().manual_seed(1))
    log_probs, after = counter.step(state, tokens)
    assert sizes == [84, 83, 83]
    whole_lp, (whole_h, whole_c) = step(state.inner, tokens)
    torch.testing.assert_close(log_probs, whole_lp)
    torch.testing.assert_close(after.inner[0], whole_h)
    torch.testing.assert_close(after.inner[1], whole_c)
    assert counter.calls.tolist() == [1 + 125, 1 + 125]
    assert torch.equal(after.owners, state.owners)


def test_counter_steps_a_state_as_it_is_where_every_row_continues_in_order():
    """rows = 0..n−1 over an n-row state: no `select` copy, the same outputs and charges;
    any other rows (a permutation, a subset) are selected first."""
    model = tiny_lstm()
    selected = []
    select = model.select
    model.select = lambda state, index: selected.append(index.tolist()) or select(state, index)
    counter = CallCounter(model, num_tasks=2)
    _, root = counter.initial_state([[1, 2], [3]])
    state = counter.select(root, torch.tensor([0, 1, 1]))
    tokens = torch.tensor([4, 5, 6])
    selected.clear()
    in_order, after = counter.step(state, tokens, rows=torch.arange(3))
    assert selected == []
    torch.testing.assert_close(in_order, model.step(state.inner, tokens)[0])
    assert after.owners.tolist() == [0, 1, 1] and counter.calls.tolist() == [1 + 1, 1 + 2]
    permuted, _ = counter.step(state, tokens, rows=torch.tensor([2, 1, 0]))
    fewer, _ = counter.step(state, tokens[:2], rows=torch.arange(2))
    assert selected == [[2, 1, 0], [0, 1]]
    torch.testing.assert_close(permuted, model.step(select(state.inner, torch.tensor([2, 1, 0])),
                                                    tokens)[0])
    torch.testing.assert_close(fewer, in_order[:2])


@pytest.mark.parametrize("joinable", [True, False])
def test_steps_from_rows_of_several_states_come_back_in_unjoined_chunks(joinable):
    """`step_parts`: row i continues row rows[i] of states[source[i]]. Each row gets the
    outputs of one step from its own state row, each is charged once to that row's task, the
    chunks come back in order with their rows' owners, and a chunk that continues every row
    of one state in order is stepped without a `select`. Without `concat`, chunks end where the
    source changes; no rows give no chunks' worth of rows and charge nothing."""
    lstm = tiny_lstm()
    model = lstm if joinable else WithoutConcat(lstm)
    selected = []
    select = lstm.select
    lstm.select = lambda state, index: selected.append(index.tolist()) or select(state, index)
    counter = CallCounter(model, num_tasks=3)
    _, root = counter.initial_state([[1, 2], [3], [4, 4]])
    first = counter.select(root, torch.tensor([0, 1]))  # 2 rows: tasks 0, 1
    second = counter.select(root, torch.tensor([2, 2, 0]))  # 3 rows: tasks 2, 2, 0
    calls = counter.calls.clone()
    selected.clear()
    rows, source = torch.tensor([0, 1, 2, 0, 1, 2]), torch.tensor([0, 0, 1, 1, 1, 1])
    tokens = torch.tensor([1, 2, 3, 4, 5, 6])
    log_probs, parts = counter.step_parts([first, second], tokens, rows, source, size=2)
    expected = torch.cat([lstm.step(select(first.inner, torch.tensor([0, 1])), tokens[:2])[0],
                          lstm.step(select(second.inner, torch.tensor([2, 0, 1, 2])),
                                    tokens[2:])[0]])
    torch.testing.assert_close(log_probs, expected)
    assert [len(p.owners) for p in parts] == [2, 2, 2]
    assert torch.cat([p.owners for p in parts]).tolist() == [0, 1, 0, 2, 2, 0]
    assert (counter.calls - calls).tolist() == [3, 1, 2]
    assert selected == [[2, 0], [1, 2]]  # the first chunk is `first` as it is
    _, unjoinable = counter.step_parts([first, second], tokens[1:4], torch.tensor([1, 0, 1]),
                                       torch.tensor([0, 1, 1]))
    assert [len(p.owners) for p in unjoinable] == ([3] if joinable else [1, 2])
    empty, none = counter.step_parts([first, second], tokens[:0], rows[:0], source[:0])
    assert empty.shape == (0, 7) and sum(len(p.owners) for p in none) == 0
    with pytest.raises(ValueError, match="row indices"):
        counter.step_parts([first, second], tokens, None, source)


def test_set_chunk_rows_overrides_and_respects_the_memory_cap(monkeypatch):
    monkeypatch.setattr(batching, "measure_chunk_rows", pytest.fail)
    model = tiny_lstm(vocab=7)
    set_chunk_rows(model, 300)
    assert chunk_rows(model) == 300
    set_chunk_rows(model, 300, max_elements=7 * 20)
    assert chunk_rows(model) == 20
    with pytest.raises(ValueError, match="at least one row"):
        set_chunk_rows(model, 0)


def test_map_row_chunks_covers_every_row_in_order():
    model = tiny_lstm()
    rows = torch.arange(1000)
    parts = map_row_chunks(model, rows, lambda r: r, size=300)
    assert [len(p) for p in parts] == [250, 250, 250, 250]  # ≤ 300 each, none left small
    assert torch.equal(torch.cat(parts), rows)


def test_map_row_chunks_on_few_rows_is_one_chunk_without_measuring(monkeypatch):
    monkeypatch.setattr(batching, "measure_chunk_rows", pytest.fail)
    parts = map_row_chunks(tiny_lstm(), torch.arange(10), lambda r: r.sum())
    assert [int(p) for p in parts] == [45]


def test_map_row_chunks_uses_the_models_chunk_size():
    model = tiny_lstm()
    set_chunk_rows(model, 1024)
    parts = map_row_chunks(model, torch.arange(2600), len)
    assert parts == [867, 867, 866]


@pytest.mark.parametrize("counts, size, expected", [
    ([3, 4, 2, 5], 7, [[0, 1], [2, 3]]),
    ([3, 4, 2, 5], 9, [[0, 1, 2], [3]]),
    ([10, 1, 1], 4, [[0], [1, 2]]),  # an oversize group is a chunk of its own
    ([1, 10, 1], 4, [[0], [1], [2]]),
    ([0, 0, 2], 1, [[0, 1, 2]]),
    ([], 4, []),
])
def test_group_chunks_packs_whole_groups(counts, size, expected):
    chunks = group_chunks(torch.tensor(counts, dtype=torch.long), size)
    assert [c.tolist() for c in chunks] == expected


def test_step_in_chunks_equals_one_step_row_for_row():
    model = tiny_lstm()
    _, root = model.initial_state([[1, 2], [3]])
    rows = 2500
    state = model.select(root, torch.arange(rows) % 2)
    tokens = torch.randint(7, (rows,), generator=torch.Generator().manual_seed(1))
    whole_lp, (whole_h, whole_c) = model.step(state, tokens)
    chunk_lp, (chunk_h, chunk_c) = step_in_chunks(model, state, tokens, size=1024)
    torch.testing.assert_close(chunk_lp, whole_lp)
    torch.testing.assert_close(chunk_h, whole_h)
    torch.testing.assert_close(chunk_c, whole_c)


def test_step_in_chunks_through_a_counter_charges_each_row_once():
    model = tiny_lstm()
    counter = CallCounter(model, num_tasks=2)
    _, root = counter.initial_state([[1], [2]])
    state = counter.select(root, torch.arange(2500) % 2)
    counter.calls.zero_()
    log_probs, _ = step_in_chunks(counter, state, torch.zeros(2500, dtype=torch.long), size=1024)
    assert log_probs.shape == (2500, 7)
    assert counter.calls.tolist() == [1250, 1250]


def test_step_in_chunks_without_concat_takes_one_step(monkeypatch):
    monkeypatch.setattr(batching, "measure_chunk_rows", pytest.fail)
    lstm = tiny_lstm()  # behind a wrapper that, like a user's model, has no `concat`
    model = SimpleNamespace(vocab_size=lstm.vocab_size, initial_state=lstm.initial_state,
                            step=lstm.step, select=lstm.select)
    _, root = model.initial_state([[1]])
    state = model.select(root, torch.zeros(2500, dtype=torch.long))
    tokens = torch.zeros(2500, dtype=torch.long)
    log_probs, _ = step_in_chunks(model, state, tokens)
    torch.testing.assert_close(log_probs, model.step(state, tokens)[0])

