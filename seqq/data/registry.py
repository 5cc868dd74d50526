"""Datasets by name: `load_dataset(name, root=None, **options)` (the names: `seqq.data`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from pathlib import Path

from seqq.data.base import SequenceDataset
from seqq.data.events import load_apps, load_moocs, load_reviews
from seqq.data.synthetic import PRESETS, load_synthetic
from seqq.data.text import load_shakespeare, load_wikitext
from seqq.errors import DataError
from seqq.paths import data_root


def _synthetic(root: Path, preset: str = "apps", **options) -> SequenceDataset:
    return load_synthetic(preset, **options)  # generated in memory: no root, no cache


DATASETS: dict[str, Callable[..., SequenceDataset]] = {
    "shakespeare": load_shakespeare,
    "wikitext": load_wikitext,
    "moocs": load_moocs,
    "apps": load_apps,
    "reviews": load_reviews,
    "synthetic": _synthetic,
    **{f"synthetic_{p}": partial(_synthetic, preset=p) for p in PRESETS},
}


def load_dataset(name: str, root: str | Path | None = None, **options) -> SequenceDataset:
    """The processed dataset `name`, prepared from its raw files once and cached after that
    (under `<root>/cache/`; `root` None: the data root, `seqq.paths.data_root`)."""
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; choose one of {sorted(DATASETS)}")
    loader, root = DATASETS[name], data_root(root)
    try:
        inspect.signature(loader).bind(root, **options)
    except TypeError as e:
        raise DataError(f"{name}: bad options {sorted(options)}: {e}") from e
    return loader(root, **options)
