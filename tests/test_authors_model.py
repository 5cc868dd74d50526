"""The paper authors' LSTMs shipped in seqq/resources/models/authors/ reproduce the reference behaviour
recorded with them (README there), through `model=authors` and the dataset mapped to their
vocabulary; every model seqq loads names its symbols in `vocab`."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import REPO, compose_sweep

import seqq
from seqq.data import BOS, load_dataset
from seqq.errors import DataError, ModelLoadError
from seqq.models import LSTMModel, MarkovModel, TemperatureModel
from seqq.models.authors import vocab_file
from seqq.models.loading import load_model
from seqq.paths import SHIPPED
from seqq.queries import a_before_b, hitting_time
from seqq.reports.tables import load_results, panels
from seqq.sweeps import sweep

DATA = REPO / "data"
AUTHORS = SHIPPED / "models" / "authors"  # installed with seqq
ROMEO = "ROMEO:\nBut soft, what light through yonder window"


@pytest.fixture(scope="module")
def shakespeare_model() -> LSTMModel:
    return load_model({"type": "authors", "dataset": "shakespeare", "root": str(AUTHORS),
                       "device": "cpu"})


@pytest.fixture(scope="module")
def shakespeare_data():
    return load_dataset("shakespeare", DATA, vocab=str(vocab_file("shakespeare", AUTHORS)))


def test_loads_from_the_project_root_by_dataset_name(monkeypatch):
    monkeypatch.chdir(REPO)
    model = load_model({"type": "authors", "dataset": "shakespeare"})
    assert model.vocab_size == len(model.vocab) == 68
    assert (model.vocab.index("\n"), model.vocab.index(" "), model.vocab.index(BOS)) == (0, 1, 12)
    assert model.vocab == sorted(set((SHIPPED / "shakespeare" / "tinyshakespeare_input.txt")
                                     .read_text(encoding="utf-8")) | {"[", "]", BOS})


def test_exact_reference_values_for_the_romeo_history(shakespeare_model):
    vocab = shakespeare_model.vocab
    history = [vocab.index(BOS), *(vocab.index(c) for c in ROMEO)]
    hits = [seqq.exact(shakespeare_model, history, hitting_time(" ", K, vocab)) for K in (1, 2, 3)]
    assert hits == pytest.approx([0.151219, 0.171390, 0.077341], abs=2e-6)
    before = seqq.exact(shakespeare_model, history, a_before_b(" ", "\n", 3, vocab))
    assert before == pytest.approx(0.399046, abs=2e-6)


@pytest.mark.slow
def test_next_character_accuracy_on_tiny_shakespeare_windows(shakespeare_model, shakespeare_data):
    """README: 200 random 100-character windows, <BOS> first: cross-entropy 1.367, accuracy
    0.582 (other random windows vary by about ±0.015 and ±0.01; a wrong vocabulary order, gate
    order or missing <BOS> costs far more)."""
    ds = shakespeare_data
    ids = torch.tensor([s for seq in ds.train + ds.valid + ds.test for s in seq[1:]])
    starts = np.random.default_rng(0).integers(0, len(ids) - 100, 200)
    targets = torch.stack([ids[s:s + 100] for s in starts])
    inputs = torch.cat([torch.full((200, 1), ds.bos_id), targets[:, :-1]], 1)
    with torch.no_grad():
        logits, _ = shakespeare_model.net(inputs)
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 68), targets.reshape(-1)).item()
    accuracy = (logits.argmax(-1) == targets).float().mean().item()
    assert ce == pytest.approx(1.367, abs=0.05)
    assert accuracy == pytest.approx(0.582, abs=0.02)


def test_dataset_follows_the_models_vocabulary(shakespeare_model, shakespeare_data):
    ds = shakespeare_data
    assert ds.vocab == shakespeare_model.vocab and ds.bos_id == 12
    assert all(seq[0] == 12 for seq in ds.train + ds.valid + ds.test)
    text = (SHIPPED / "shakespeare" / "tinyshakespeare_input.txt").read_text(encoding="utf-8")
    assert "".join(ds.vocab[s] for s in ds.train[0][1:]) in text
    own = load_dataset("shakespeare", DATA)  # seqq's own vocabulary: <BOS> first
    assert own.bos_id == 0 and len(own.vocab) == 66


def test_vocabulary_mismatch_is_a_one_line_error():
    own = load_dataset("shakespeare", DATA)
    with pytest.raises(ModelLoadError, match="dataset.options.vocab=") as err:
        load_model({"type": "authors", "root": str(AUTHORS)}, dataset="shakespeare",
                   vocab=own.vocab)
    assert "\n" not in str(err.value)
    with pytest.raises(ModelLoadError, match="no model for dataset 'synthetic_moocs'"):
        load_model({"type": "authors", "root": str(AUTHORS)}, dataset="synthetic_moocs")
    with pytest.raises(DataError, match="not in the vocabulary"):
        load_dataset("shakespeare", DATA, vocab=str(vocab_file("moocs", AUTHORS)))


def test_moocs_model_loads_with_its_vocabulary():
    model = load_model({"type": "authors", "dataset": "moocs", "root": str(AUTHORS),
                        "device": "cpu"})
    assert model.vocab_size == len(model.vocab) == 98 and model.vocab.index(BOS) == 97
    assert model.vocab[:97] == [str(i) for i in range(97)]
    log_probs, state = model.initial_state([[97, 3, 5]])
    log_probs, _ = model.step(state, log_probs.argmax(-1))
    assert torch.allclose(log_probs.exp().sum(-1), torch.ones(1), atol=1e-5)


def test_every_model_names_its_symbols(shakespeare_model):
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from seqq.models.hf import HFCausalLM

    markov = MarkovModel.random(5)
    assert markov.vocab == ["0", "1", "2", "3", "4"]
    assert TemperatureModel(shakespeare_model, 2.0).vocab == shakespeare_model.vocab
    config = GPT2Config(n_layer=1, n_embd=8, n_head=1, n_positions=8, vocab_size=50260)
    tokenizer = AutoTokenizer.from_pretrained(str(SHIPPED / "gpt2_tokenizer"))
    lm = HFCausalLM(GPT2LMHeadModel(config), tokenizer, device="cpu")
    assert len(lm.vocab) == 50260 and lm.vocab[50256] == "<|endoftext|>"
    assert lm.vocab[15496] == "Hello" and lm.vocab[tokenizer.encode(" the")[0]] == "Ġthe"
    assert lm.vocab[50259] == "50259"  # an embedding row the tokenizer does not name


@pytest.mark.slow
def test_sweep_on_the_authors_model_is_its_own_panel(tmp_path):
    """`dataset=shakespeare model=authors`: the dataset takes the model's ids, ground truth and
    estimates run end to end (3 histories, K = 3, exact truth); beside another model's sweep on
    Shakespeare in the same folder (as `make fig3` runs them) each model gets its own panel."""
    common = ["dataset=shakespeare", f"data_root={DATA}", f"sweep.root={tmp_path}",
              "sweep.name=fig3", "sweep.histories=3", "sweep.ks=[3]", "sweep.progress=false",
              "levels.S=[10]", "estimator.methods=[hybrid,importance]"]
    cfg = compose_sweep([*common, "model=authors", "model.device=cpu"])
    assert cfg.dataset.options.vocab == f"{AUTHORS}/shakespeare_vocab.json"
    folder = sweep.run(cfg)
    results = load_results([str(folder / "results")])
    assert set(results.model) == {"authors_lstm"} and (results.truth_kind == "exact").all()
    assert len(results) == 6 and results.rae.notna().all() and set(results.dataset) == {
        "shakespeare"}
    sweep.run(compose_sweep([*common, "model.type=markov", "+model.name=markov"]))
    both = load_results([str(folder / "results")], ["shakespeare"])
    assert {p.title for p in panels(both).values()} == {"shakespeare · authors_lstm",
                                                         "shakespeare · markov"}
