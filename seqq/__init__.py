"""seqq: predictive querying for autoregressive sequence models.

`import seqq` loads nothing heavy and changes nothing outside seqq: each public name is imported
from its module on first use. That leaves a command free to tune its own process before torch
loads (`seqq.process`: OpenMP reads its settings once, as torch loads it), and `seqq --version`
answers without loading torch.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

# Each public name and the module that defines it.
PUBLIC = {
    "BudgetError": "seqq.errors",
    "ModelError": "seqq.errors",
    "QueryError": "seqq.errors",
    "Estimate": "seqq.estimators.estimate",
    "estimate": "seqq.api",
    "estimate_many": "seqq.api",
    "exact": "seqq.api",
    "GroundTruth": "seqq.estimators.estimate",
    "ground_truth": "seqq.estimators.ground_truth",
    "ground_truth_many": "seqq.estimators.ground_truth",
    "hitting_time_distribution": "seqq.api",
    "parse": "seqq.queries.language",
}
SUBMODULES = ("queries",)  # public as modules: `seqq.queries.hitting_time(...)`

__all__ = sorted([*PUBLIC, *SUBMODULES])


class _Package(ModuleType):
    """The `seqq` module itself, with its public names imported on first use."""

    def __getattr__(self, name: str) -> object:  # called only for a name not yet set
        if name in SUBMODULES:
            return importlib.import_module(f"{__name__}.{name}")
        if name not in PUBLIC:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(PUBLIC[name]), name)
        setattr(self, name, value)
        return value


sys.modules[__name__].__class__ = _Package
