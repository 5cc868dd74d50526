"""seqq: predictive querying for autoregressive sequence models."""

import os

# Before anything loads torch and its OpenMP runtime: idle threads sleep instead of spinning
# (seqq/threads.py says why; OMP_WAIT_POLICY set by the user wins).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from seqq import queries
from seqq.api import estimate, estimate_many, exact
from seqq.errors import BudgetError, ModelError, QueryError
from seqq.estimators import Estimate
from seqq.estimators.reuse import hitting_time_distribution
from seqq.ground_truth import GroundTruth, ground_truth, ground_truth_many
from seqq.models.host_memory import keep_freed_memory, request_huge_pages
from seqq.queries.language import parse

# Before any tensor exists (importing seqq makes none): see seqq/models/host_memory.py.
request_huge_pages()  # big CPU tensors on 2 MiB pages
keep_freed_memory()  # freed heap memory kept for reuse

__all__ = [
    "BudgetError",
    "Estimate",
    "GroundTruth",
    "ModelError",
    "QueryError",
    "estimate",
    "estimate_many",
    "exact",
    "ground_truth",
    "ground_truth_many",
    "hitting_time_distribution",
    "parse",
    "queries",
]
