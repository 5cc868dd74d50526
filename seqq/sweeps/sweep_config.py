"""What a sweep's config may hold: every setting checked and typed once (`sweep_spec` → a
`SweepSpec`) before any data or model is loaded. Nothing past `sweep_spec` reads the config,
except the command (`seqq/commands/query_sweep.py`, whose `--help` lists these settings), which
checks `sweep.figures` against the report's figures: this layer knows no report."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

import seqq
from seqq.errors import ConfigError
from seqq.estimators.ground_truth import RULES
from seqq.models.device import resolve_device
from seqq.models.loading import LOADERS
from seqq.sweeps import config_checks as check
from seqq.sweeps.method_runs import method_runs
from seqq.sweeps.query_specs import KINDS, QueriesSpec, check_template
from seqq.sweeps.sentence_end import SentenceEndSpec
from seqq.sweeps.specs import (
    GroundTruthSpec,
    HistorySpec,
    MixtureSpec,
    SweepSpec,
    dataset_spec,
    model_spec,
)
from seqq.sweeps.symbol_kl import SymbolKLSpec

SIZES = ("quick", "paper")

# Config names that once meant something else (issue 60), and what they are now: "experiment"
# names one of the paper's (`seqq report --experiment fig10`), "budget" a method's model calls
RENAMED = {
    "experiment": ("preset", "a named sweep of conf/preset/; an experiment is one of the "
                   "paper's, `seqq report --experiment`"),
    "budget": ("levels", "a grid of levels S of conf/levels/; a budget is a method's calls"),
    "budget.levels": ("levels.S", "the levels S; a budget is a method's calls"),
}


def check_renamed(overrides: Sequence[str]) -> None:
    """A command line that still sets a renamed group or key stops with one line giving the new
    spelling (`experiment=budgets` → `preset=budgets`), before Hydra composes anything."""
    for override in overrides:
        key, given, value = override.partition("=")
        key = key.lstrip("+~")
        if given and key in RENAMED:
            new, what = RENAMED[key]
            raise ConfigError(f"{key}={value} is now {new}={value} ({what})")


def _by_size(quick: Any, paper: Any, *, _root_: DictConfig) -> Any:
    """`${by_size:quick_value,paper_value}`: presets stay small unless `size=paper`."""
    return paper if _root_.get("size", "quick") == "paper" else quick


OmegaConf.register_new_resolver("by_size", _by_size, replace=True)


def horizons(cfg: DictConfig) -> list[int]:
    if check.value(cfg, "sweep.ks") is not None:
        return check.integers(cfg, "sweep.ks", minimum=1)
    k_min = check.integer(cfg, "sweep.k_min", minimum=1)
    k_max = check.integer(cfg, "sweep.k_max", minimum=1)
    if k_max < k_min:
        raise ConfigError(f"sweep.k_max ({k_max}) is below sweep.k_min ({k_min})")
    return list(range(k_min, k_max + 1))


def _reads_kth_symbol(cfg: DictConfig) -> bool:
    """Whether the query names the observed K-th next symbol (`observed`), which needs K
    observed symbols after each history; `observed_first` needs one (Tables 3–6 to K = 100)."""
    targets = [OmegaConf.select(cfg, f"query.{key}") for key in ("a", "b")]
    return "observed" in targets or "{observed}" in str(OmegaConf.select(cfg, "query.expr"))


def _histories(cfg: DictConfig, ks: list[int]) -> HistorySpec:
    future = check.integer(cfg, "sweep.future", minimum=1, optional=True)
    if future is not None and future < max(ks) and _reads_kth_symbol(cfg):
        raise ConfigError(f"sweep.future ({future}) must be at least the largest K ({max(ks)}) "
                          "for a query on the observed K-th symbol")
    source = check.choice(cfg, "sweep.histories_from", ("test", "mixture", "model"))
    count, mixture = None, None
    if source != "mixture":
        count = check.integer(cfg, "sweep.histories", minimum=1)
    else:
        per_share = check.integer(cfg, "sweep.mixture.per_share", minimum=1)
        length = check.integer(cfg, "sweep.mixture.length", minimum=1)
        check.numbers(cfg, "sweep.mixture.shares", above=-1e-12, at_most=1)
        mixture = MixtureSpec(focus=tuple(check.value(cfg, "sweep.mixture.focus") or ()),
                              exclude=tuple(check.value(cfg, "sweep.mixture.exclude") or ()),
                              shares=tuple(_listed(check.value(cfg, "sweep.mixture.shares"))),
                              per_share=per_share, length=length)
    return HistorySpec(
        source=source, count=count, future=future or max(ks),
        min_history=check.integer(cfg, "sweep.min_history", minimum=0),
        max_history=check.integer(cfg, "sweep.max_history", minimum=1, optional=True),
        sampled_length=check.integer(cfg, "sweep.sampled_length", minimum=1, optional=True),
        mixture=mixture)


def _listed(x: Any) -> list:
    """A list setting as given (a single value is a list of one); numbers keep their type, so
    labels and part names read as before (`T1.0`, `share=0.5`)."""
    return x if isinstance(x, list) else [x]


def _query(cfg: DictConfig, ks: list[int]) -> QueriesSpec:
    kind = check.choice(cfg, "query.kind", KINDS)
    if kind == "expr":
        check_template(check.value(cfg, "query.expr"), ks)
    if kind == "count" and check.value(cfg, "query.n") != "observed":
        check.integer(cfg, "query.n", minimum=0)
    if kind == "a_before_b" and "both_orders" in cfg.query:
        check.boolean(cfg, "query.both_orders")
    return QueriesSpec.of(check.value(cfg, "query"))


def _ground_truth(cfg: DictConfig) -> GroundTruthSpec:
    options = check.value(cfg, "ground_truth") or {}
    known = set(inspect.signature(seqq.ground_truth_many).parameters) - {
        "model", "histories", "queries", "seed", "surrogate"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"ground_truth.{unknown[0]} is not a ground-truth setting; use "
                          f"{', '.join(sorted(known))}")
    for key in ("s_low", "s_step", "s_high", "exact_max_calls"):
        if key in options:
            check.integer(cfg, f"ground_truth.{key}", minimum=1 if key != "exact_max_calls" else 0)
    if "rule" in options:
        check.choice(cfg, "ground_truth.rule", RULES)
    if "rel_tol" in options:
        check.number(cfg, "ground_truth.rel_tol", above=0)
    return GroundTruthSpec(options=options, enabled=check.boolean(cfg, "sweep.ground_truth"))


def _symbol_kl(cfg: DictConfig) -> SymbolKLSpec | None:
    if check.value(cfg, "sweep.symbol_kl") is None:
        return None
    return SymbolKLSpec(
        lengths=tuple(check.integers(cfg, "sweep.symbol_kl.lengths", minimum=1)),
        samples=tuple(check.integers(cfg, "sweep.symbol_kl.samples", minimum=1)),
        truth_paths=check.integer(cfg, "sweep.symbol_kl.truth_paths", minimum=1))


def _sentence_end(cfg: DictConfig) -> SentenceEndSpec | None:
    if check.value(cfg, "sweep.sentence_end") is None:
        return None
    return SentenceEndSpec(**{
        key: check.integer(cfg, f"sweep.sentence_end.{key}", minimum=1)
        for key in ("k_max", "samples", "replicates", "context_tokens", "per_kind")})


def sweep_spec(cfg: DictConfig) -> SweepSpec:
    """The sweep's config, every setting checked (a one-line `ConfigError` naming the key)
    before any data or model is loaded, as a `SweepSpec`: the only place a sweep reads `cfg`."""
    size = check.choice(cfg, "size", SIZES)
    resolve_device(check.value(cfg, "device"))
    model = model_spec(cfg, LOADERS)
    ks = horizons(cfg)
    histories = _histories(cfg, ks)
    check.numbers(cfg, "sweep.temperatures", above=0)
    temperatures = tuple(_listed(check.value(cfg, "sweep.temperatures")))
    seed = check.integer(cfg, "sweep.seed", minimum=0)
    chunk_size = check.integer(cfg, "sweep.chunk_size", minimum=1)
    repeats = check.integer(cfg, "sweep.repeats", minimum=1)
    shards = check.integer(cfg, "sweep.shards", minimum=1)
    shard = check.integer(cfg, "sweep.shard", minimum=0)
    if shard >= shards:
        raise ConfigError(f"sweep.shard must lie in 0..{shards - 1} (sweep.shards={shards})")
    progress, report = (check.boolean(cfg, "sweep.progress"), check.boolean(cfg, "sweep.report"))
    runs = method_runs(cfg)
    levels = check.integers(cfg, "levels.S", minimum=0)
    query = _query(cfg, ks)
    truth = _ground_truth(cfg)
    return SweepSpec(
        size=size, dataset=dataset_spec(cfg), model=model,
        checkpoint_dir=Path(check.value(cfg, "checkpoint_dir")), query=query, runs=tuple(runs),
        levels=tuple(int(x) for x in levels), ground_truth=truth, horizons=tuple(ks),
        histories=histories, temperatures=temperatures, seed=seed, chunk_size=chunk_size,
        repeats=repeats, shard=shard, shards=shards, dir=Path(check.value(cfg, "sweep.dir")),
        progress=progress, report=report,
        config=OmegaConf.to_container(cfg, resolve=True),
        refine_truth=check.number(cfg, "sweep.refine_truth", above=0, at_most=1, optional=True),
        symbol_kl=_symbol_kl(cfg), sentence_end=_sentence_end(cfg))


def check_config(cfg: DictConfig) -> SweepSpec:
    """Every setting the sweep reads, checked before any data or model is loaded (the same
    as `sweep_spec`, named for what callers that only validate want)."""
    return sweep_spec(cfg)
