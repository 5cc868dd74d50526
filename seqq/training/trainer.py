"""The LSTM training loop of App. F.2: Adam (lr 1e-3) with 1% linear warm-up then a constant
rate, gradient clipping, cross-entropy on random windows of the train split, a checkpoint every 2
epochs, and the checkpoint with the best validation accuracy kept.

A second, "last" checkpoint holds the optimizer and progress so a crashed run resumes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from seqq.data import SequenceDataset
from seqq.data.windows import IGNORE, batches, window_starts
from seqq.errors import CheckpointError, DataError
from seqq.models.checkpoint import net_from_payload, read_checkpoint, save_checkpoint
from seqq.models.device import resolve_device
from seqq.models.lstm import LSTMNet
from seqq.progress import progress_bar


@dataclass
class TrainerConfig:
    batch_size: int = 64
    lr: float = 1e-3
    warmup_fraction: float = 0.01
    grad_clip: float = 1.0
    max_epochs: int = 20
    max_minutes: float | None = None
    max_steps: int | None = None
    steps_per_epoch: int | None = None  # cap on one epoch; None = every window once
    checkpoint_every: int = 2
    eval_windows: int = 2000  # validation windows scored at each evaluation
    device: str = "auto"
    num_threads: int | None = 1  # CPU: these LSTMs are latency-bound; more threads contend
    resume: bool = True
    progress: bool = True


@dataclass
class TrainResult:
    metrics: list[dict]
    best_val_accuracy: float
    best_epoch: float
    unigram_accuracy: float
    unigram_loss: float
    seconds: float
    steps: int
    device: str
    stopped_by: str
    resumed_from: float | None = None


def eval_pairs(sequences: Sequence[Sequence[int]], window: int, limit: int) -> np.ndarray:
    """Non-overlapping windows of a held-out split; an evenly spaced subset beyond `limit`."""
    pairs = window_starts(sequences, window, window)
    if len(pairs) > limit:
        pairs = pairs[np.linspace(0, len(pairs) - 1, limit).round().astype(int)]
    return pairs


def unigram_baseline(ds: SequenceDataset, targets: torch.Tensor) -> tuple[float, float]:
    """Accuracy and cross-entropy of the train split's symbol frequencies (add-one smoothed):
    the bar a sequence model has to clear."""
    counts = torch.ones(ds.vocab_size, dtype=torch.float64)
    for seq in ds.train:
        counts += torch.bincount(torch.as_tensor(seq[1:], dtype=torch.long), minlength=ds.vocab_size)
    counts[ds.bos_id] = 0  # <BOS> is never a target
    logp = torch.log(counts / counts.sum())
    t = targets[targets != IGNORE]
    return (t == counts.argmax()).double().mean().item(), -logp[t].mean().item()


@torch.no_grad()
def evaluate(net: LSTMNet, sequences: Sequence[Sequence[int]], pairs: np.ndarray, window: int,
             bos: int, batch_size: int, device: torch.device) -> tuple[float, float]:
    """Mean next-symbol cross-entropy and accuracy over the given windows."""
    net.eval()
    loss_sum, correct, count = 0.0, 0, 0
    for x, y in batches(sequences, pairs, window, bos, batch_size * 4):
        x, y = x.to(device), y.to(device)
        logits, _ = net(x)
        mask = y != IGNORE
        loss_sum += nn.functional.cross_entropy(logits[mask], y[mask], reduction="sum").item()
        correct += (logits.argmax(-1)[mask] == y[mask]).sum().item()
        count += int(mask.sum())
    return loss_sum / max(count, 1), correct / max(count, 1)


class Trainer:
    """Trains one `LSTMNet` on one dataset; `run()` returns the metrics and best accuracy."""

    def __init__(self, ds: SequenceDataset, net: LSTMNet, cfg: TrainerConfig, *, window: int,
                 stride: int, best_path: Path, last_path: Path, seed: int = 0,
                 log: Callable[[str], None] = print):
        if ds.bos_id is None or not ds.train or not ds.valid:
            raise DataError(f"{ds.name}: LSTM training needs <BOS>-started sequences and "
                            "non-empty train and valid splits")
        self.ds, self.cfg, self.window, self.stride, self.seed, self.log = (
            ds, cfg, window, stride, seed, log)
        self.best_path, self.last_path = Path(best_path), Path(last_path)
        self.device = resolve_device(cfg.device)
        self.net = net.to(self.device)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=cfg.lr)
        self.valid_pairs = eval_pairs(ds.valid, window, cfg.eval_windows)
        n_windows = len(window_starts(ds.train, window, stride))
        self.steps_per_epoch = math.ceil(n_windows / cfg.batch_size)
        if cfg.steps_per_epoch:
            self.steps_per_epoch = min(self.steps_per_epoch, cfg.steps_per_epoch)
        planned = cfg.max_epochs * self.steps_per_epoch
        if cfg.max_steps:
            planned = min(planned, cfg.max_steps)
        self.warmup_steps = max(1, math.ceil(cfg.warmup_fraction * planned))
        self.epoch, self.step, self.best_acc, self.best_epoch = 0, 0, -1.0, 0.0
        self.metrics: list[dict] = []

    # --- resume ------------------------------------------------------------------------------
    def try_resume(self) -> float | None:
        """Continue from the last checkpoint of an interrupted run with the same setup."""
        if not (self.cfg.resume and self.last_path.exists()):
            return None
        payload = read_checkpoint(self.last_path)
        if payload["model_config"] != self.net.config or payload["vocab"] != self.ds.vocab:
            raise CheckpointError(
                f"{self.last_path} is from a different model or dataset; delete it or pass "
                "trainer.resume=false")
        self.net.load_state_dict(net_from_payload(payload, self.last_path).state_dict())
        self.opt.load_state_dict(payload["optimizer"])
        self.epoch, self.step = payload["epoch"], payload["step"]
        self.best_acc, self.best_epoch = payload["best_val_accuracy"], payload["best_epoch"]
        self.metrics = list(payload["metrics"])
        return float(self.epoch)

    # --- loop --------------------------------------------------------------------------------
    def _lr(self) -> float:
        return self.cfg.lr * min(1.0, (self.step + 1) / self.warmup_steps)

    def _limit_hit(self, deadline: float) -> bool:
        return time.monotonic() > deadline or bool(
            self.cfg.max_steps and self.step >= self.cfg.max_steps)

    def _train_epoch(self, deadline: float) -> tuple[float, float, int, bool]:
        """One epoch of shuffled random-phase windows; returns loss, accuracy, steps done and
        whether the epoch finished (False: cut short by the time/step limit)."""
        cfg, ds = self.cfg, self.ds
        rng = np.random.default_rng([self.seed, self.epoch])
        torch.manual_seed(self.seed * 100_003 + self.epoch)  # dropout masks, reproducible on resume
        pairs = window_starts(ds.train, self.window, self.stride, rng)
        pairs = rng.permutation(pairs)[: self.steps_per_epoch * cfg.batch_size]
        self.net.train()
        loss_sum, correct, count, done = 0.0, 0, 0, 0
        with progress_bar(batches(ds.train, pairs, self.window, ds.bos_id, cfg.batch_size),
                          total=self.steps_per_epoch,
                          desc=f"epoch {self.epoch + 1}/{cfg.max_epochs}",
                          disable=not cfg.progress, leave=False, dynamic_ncols=True) as bar:
            for x, y in bar:
                if self._limit_hit(deadline):
                    return loss_sum / max(count, 1), correct / max(count, 1), done, False
                x, y = x.to(self.device), y.to(self.device)
                for group in self.opt.param_groups:
                    group["lr"] = self._lr()
                logits, _ = self.net(x)
                mask = y != IGNORE
                loss = nn.functional.cross_entropy(logits[mask], y[mask])
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.net.parameters(), cfg.grad_clip)
                self.opt.step()
                n = int(mask.sum())
                loss_sum += loss.item() * n
                correct += (logits.detach().argmax(-1)[mask] == y[mask]).sum().item()
                count, done, self.step = count + n, done + 1, self.step + 1
                bar.set_postfix(loss=f"{loss_sum / count:.3f}", acc=f"{correct / count:.3f}")
        return loss_sum / max(count, 1), correct / max(count, 1), done, True

    def run(self) -> TrainResult:
        cfg, ds = self.cfg, self.ds
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        start = time.monotonic()
        deadline = start + cfg.max_minutes * 60 if cfg.max_minutes else math.inf
        resumed = self.try_resume()
        if resumed is not None:
            self.log(f"resuming from {self.last_path} after {resumed:g} epochs, step {self.step}")
        y_valid = torch.cat([y for _, y in batches(ds.valid, self.valid_pairs, self.window,
                                                   ds.bos_id, 4096)])
        uni_acc, uni_loss = unigram_baseline(ds, y_valid)
        stopped_by = "max_epochs"
        while self.epoch < cfg.max_epochs:
            train_loss, train_acc, done, finished = self._train_epoch(deadline)
            epoch_pos = self.epoch + (1.0 if finished else done / self.steps_per_epoch)
            self.epoch += int(finished)
            stopped = self._limit_hit(deadline)
            if stopped:
                stopped_by = "max_minutes" if time.monotonic() > deadline else "max_steps"
            val_loss, val_acc = evaluate(self.net, ds.valid, self.valid_pairs, self.window,
                                         ds.bos_id, cfg.batch_size, self.device)
            at_checkpoint = (stopped or self.epoch % cfg.checkpoint_every == 0
                             or self.epoch >= cfg.max_epochs)
            improved = at_checkpoint and val_acc > self.best_acc
            if improved:
                self.best_acc, self.best_epoch = val_acc, epoch_pos
                save_checkpoint(self.best_path, self.net, ds.vocab, dataset=ds.name,
                                epoch=epoch_pos, val_accuracy=val_acc, unigram_accuracy=uni_acc)
            self.metrics.append(dict(
                epoch=round(epoch_pos, 4), step=self.step, train_loss=train_loss,
                train_accuracy=train_acc, val_loss=val_loss, val_accuracy=val_acc,
                unigram_accuracy=uni_acc, lr=self._lr(),
                minutes=(time.monotonic() - start) / 60, checkpoint=at_checkpoint, best=improved))
            self.log(f"epoch {epoch_pos:.2f}: train loss {train_loss:.4f} acc {train_acc:.4f} | "
                     f"val loss {val_loss:.4f} acc {val_acc:.4f} (unigram {uni_acc:.4f})")
            if at_checkpoint:
                save_checkpoint(self.last_path, self.net, ds.vocab, optimizer=self.opt.state_dict(),
                                epoch=self.epoch, step=self.step, best_val_accuracy=self.best_acc,
                                best_epoch=self.best_epoch, metrics=self.metrics)
            if stopped:
                break
        return TrainResult(
            metrics=self.metrics, best_val_accuracy=self.best_acc, best_epoch=self.best_epoch,
            unigram_accuracy=uni_acc, unigram_loss=uni_loss, seconds=time.monotonic() - start,
            steps=self.step, device=str(self.device), stopped_by=stopped_by,
            resumed_from=resumed)
