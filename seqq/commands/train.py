"""`seqq train dataset=<name> model=<lstm|hpyp|gpt2|smollm2>`: train the paper's LSTM, fit an
HPYP n-gram baseline, or load and score a pretrained LM, and record everything in the run folder.

LSTM runs write the best-validation checkpoint to `${checkpoint_dir}/${dataset.name}_lstm.pt`
(and `..._lstm.last.pt` to resume after a crash); the run folder gets metrics.csv,
loss_curve.png, config.yaml and run_info.json (seed, versions, git commit, the numbers).
HPYP runs write `${checkpoint_dir}/${dataset.name}_hpyp.pt` and report the test log-likelihood
beside the dataset's LSTM's, on the same windows: the baseline an LSTM must beat.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import to_absolute_path
from omegaconf import DictConfig, OmegaConf

from seqq.commands.plumbing import Help, hydra_job, run_hydra
from seqq.data import SequenceDataset
from seqq.errors import ConfigError, DataError
from seqq.models.checkpoint import load_checkpoint
from seqq.models.device import resolve_device
from seqq.models.hf import HFCausalLM
from seqq.models.hpyp import HPYPModel
from seqq.models.loading import load_model
from seqq.models.lstm import LSTMNet
from seqq.models.spec import ModelSpec
from seqq.paths import CONF
from seqq.sweeps import config_checks as check
from seqq.sweeps.provenance import write_provenance
from seqq.sweeps.specs import DatasetSpec, dataset_spec, model_spec
from seqq.training.artifacts import plot_curves, write_metrics
from seqq.training.scoring import held_out_windows, nats_per_symbol
from seqq.training.trainer import Trainer, TrainerConfig, eval_pairs

log = logging.getLogger(__name__)  # Hydra sends it to the console and the run's train.log
TRAINABLE = ("lstm", "hpyp")
PRETRAINED = ("hf", "smollm2")

HELP = Help(
    "train",
    "Train the paper's LSTM on a dataset (best checkpoint: <checkpoint_dir>/<dataset>_lstm.pt), "
    "fit an HPYP n-gram (model=hpyp: <checkpoint_dir>/<dataset>_hpyp.pt, in seconds), "
    "or score a pretrained LM on it.",
    groups=[("dataset", "the data"),
            ("model", "lstm to train; hpyp to fit (order, sweeps: seqq/conf/model/hpyp.yaml); "
                      "gpt2 or smollm2 to score"),
            ("trainer", "training schedule (ci: a few minutes)")],
    options=[
        ("device", "auto (cuda when available) | cpu | cuda | cuda:N"),
        ("checkpoint_dir", "where checkpoints go (default <data_root>/checkpoints)"),
        ("data_root", "raw data, caches, checkpoints (default $SEQQ_DATA, else ./data if "
                      "present, else ~/.local/share/seqq)"),
        ("seed", "seed of weights, windows and dropout"),
        ("model.hidden_size", "LSTM hidden units (App. F.2: 512, Shakespeare 128)"),
        ("model.num_layers", "LSTM layers"),
        ("model.dropout", "LSTM dropout"),
        ("model.embedding_size", "embedding width (null: hidden_size)"),
        ("model.checkpoint", "checkpoint path (null: <checkpoint_dir>/<dataset>_<model>.pt)"),
        ("trainer.max_epochs", "epochs"),
        ("trainer.max_minutes", "wall-clock limit; stops, evaluates and checkpoints (null: none)"),
        ("trainer.max_steps", "optimizer-step limit (null: none)"),
        ("trainer.steps_per_epoch", "cap on one epoch (null: every window once)"),
        ("trainer.batch_size", "windows per step"),
        ("trainer.lr", "Adam learning rate"),
        ("trainer.resume", "continue from <checkpoint>.last.pt when present"),
        ("trainer.progress", "progress bars"),
        ("dataset.window", "training window length"),
        ("dataset.options.*", "loader options, e.g. dataset.options.file=... (see seqq/conf/dataset/)"),
    ],
)


@dataclass(frozen=True)
class LSTMSpec:
    """The LSTM `seqq train model=lstm` builds (App. F.2)."""

    hidden_size: int
    num_layers: int
    dropout: float
    embedding_size: int | None


@dataclass(frozen=True)
class HPYPSpec:
    """The HPYP n-gram `seqq train model=hpyp` fits."""

    order: int
    discounts: tuple[float, ...]
    sweeps: int


@dataclass(frozen=True)
class TrainSpec:
    """One `seqq train` job, checked: everything `train` reads. `lstm` and `trainer` are set
    for model=lstm, `hpyp` for model=hpyp; pretrained LMs (hf, smollm2) only need `model`.
    `config` is the resolved config, recorded in the run folder and nowhere read again."""

    model: ModelSpec
    dataset: DatasetSpec
    seed: int
    checkpoint_dir: Path
    config: Mapping[str, Any]
    lstm: LSTMSpec | None = None
    hpyp: HPYPSpec | None = None
    trainer: TrainerConfig | None = None

    def checkpoint(self, dataset: str) -> Path:
        """Where the trained model goes: `model.checkpoint`, else
        `<checkpoint_dir>/<dataset>_<type>.pt`."""
        if self.model.checkpoint:
            return Path(to_absolute_path(self.model.checkpoint))
        return self.checkpoint_dir / f"{dataset}_{self.model.type}.pt"


def check_config(cfg: DictConfig) -> TrainSpec:
    """Every value `seqq train` reads, checked before any data or model is loaded, as a
    `TrainSpec`: the only place `seqq train` reads its config."""
    model = model_spec(cfg, TRAINABLE + PRETRAINED)
    resolve_device(check.value(cfg, "device"))
    seed = check.integer(cfg, "seed")
    lstm = hpyp = trainer = None
    if model.type == "hpyp":
        hpyp = HPYPSpec(order=check.integer(cfg, "model.order", minimum=2),
                        discounts=tuple(check.value(cfg, "model.discounts")),
                        sweeps=check.integer(cfg, "model.sweeps", minimum=0))
    if model.type == "lstm":
        for key in ("model.hidden_size", "model.num_layers", "dataset.window", "dataset.stride"):
            check.integer(cfg, key, minimum=1)
        lstm = LSTMSpec(hidden_size=check.value(cfg, "model.hidden_size"),
                        num_layers=check.value(cfg, "model.num_layers"),
                        embedding_size=check.integer(cfg, "model.embedding_size", minimum=1,
                                                     optional=True),
                        dropout=check.number(cfg, "model.dropout", above=-1e-12, at_most=0.99))
        unknown = set(cfg.trainer) - {f.name for f in dataclasses.fields(TrainerConfig)}
        if unknown:
            raise ConfigError(f"trainer.{sorted(unknown)[0]} is not a trainer setting; see "
                              "seqq train --help")
        for key in ("batch_size", "max_epochs", "checkpoint_every", "eval_windows"):
            check.integer(cfg, f"trainer.{key}", minimum=1)
        for key in ("max_steps", "steps_per_epoch", "num_threads"):
            check.integer(cfg, f"trainer.{key}", minimum=1, optional=True)
        check.number(cfg, "trainer.max_minutes", above=0, optional=True)
        check.number(cfg, "trainer.lr", above=0)
        resolve_device(check.value(cfg, "trainer.device"))
        trainer = TrainerConfig(**check.value(cfg, "trainer"))
    return TrainSpec(
        model=model, seed=seed, lstm=lstm, hpyp=hpyp, trainer=trainer,
        dataset=dataset_spec(cfg, root=to_absolute_path(check.value(cfg, "data_root"))),
        checkpoint_dir=Path(to_absolute_path(check.value(cfg, "checkpoint_dir"))),
        config=OmegaConf.to_container(cfg, resolve=True))


def train_lstm(spec: TrainSpec, ds: SequenceDataset, run_dir: Path) -> dict:
    torch.manual_seed(spec.seed)
    m = spec.lstm
    net = LSTMNet(ds.vocab_size, m.hidden_size, m.num_layers, m.dropout, m.embedding_size)
    best = spec.checkpoint(ds.name)
    trainer = Trainer(ds, net, spec.trainer, window=spec.dataset.window,
                      stride=spec.dataset.stride, best_path=best,
                      last_path=best.with_suffix(".last.pt"), seed=spec.seed, log=log.info)
    log.info(f"training LSTM on {ds.title}: V={ds.vocab_size}, {len(ds.train)} train / "
          f"{len(ds.valid)} valid sequences, {trainer.steps_per_epoch} steps per epoch, "
          f"device {trainer.device}")
    result = trainer.run()
    write_metrics(result.metrics, run_dir / "metrics.csv")
    plot_curves(result.metrics, run_dir / "loss_curve.png", f"LSTM on {ds.title}")
    summary = dict(
        checkpoint=str(best), best_val_accuracy=result.best_val_accuracy,
        best_epoch=result.best_epoch, unigram_val_accuracy=result.unigram_accuracy,
        unigram_val_loss=result.unigram_loss, train_seconds=round(result.seconds, 1),
        steps=result.steps, stopped_by=result.stopped_by, resumed_from_epoch=result.resumed_from,
        device=result.device, parameters=sum(p.numel() for p in net.parameters()))
    log.info(f"best validation accuracy {result.best_val_accuracy:.4f} (epoch {result.best_epoch:.2f})"
          f" vs unigram {result.unigram_accuracy:.4f}; checkpoint {best}")
    return summary


def fit_hpyp(spec: TrainSpec, ds: SequenceDataset) -> dict:
    m = spec.hpyp
    path = spec.checkpoint(ds.name)
    start = time.perf_counter()
    model = HPYPModel.fit(ds.train, ds.vocab, order=m.order, skip_first=ds.bos_id is not None,
                          discounts=list(m.discounts), sweeps=m.sweeps, seed=spec.seed)
    seconds = time.perf_counter() - start
    model.info.update(dataset=ds.name, fit_seconds=round(seconds, 2))
    model.save(path)
    windows = held_out_windows(ds.test, spec.dataset.window, ds.bos_id)
    nats, symbols = nats_per_symbol(model, windows)
    summary = dict(checkpoint=str(path), order=model.order, contexts=model.num_contexts,
                   discounts=[round(d, 4) for d in model.discounts.tolist()], sweeps=m.sweeps,
                   fit_seconds=round(seconds, 2), test_symbols=symbols,
                   test_nats_per_symbol=nats)
    lstm_path = spec.checkpoint_dir / f"{ds.name}_lstm.pt"
    versus = ""
    if lstm_path.is_file():
        lstm, _ = load_checkpoint(lstm_path, "cpu", ds.vocab)
        summary["lstm_checkpoint"] = str(lstm_path)
        summary["lstm_test_nats_per_symbol"] = nats_per_symbol(lstm, windows)[0]
        versus = f" vs LSTM {summary['lstm_test_nats_per_symbol']:.4f} ({lstm_path})"
    log.info(f"HPYP order {model.order} on {ds.title}: {model.num_contexts} contexts, fitted in "
             f"{seconds:.1f} s; test log-likelihood {-nats:.4f} nats/symbol over {symbols} "
             f"symbols{versus}; checkpoint {path}")
    return summary


@torch.inference_mode()
def score_lm(lm: HFCausalLM, ds: SequenceDataset, window: int, limit: int) -> dict:
    """Next-token accuracy and perplexity of a pretrained LM on `limit` test blocks of `window`
    tokens: a check that the right weights and tokenizer were loaded."""
    tokens = len(lm.tokenizer) if lm.tokenizer is not None else lm.vocab_size
    if ds.bos_id is not None or ds.vocab_size != tokens:
        raise DataError(f"{ds.name} ({ds.vocab_size} symbols) is not tokenised for this LM "
                        f"({tokens} tokens); use dataset=wikitext with the model's tokenizer, "
                        "e.g. dataset.options.tokenizer=smollm2")
    window = min(window, lm.context_length)
    blocks = [ds.test[i][s:s + window] for i, s in eval_pairs(ds.test, window - 1, limit)]
    nll, correct, count = 0.0, 0, 0
    for block in blocks:
        logits = lm.model(torch.tensor([block], device=lm.device)).logits[0, :-1].float()
        target = torch.tensor(block[1:], device=lm.device)
        nll += torch.nn.functional.cross_entropy(logits, target, reduction="sum").item()
        correct += int((logits.argmax(-1) == target).sum())
        count += len(target)
    return dict(test_blocks=len(blocks), tokens_scored=count, accuracy=correct / count,
                perplexity=math.exp(nll / count))


def check_lm(spec: TrainSpec, ds: SequenceDataset) -> dict:
    lm = load_model(spec.model)
    scores = score_lm(lm, ds, spec.dataset.window or 256, spec.dataset.eval_blocks or 20)
    log.info(f"{spec.model.type} model on {ds.title}: next-token accuracy {scores['accuracy']:.4f}, "
          f"perplexity {scores['perplexity']:.2f} over {scores['tokens_scored']} tokens")
    return scores


def train(spec: TrainSpec) -> dict:
    """Run one `seqq train` job; returns the summary also written to run_info.json."""
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    ds = spec.dataset.load()
    if spec.model.type == "lstm":
        summary = train_lstm(spec, ds, run_dir)
    elif spec.model.type == "hpyp":
        summary = fit_hpyp(spec, ds)
    else:
        summary = check_lm(spec, ds)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(spec.config))
    write_provenance(run_dir, spec.config, spec.seed,
                     name="run_info.json", command="seqq train",
                     dataset=dict(name=ds.name, synthetic=ds.synthetic, vocab_size=ds.vocab_size,
                                  description=ds.description, **ds.stats),
                     **summary)
    return summary


@hydra.main(config_path=str(CONF), config_name="train", version_base=None)
@hydra_job("train")
def _app(cfg: DictConfig) -> None:
    train(check_config(cfg))


def main(argv: list[str]) -> int:
    return run_hydra(_app, HELP, argv)
