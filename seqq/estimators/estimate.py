"""The result every estimator returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Estimate:
    """An estimate of p(X_{1:K} ∈ Q | history).

    `log_value` carries the answer when `value` underflows; `stderr` is None for deterministic
    methods; `entropy` is the restricted-proposal entropy H(q) in nats where the method can
    estimate it; `model_calls` follows docs/decisions.md §1. `lower`/`upper` are bounds that hold
    with certainty (not confidence intervals) where the method has them: p(S) ≤ p(Q) ≤
    p(S) + 1 − q(S) for any set S of paths of Q it enumerated (beams, WOR samples), because
    q ≥ p on Q (Thm. 1).
    """

    method: str
    value: float
    log_value: float
    stderr: float | None
    model_calls: int
    is_lower_bound: bool
    entropy: float | None = None
    num_samples: int | None = None
    note: str = ""
    lower: float | None = None
    upper: float | None = None
    extras: dict[str, Any] = field(default_factory=dict)
