"""seqq: predictive querying for autoregressive sequence models."""

from seqq import queries
from seqq.api import estimate, estimate_many, exact
from seqq.errors import BudgetError, ModelError, QueryError
from seqq.estimators import Estimate
from seqq.estimators.reuse import hitting_time_distribution
from seqq.ground_truth import GroundTruth, ground_truth, ground_truth_many
from seqq.models.host_memory import keep_freed_memory
from seqq.queries.language import parse

keep_freed_memory()  # big CPU tensors reuse freed heap memory (seqq/models/host_memory.py)

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
