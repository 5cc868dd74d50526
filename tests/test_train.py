"""The LSTM trainer, its checkpoints, and the `seqq train` command."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import compose_train

from seqq.data import load_dataset
from seqq.errors import CheckpointError
from seqq.models.checkpoint import load_checkpoint, save_checkpoint
from seqq.models.loading import load_model
from seqq.models.lstm import LSTMModel, LSTMNet
from seqq.paths import CONF
from seqq.training.trainer import Trainer, TrainerConfig

REPO = Path(__file__).resolve().parents[1]


def tiny_setup(tmp_path: Path, **overrides):
    ds = load_dataset("synthetic_reviews", num_sequences=60, max_length=30)
    torch.manual_seed(0)
    net = LSTMNet(ds.vocab_size, hidden_size=16, num_layers=2, dropout=0.3)
    cfg = TrainerConfig(**{**dict(batch_size=16, max_epochs=3, checkpoint_every=2,
                                  eval_windows=50, progress=False), **overrides})
    trainer = Trainer(ds, net, cfg, window=15, stride=1, best_path=tmp_path / "m.pt",
                      last_path=tmp_path / "m.last.pt", log=lambda _: None)
    return ds, trainer


def test_trainer_checkpoints_best_and_metrics(tmp_path):
    ds, trainer = tiny_setup(tmp_path, steps_per_epoch=5)
    result = trainer.run()
    assert result.steps == 15 and result.stopped_by == "max_epochs"
    assert [m["epoch"] for m in result.metrics] == [1, 2, 3]
    assert [m["checkpoint"] for m in result.metrics] == [False, True, True]  # every 2 + last
    assert result.best_epoch in (2, 3) and 0 < result.unigram_accuracy < 1
    model, vocab = load_checkpoint(tmp_path / "m.pt")
    assert isinstance(model, LSTMModel) and vocab == ds.vocab
    payload = torch.load(tmp_path / "m.pt", weights_only=True)
    assert payload["val_accuracy"] == result.best_val_accuracy


def test_limits_stop_early_and_resume_continues(tmp_path):
    _, trainer = tiny_setup(tmp_path, max_steps=4, steps_per_epoch=5)
    first = trainer.run()
    assert first.stopped_by == "max_steps" and first.steps == 4
    assert first.metrics[-1]["epoch"] == pytest.approx(0.8)
    _, again = tiny_setup(tmp_path, steps_per_epoch=5, max_epochs=2)
    resumed = again.run()
    assert resumed.resumed_from == 0 and resumed.steps == 4 + 10  # redoes the cut epoch
    assert len(resumed.metrics) == 3  # the first run's row is kept
    _, fresh = tiny_setup(tmp_path, steps_per_epoch=5, max_epochs=1, resume=False)
    assert fresh.run().resumed_from is None


def test_resume_refuses_a_different_model(tmp_path):
    _, trainer = tiny_setup(tmp_path, max_steps=2)
    trainer.run()
    ds = load_dataset("synthetic_reviews", num_sequences=60, max_length=30)
    other = Trainer(ds, LSTMNet(ds.vocab_size, 8, 1, 0.0), TrainerConfig(progress=False),
                    window=15, stride=1, best_path=tmp_path / "m.pt",
                    last_path=tmp_path / "m.last.pt")
    with pytest.raises(CheckpointError, match="resume=false"):
        other.run()


def test_checkpoint_errors(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"\x00not a checkpoint")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(tmp_path / "junk.pt")
    net = LSTMNet(5, 8, 1, 0.0)
    save_checkpoint(tmp_path / "ok.pt", net, ["<BOS>", "a", "b", "c", "d"])
    data = (tmp_path / "ok.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(tmp_path / "cut.pt")
    with pytest.raises(CheckpointError, match="different vocabulary"):
        load_checkpoint(tmp_path / "ok.pt", vocab=["<BOS>", "a", "b", "c", "e"])
    save_checkpoint(tmp_path / "short_vocab.pt", net, ["<BOS>", "a"])
    with pytest.raises(CheckpointError, match="does not match"):
        load_checkpoint(tmp_path / "short_vocab.pt")
    payload = torch.load(tmp_path / "ok.pt", weights_only=True)
    payload["model_config"]["hidden_size"] = 16
    torch.save(payload, tmp_path / "mismatch.pt")
    with pytest.raises(CheckpointError, match="do not match the saved architecture"):
        load_checkpoint(tmp_path / "mismatch.pt")
    torch.save({"weights": 1}, tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="not a seqq LSTM checkpoint"):
        load_checkpoint(tmp_path / "foreign.pt")


def test_load_model_finds_the_default_checkpoint(tmp_path):
    save_checkpoint(tmp_path / "shakespeare_lstm.pt", LSTMNet(4, 8, 1, 0.0), list("<ab>"))
    model = load_model({"type": "lstm", "device": "cpu"}, dataset="shakespeare",
                       checkpoint_dir=tmp_path)
    assert model.vocab_size == 4


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "seqq.commands.cli", "train", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_seqq_train_end_to_end(tmp_path):
    proc = run_cli("dataset=synthetic_reviews", "model.hidden_size=16", "trainer=ci",
                   "trainer.max_steps=6", "trainer.steps_per_epoch=3", "trainer.eval_windows=50",
                   "+dataset.options.num_sequences=60", f"data_root={REPO / 'data'}",
                   f"checkpoint_dir={tmp_path / 'ck'}", f"hydra.run.dir={tmp_path / 'run'}",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = tmp_path / "run"
    for name in ("metrics.csv", "loss_curve.png", "config.yaml", "run_info.json"):
        assert (run / name).is_file(), name
    rows = list(csv.DictReader((run / "metrics.csv").read_text().splitlines()))
    assert len(rows) == 2 and {"train_loss", "val_accuracy", "unigram_accuracy"} <= set(rows[0])
    info = json.loads((run / "run_info.json").read_text())
    assert info["dataset"]["synthetic"] and info["seed"] == 0 and info["git_commit"]
    assert "torch" in info["versions"]
    model, vocab = load_checkpoint(tmp_path / "ck" / "synthetic_reviews_lstm.pt")
    assert len(vocab) == 29 and model.vocab_size == 29


def test_missing_raw_file_exits_2_with_one_line(tmp_path):
    proc = run_cli("dataset=moocs", f"data_root={tmp_path}", f"hydra.run.dir={tmp_path / 'run'}",
                   cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "mooc_actions.tsv" in lines[0] and "snap.stanford.edu" in lines[0]


@pytest.mark.parametrize("dataset", sorted(p.stem for p in (CONF / "dataset").glob("*.yaml")))
def test_every_dataset_config_composes(dataset):
    """Each conf/dataset/*.yaml names a registered dataset with options its loader accepts."""
    import inspect

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from seqq.data import DATASETS

    with initialize_config_dir(str(CONF), version_base=None):
        cfg = compose("train", [f"dataset={dataset}"])
    assert cfg.dataset.name in DATASETS
    options = OmegaConf.to_container(cfg.dataset.options, resolve=True)
    inspect.signature(DATASETS[cfg.dataset.name]).bind(REPO / "data", **options)
    assert cfg.model.hidden_size == (128 if "shakespeare" in dataset else 512)
    assert cfg.dataset.window in (15, 100, 256)


@pytest.mark.parametrize("model, tokenizer", [("gpt2", "gpt2"), ("smollm2", "smollm2"),
                                              ("lstm", "gpt2")])
def test_wikitext_is_tokenised_for_the_chosen_model(model, tokenizer):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(CONF), version_base=None):
        cfg = compose("train", ["dataset=wikitext", f"model={model}"])
    assert cfg.dataset.options.tokenizer == tokenizer


@pytest.mark.parametrize("override, said", [
    ("model.type=markov", "model.type must be one of lstm, hpyp, hf, smollm2"),
    ("trainer.max_epochs=ten", "trainer.max_epochs must be a whole number >= 1"),
    ("trainer.max_minutes=-1", "trainer.max_minutes must be a number > 0 or null"),
    ("+trainer.speed=2", "trainer.speed is not a trainer setting"),
    ("model.dropout=1.5", "model.dropout must be a number"),
    ("device=gpu", "is not a torch device"),
])
def test_train_config_is_checked_before_loading(override, said):
    from seqq.commands.train import check_config
    from seqq.errors import SeqqError

    check_config(compose_train())
    with pytest.raises(SeqqError, match=re.escape(said)):
        check_config(compose_train(override))


def test_resolve_device():
    from seqq.errors import ConfigError
    from seqq.models.device import resolve_device

    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device(None) == resolve_device("auto")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ConfigError, match="not a torch device"):
        resolve_device("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="sees no CUDA GPU"):
            resolve_device("cuda")


def test_load_model_is_one_factory_for_every_model_type(tmp_path):
    from seqq.errors import ModelLoadError
    from seqq.models import MarkovModel
    from seqq.models.loading import LOADERS

    assert set(LOADERS) >= {"lstm", "hf", "smollm2", "markov"}
    markov = load_model({"type": "markov", "order": 2, "seed": 3}, vocab=list("abcd"))
    assert isinstance(markov, MarkovModel) and markov.vocab_size == 4 and markov.order == 2
    same = MarkovModel.random(4, 2, 0.5, 3)
    assert torch.equal(markov.log_table, same.log_table)
    with pytest.raises(ModelLoadError, match="unknown model type 'rnn'; use one of lstm"):
        load_model({"type": "rnn"})
    with pytest.raises(CheckpointError, match="not found"):
        load_model({"type": "lstm"}, dataset="nothing", checkpoint_dir=tmp_path)
