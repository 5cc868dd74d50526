"""`seqq train dataset=<name> model=<lstm|hpyp|gpt2|smollm2>`: train the paper's LSTM, fit an
HPYP n-gram baseline, or load and score a pretrained LM, and record everything in the run folder.

LSTM runs write the best-validation checkpoint to `${checkpoint_dir}/${dataset.name}_lstm.pt`
(and `..._lstm.last.pt` to resume after a crash); the run folder gets metrics.csv,
loss_curve.png, config.yaml and run_info.json (seed, versions, git commit, the numbers).
HPYP runs write `${checkpoint_dir}/${dataset.name}_hpyp.pt` and report the test log-likelihood
beside the dataset's LSTM's, on the same windows: the baseline an LSTM must beat. This module
reads and checks the config (`TrainSpec`) and records the run; the runs themselves are in
`seqq.training.runs`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import to_absolute_path
from omegaconf import DictConfig, OmegaConf

from seqq.commands.plumbing import Help, hydra_job, run_hydra
from seqq.errors import ConfigError
from seqq.models.device import resolve_device
from seqq.models.spec import ModelSpec
from seqq.paths import CONF
from seqq.sweeps import config_checks as check
from seqq.sweeps.provenance import write_provenance
from seqq.sweeps.specs import DatasetSpec, dataset_spec, model_spec
from seqq.training.runs import HPYPSpec, LSTMSpec, fit_hpyp, score_pretrained, train_lstm
from seqq.training.trainer import TrainerConfig

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


def train(spec: TrainSpec) -> dict:
    """Run one `seqq train` job; returns the summary also written to run_info.json."""
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    ds = spec.dataset.load()
    checkpoint = spec.checkpoint(ds.name)
    if spec.model.type == "lstm":
        summary = train_lstm(ds, spec.lstm, spec.trainer, window=spec.dataset.window,
                             stride=spec.dataset.stride, checkpoint=checkpoint, run_dir=run_dir,
                             seed=spec.seed)
    elif spec.model.type == "hpyp":
        summary = fit_hpyp(ds, spec.hpyp, window=spec.dataset.window, checkpoint=checkpoint,
                           seed=spec.seed,
                           lstm_checkpoint=spec.checkpoint_dir / f"{ds.name}_lstm.pt")
    else:
        summary = score_pretrained(spec.model, ds, spec.dataset.window or 256,
                                   spec.dataset.eval_blocks or 20)
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
