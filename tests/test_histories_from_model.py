"""`sweep.histories_from=model`: histories drawn from the model itself (datasets whose files are
absent), seeded, reproducible, and labelled as such in the results and reports."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import compose_sweep
from oracles import random_markov

from seqq.data import load_dataset
from seqq.errors import DataError
from seqq.models.hpyp import HPYPModel
from seqq.reports.tables import dataset_title, load_results
from seqq.sweeps import sweep
from seqq.sweeps.histories import model_histories, sampled_dataset


def test_sampled_histories_are_seeded_and_well_formed():
    model = random_markov(6, 1, seed=4)
    first = model_histories(model, 50, horizon=5, seed=3, bos=0, min_history=2, max_length=12)
    again = model_histories(model, 50, horizon=5, seed=3, bos=0, min_history=2, max_length=12)
    other = model_histories(model, 50, horizon=5, seed=4, bos=0, min_history=2, max_length=12)
    assert first == again and first != other
    for h in first:
        assert h.tokens[0] == 0 and 2 <= len(h.tokens) <= 12 and len(h.future) == 5
        assert h.position == len(h.tokens)
    trimmed = model_histories(model, 50, horizon=5, seed=3, bos=0, min_history=2, max_length=12,
                              max_history=4)
    for h, full in zip(trimmed, first, strict=True):
        assert h.future == full.future and h.tokens[0] == 0 and len(h.tokens) <= 4
        assert h.tokens[1:] == full.tokens[len(full.tokens) - len(h.tokens) + 1:]


def test_sampled_histories_follow_the_model():
    """The symbol after each history is a draw from p(· | history): its frequency among N rows
    matches the model within 4 standard errors."""
    model = random_markov(4, 1, seed=2)
    rows = model_histories(model, 4000, horizon=1, seed=0, bos=0, min_history=1, max_length=1)
    p = model.log_table[0].exp()  # all histories are [<BOS>] = [0]
    for v in range(4):
        share = sum(h.future[0] == v for h in rows) / len(rows)
        assert abs(share - p[v].item()) < 4 * math.sqrt(p[v] * (1 - p[v]) / len(rows)) + 1e-9


def test_without_bos_sampling_starts_from_the_empty_history():
    model = HPYPModel.fit([[1, 2, 1, 2, 3]], ["a", "b", "c", "d"], order=3, skip_first=False)
    rows = model_histories(model, 20, horizon=3, seed=0, bos=None, min_history=0, max_length=5)
    assert any(len(h.tokens) == 0 for h in rows) and all(len(h.future) == 3 for h in rows)


def test_a_dataset_without_files_needs_a_model_vocabulary():
    with pytest.raises(DataError, match="exposes no `vocab`"):
        sampled_dataset("moocs", SimpleNamespace(vocab_size=4))


@pytest.mark.slow
def test_sweep_on_a_model_of_a_dataset_without_files(tmp_path: Path):
    """dataset=moocs has no raw files here; an HPYP model of it supplies the vocabulary and the
    histories, and every row and title says so."""
    stand_in = load_dataset("synthetic_moocs", num_sequences=60)
    HPYPModel.fit(stand_in.train, stand_in.vocab, order=3).save(tmp_path / "moocs_hpyp.pt")
    overrides = [
        "dataset=moocs", "model=hpyp", f"checkpoint_dir={tmp_path}", f"data_root={tmp_path}",
        "sweep.histories_from=model", "sweep.histories=5", "sweep.ks=[3]", "sweep.chunk_size=5",
        "sweep.progress=false", "estimator=importance",
        "levels.S=[10]", f"sweep.root={tmp_path}", "sweep.name=sampled",
    ]
    results = sweep.run(compose_sweep(overrides)) / "results"
    table = load_results([str(results)])
    assert len(table) == 5 and table.dataset.eq("moocs").all() and not table.synthetic.any()
    assert table.histories.str.fullmatch(r"sampled from hpyp@[0-9a-f]{8}").all()
    assert dataset_title(table, "moocs").startswith("moocs (sampled from hpyp@")
    again = load_results([str(sweep.run(compose_sweep([*overrides, "sweep.name=again"]))
                              / "results")])
    assert list(again.history_hash) == list(table.history_hash)  # seeded: the same histories
    assert table.history_id.nunique() == 5
