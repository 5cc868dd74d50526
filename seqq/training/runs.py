"""One training run per kind of model, as `seqq train` runs it: train the paper's LSTM, fit an
HPYP n-gram baseline, or score a pretrained LM. Each writes what it made (checkpoint, metrics
and loss curve) and returns the numbers `seqq train` records in run_info.json; the command
only reads the config and records the run."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from seqq.data.base import SequenceDataset
from seqq.models.checkpoint import load_checkpoint
from seqq.models.hpyp import HPYPModel
from seqq.models.loading import load_model
from seqq.models.lstm import LSTMNet
from seqq.models.spec import ModelSpec
from seqq.training.artifacts import plot_curves, write_metrics
from seqq.training.scoring import held_out_windows, nats_per_symbol, score_lm
from seqq.training.trainer import Trainer, TrainerConfig

log = logging.getLogger(__name__)  # `seqq train`'s Hydra sends it to the console and train.log


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


def train_lstm(ds: SequenceDataset, lstm: LSTMSpec, trainer: TrainerConfig, *, window: int,
               stride: int, checkpoint: Path, run_dir: Path, seed: int) -> dict:
    """Train the LSTM on `ds`, keeping the best-validation checkpoint at `checkpoint` (and
    `<checkpoint>.last.pt` to resume after a crash); metrics.csv and loss_curve.png go to
    `run_dir`."""
    torch.manual_seed(seed)
    net = LSTMNet(ds.vocab_size, lstm.hidden_size, lstm.num_layers, lstm.dropout,
                  lstm.embedding_size)
    run = Trainer(ds, net, trainer, window=window, stride=stride, best_path=checkpoint,
                  last_path=checkpoint.with_suffix(".last.pt"), seed=seed, log=log.info)
    log.info(f"training LSTM on {ds.title}: V={ds.vocab_size}, {len(ds.train)} train / "
             f"{len(ds.valid)} valid sequences, {run.steps_per_epoch} steps per epoch, "
             f"device {run.device}")
    result = run.run()
    write_metrics(result.metrics, run_dir / "metrics.csv")
    plot_curves(result.metrics, run_dir / "loss_curve.png", f"LSTM on {ds.title}")
    log.info(f"best validation accuracy {result.best_val_accuracy:.4f} (epoch "
             f"{result.best_epoch:.2f}) vs unigram {result.unigram_accuracy:.4f}; checkpoint "
             f"{checkpoint}")
    return dict(
        checkpoint=str(checkpoint), best_val_accuracy=result.best_val_accuracy,
        best_epoch=result.best_epoch, unigram_val_accuracy=result.unigram_accuracy,
        unigram_val_loss=result.unigram_loss, train_seconds=round(result.seconds, 1),
        steps=result.steps, stopped_by=result.stopped_by, resumed_from_epoch=result.resumed_from,
        device=result.device, parameters=sum(p.numel() for p in net.parameters()))


def fit_hpyp(ds: SequenceDataset, hpyp: HPYPSpec, *, window: int, checkpoint: Path, seed: int,
             lstm_checkpoint: Path) -> dict:
    """Fit the HPYP on `ds`'s training split into `checkpoint` and score it on the test
    windows, beside the dataset's LSTM at `lstm_checkpoint` where there is one: the baseline
    an LSTM must beat."""
    start = time.perf_counter()
    model = HPYPModel.fit(ds.train, ds.vocab, order=hpyp.order, skip_first=ds.bos_id is not None,
                          discounts=list(hpyp.discounts), sweeps=hpyp.sweeps, seed=seed)
    seconds = time.perf_counter() - start
    model.info.update(dataset=ds.name, fit_seconds=round(seconds, 2))
    model.save(checkpoint)
    windows = held_out_windows(ds.test, window, ds.bos_id)
    nats, symbols = nats_per_symbol(model, windows)
    summary = dict(checkpoint=str(checkpoint), order=model.order, contexts=model.num_contexts,
                   discounts=[round(d, 4) for d in model.discounts.tolist()], sweeps=hpyp.sweeps,
                   fit_seconds=round(seconds, 2), test_symbols=symbols,
                   test_nats_per_symbol=nats)
    versus = ""
    if lstm_checkpoint.is_file():
        lstm, _ = load_checkpoint(lstm_checkpoint, "cpu", ds.vocab)
        summary["lstm_checkpoint"] = str(lstm_checkpoint)
        summary["lstm_test_nats_per_symbol"] = nats_per_symbol(lstm, windows)[0]
        versus = f" vs LSTM {summary['lstm_test_nats_per_symbol']:.4f} ({lstm_checkpoint})"
    log.info(f"HPYP order {model.order} on {ds.title}: {model.num_contexts} contexts, fitted in "
             f"{seconds:.1f} s; test log-likelihood {-nats:.4f} nats/symbol over {symbols} "
             f"symbols{versus}; checkpoint {checkpoint}")
    return summary


def score_pretrained(spec: ModelSpec, ds: SequenceDataset, window: int, limit: int) -> dict:
    """Load the pretrained LM `spec` names and score it on `limit` test blocks of `ds`."""
    scores = score_lm(load_model(spec), ds, window, limit)
    log.info(f"{spec.type} model on {ds.title}: next-token accuracy {scores['accuracy']:.4f}, "
             f"perplexity {scores['perplexity']:.2f} over {scores['tokens_scored']} tokens")
    return scores
