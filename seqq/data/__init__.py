"""Datasets by name: `load_dataset(name, root=None, **options)`.

Names: shakespeare, wikitext, moocs, apps, reviews (real raw files under `<root>/<name>/`, the
data root of `seqq.paths`; Shakespeare and WikiText fall back to the copies shipped with seqq), and
the synthetic stand-ins `synthetic_reviews`, `synthetic_apps`, `synthetic_moocs`,
`synthetic_shakespeare` (or `synthetic` with `preset=...`).

The loaders (pandas, tokenizers) are imported when first named here, not with the package: the
`<BOS>` rule and text histories (`seqq.data.symbols`) serve `seqq ask` and the estimators
without them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from seqq.data.symbols import BOS
from seqq.errors import DataError, MissingRawData

if TYPE_CHECKING:
    from seqq.data.base import SequenceDataset
    from seqq.data.registry import DATASETS, load_dataset

_HOMES = {"DATASETS": "seqq.data.registry", "load_dataset": "seqq.data.registry",
          "SequenceDataset": "seqq.data.base"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'seqq.data' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


__all__ = ["BOS", "DATASETS", "DataError", "MissingRawData", "SequenceDataset", "load_dataset"]
