"""Typed, frozen specs: where a command's Hydra config stops.

`seqq query-sweep` and `seqq train` read their `DictConfig` once, at the entry point
(`sweep_config.sweep_spec`, `train.check_config`): every value is checked there (a one-line
`ConfigError` naming the key) and lands in one of these dataclasses. Everything below the entry
points (data loaders, models, estimators, ground truth) receives plain typed values, so no layer
re-reads or re-checks the config, and none of them imports OmegaConf.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from seqq.data import SequenceDataset, load_dataset
from seqq.errors import ConfigError
from seqq.models.device import resolve_device
from seqq.models.spec import ModelSpec
from seqq.paths import data_root, shipped
from seqq.results.jobs import QUERIES, SENTENCE_END, SYMBOL_KL, JobKind
from seqq.sweeps import config_checks as check
from seqq.sweeps.method_runs import MethodRun
from seqq.sweeps.query_specs import QueriesSpec
from seqq.sweeps.sentence_end import SentenceEndSpec
from seqq.sweeps.symbol_kl import SymbolKLSpec

# `${seqq_data_root:}` (the default `data_root`: $SEQQ_DATA, ./data, or the user data dir) and
# `${seqq_shipped:<path>}` (a file installed with seqq): the configs name paths that depend on
# where seqq runs and where it is installed, resolved when a command composes its config.
OmegaConf.register_new_resolver("seqq_data_root", lambda: str(data_root()), replace=True)
OmegaConf.register_new_resolver("seqq_shipped", lambda path: str(shipped(path)), replace=True)


@dataclass(frozen=True)
class DatasetSpec:
    """The `dataset` group: a registered dataset's name, its loader's options and the data root
    its raw files are found under; `window`/`stride`/`eval_blocks` are what training reads."""

    name: str
    options: Mapping[str, Any]
    root: Path
    window: int | None = None
    stride: int | None = None
    eval_blocks: int | None = None

    def load(self, name: str | None = None) -> SequenceDataset:
        """The dataset (or another one, e.g. its synthetic stand-in, with the same root)."""
        if name is not None and name != self.name:
            return load_dataset(name)
        return load_dataset(self.name, self.root, **self.options)


@dataclass(frozen=True)
class GroundTruthSpec:
    """The `ground_truth` group: `options` are `seqq.ground_truth_many`'s keyword settings
    exactly as configured (they key the ground-truth cache, so they are kept as given);
    `enabled` is `sweep.ground_truth` (false: estimates only)."""

    options: Mapping[str, Any]
    enabled: bool = True


@dataclass(frozen=True)
class MixtureSpec:
    """`sweep.mixture`: synthetic histories with a varying share of `focus` symbols (Fig. 15);
    symbols are ids or tokens, checked against the vocabulary once the data is loaded."""

    focus: tuple[Any, ...]
    exclude: tuple[Any, ...]
    shares: tuple[float, ...]
    per_share: int
    length: int


@dataclass(frozen=True)
class HistorySpec:
    """Where a sweep's histories come from (`sweep.histories_from`: test, mixture or model) and
    how many, how long, and how many observed symbols each needs after it (`future`)."""

    source: str
    count: int | None
    future: int
    min_history: int
    max_history: int | None
    sampled_length: int | None
    mixture: MixtureSpec | None = None


@dataclass(frozen=True)
class SweepSpec:
    """One `seqq query-sweep` job, checked: everything `sweep.run` reads, and whether the
    command reports the results when done.

    `config` is the resolved config as a plain mapping, recorded in the run folder's
    provenance and nowhere read again.
    """

    size: str
    dataset: DatasetSpec
    model: ModelSpec
    checkpoint_dir: Path
    query: QueriesSpec
    runs: tuple[MethodRun, ...]
    levels: tuple[int, ...]
    ground_truth: GroundTruthSpec
    horizons: tuple[int, ...]
    histories: HistorySpec
    temperatures: tuple[float, ...]
    seed: int
    chunk_size: int
    repeats: int
    shard: int
    shards: int
    dir: Path
    progress: bool
    report: bool
    config: Mapping[str, Any]
    refine_truth: float | None = None  # estimated truths' rel. SE ≤ this × smallest median RAE
    symbol_kl: SymbolKLSpec | None = None  # Tables 3–6: the KL experiment instead of queries
    sentence_end: SentenceEndSpec | None = None  # Fig. 1: when the sentence ends, instead

    @property
    def job(self) -> JobKind:
        """What this sweep runs: queries, or the job whose spec is set."""
        return (SENTENCE_END if self.sentence_end is not None else
                SYMBOL_KL if self.symbol_kl is not None else QUERIES)


def model_spec(cfg: DictConfig, types: Sequence[str]) -> ModelSpec:
    """The `model` group as a `ModelSpec`: its type one of `types` and its device valid."""
    check.choice(cfg, "model.type", types)
    node = check.value(cfg, "model")
    resolve_device(node.get("device"))
    return ModelSpec.of(node)


def dataset_spec(cfg: DictConfig, root: str | Path | None = None) -> DatasetSpec:
    """The `dataset` group as a `DatasetSpec`, its raw files under `root` (default: the
    config's `data_root`)."""
    node = check.value(cfg, "dataset")
    options = node.get("options") or {}
    if not isinstance(options, dict):
        raise ConfigError(f"dataset.options must map loader options to values, got "
                                f"{options!r}")
    return DatasetSpec(name=check.value(cfg, "dataset.name"), options=options,
                       root=Path(check.value(cfg, "data_root") if root is None else root),
                       window=node.get("window"), stride=node.get("stride"),
                       eval_blocks=node.get("eval_blocks"))
