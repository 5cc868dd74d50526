"""What an estimator returns (`Estimate`), and what the judge returns (`GroundTruth`,
`seqq.estimators.ground_truth`): the two answers a sweep compares."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from scipy.special import ndtri, stdtrit

# How an estimate's interval is built (`seqq.estimators.uncertainty`): from its standard error on
# the log scale, from replicates with Student's t (on their mean, or Cox's on their logs:
# "log-replicates"), a one-sided limit for an estimate of 0 from n draws, a point for an exact
# answer, or none (a deterministic lower bound).
IntervalKind = Literal["log-normal", "replicates", "log-replicates", "zero", "exact", "none"]
SAMPLED = ("log-normal", "replicates", "log-replicates")  # the kinds built from sampling error
REPLICATED = ("replicates", "log-replicates")  # the kinds built from replicates
CERTAIN_RAE = 0.05  # certain bounds this tight (upper ≤ lower · (1 + it)) pin the answer to an
# RAE below it whatever the weights say: they are its interval (issue 42: wor flagged near-exact
# answers)
K_HAT_LIMIT = 0.7  # PSIS: above it the tail is too heavy for the estimate's error to be trusted
MIN_ESS = 10.0  # fewer effective samples than this: the standard error is itself a guess
TAIL_FACTOR = 3.0  # heavy weights behind the part of an answer its draws did not enumerate: that
HEAD_SHARE = 0.5  # part may be this many times off either way, where the enumerated head holds
# more than this share of the answer (benchmarks/RESULTS.md (h): wor on rare hitting times held
# 99 % of p̂ in its head and missed p by 13 % with a 0.6 % standard error)


@dataclass(frozen=True)
class GroundTruth:
    """The judge's answer to one query (`seqq.estimators.ground_truth`): exact, or estimated
    with its relative standard error; `method` names its origin (`dp`, `enumeration`, or the
    sampler that drew it)."""

    value: float
    log_value: float
    kind: Literal["exact", "estimated"]
    samples: int
    rel_stderr: float
    model_calls: int
    entropy: float | None
    method: str


@dataclass(frozen=True)
class Estimate:
    """An estimate of p(X_{1:K} ∈ Q | history).

    `log_value` carries the answer when `value` underflows; `stderr` is None for deterministic
    methods; `entropy` is the restricted-proposal entropy H(q) in nats where the method can
    estimate it; `model_calls` follows docs/decisions.md §1. `lower`/`upper` are bounds that hold
    with certainty (not confidence intervals) where the method has them: p(S) ≤ p(Q) ≤
    p(S) + 1 − q(S) for any set S of paths of Q it enumerated (beams, WOR samples), because
    q ≥ p on Q (Thm. 1), widened by the model's float tolerance (docs/decisions.md §38).

    `ci_low`/`ci_high` is a confidence interval at `level` (`interval(level)` gives others);
    `diagnostics` holds the effective sample size and Pareto k̂ of the weights where the method
    samples, and `warning` says in one sentence why the estimate may not be trusted, or is None.
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
    ci_low: float | None = None
    ci_high: float | None = None
    level: float = 0.95
    interval_kind: IntervalKind = "none"
    dof: int | None = None  # degrees of freedom of a replicate interval; draws behind a zero
    diagnostics: dict[str, float] = field(default_factory=dict)
    warning: str | None = None

    def interval(self, level: float = 0.95) -> tuple[float, float] | None:
        """The confidence interval at `level`, built the way this estimate's was."""
        return interval(self.interval_kind, self.value, self.stderr, self.dof, level,
                        self.lower, self.upper, self.extras.get("replicates"),
                        heavy_tailed(self.diagnostics))

    @property
    def exact(self) -> bool:
        return self.interval_kind == "exact"

    def __repr__(self) -> str:
        """One line a person reads (the fields stay attributes): p, its interval, the cost and
        any warning, instead of a dump of every field and the diagnostics."""
        p = f"p = {self.value:.6g}" + (" (exact)" if self.exact else "")
        if not self.exact and self.stderr is not None:
            p += f" ± {self.stderr:.2g}"
        if not self.exact and self.ci_low is not None:
            p += f", {self.level:.0%} interval [{self.ci_low:.4g}, {self.ci_high:.4g}]"
        if self.warning:
            p += f"; warning: {self.warning}"
        return f"Estimate({self.method}: {p}; {self.model_calls:,} model calls)"

    def __post_init__(self) -> None:
        if not 0 < self.level < 1:
            raise ValueError(f"level must lie in (0, 1), got {self.level}")
        if self.ci_low is not None and math.isnan(self.ci_low):
            raise ValueError("ci_low is NaN")


FLOAT_FLOOR = 2.0**-16  # least relative half-width of an interval: a model's float32 outputs move
# with the batch around them by up to 3.3e-6 relative (issue 31), more over long horizons


def interval(kind: IntervalKind, value: float, stderr: float | None, dof: int | None,
             level: float = 0.95, lower: float | None = None, upper: float | None = None,
             replicates: Sequence[float] | None = None,
             heavy: bool = False) -> tuple[float, float] | None:
    """The `level` confidence interval of an estimate built by `kind`
    (`seqq.estimators.uncertainty` says how each is chosen): never narrower than the model's
    float noise, an exact answer's at least its certain bounds' p̂·(1 ± τ), a deterministic
    bound's its certain range, and any other inside the certain bounds where there are some.
    `heavy` (its weights are heavy-tailed): a sampled answer whose certain lower bound p(S)
    holds most of it also spans p(S) + (p̂ − p(S))·TAIL_FACTOR^±1 (`tail_widened`)."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if kind == "none" or (kind != "exact" and pinned(value, lower, upper)):
        return (lower, upper) if lower is not None else None
    if kind == "zero":
        width = -math.log(1 - level) / max(1, dof or 1)
        return clipped((0.0, min(1.0, width)) if value <= 0.5 else (max(0.0, 1 - width), 1.0),
                       value, lower, upper)
    if kind == "exact":
        low, high = value, value
        if lower is not None and upper is not None:  # lower = p̂·(1 − τ): p̂·(1 ± τ)
            low, high = lower, min(upper, 2 * value - lower)
    elif kind == "log-replicates" and replicates is not None and len(replicates) > 1 and min(
            replicates) > 0:
        low, high = cox(replicates, level)
    elif kind not in SAMPLED or stderr is None or not value > 0:
        return None
    else:
        q = (1 + level) / 2
        z = ndtri(q) if kind == "log-normal" else stdtrit(dof, q)
        sigma = math.sqrt(math.log1p((stderr / value) ** 2))
        low, high = value * math.exp(-z * sigma), value * math.exp(z * sigma)
    if heavy and kind in SAMPLED:
        low, high = tail_widened(low, high, value, lower)
    return clipped(floored(value, low, high), value, lower, upper)


def heavy_tailed(diagnostics: dict[str, float]) -> bool:
    """Whether an estimate's weights are too heavy-tailed (Pareto k̂ > K_HAT_LIMIT) or too
    few (ESS < MIN_ESS) for its standard error to be believed."""
    return (diagnostics.get("pareto_k", math.nan) > K_HAT_LIMIT
            or (diagnostics.get("nonzero", 0) > 0 and diagnostics.get("ess", math.inf) < MIN_ESS))


def tail_widened(low: float, high: float, value: float,
                 lower: float | None) -> tuple[float, float]:
    """[low, high] widened for heavy weights behind a head: where the paths a method
    enumerated (certain lower bound p(S)) hold more than HEAD_SHARE of p̂, the rest, p̂ − p(S),
    rests on heavy-tailed draws that can miss its mass (or hit it too often), so the interval
    also spans p(S) + (p̂ − p(S))·TAIL_FACTOR^±1. Where the sampled part dominates, its
    standard error already speaks for it."""
    if lower is None or not 0 < value - lower < HEAD_SHARE * value:
        return low, high
    tail = value - lower
    return min(low, lower + tail / TAIL_FACTOR), max(high, lower + tail * TAIL_FACTOR)


def pinned(value: float, lower: float | None, upper: float | None) -> bool:
    """Whether certain bounds alone put the estimate within CERTAIN_RAE of the truth: where both
    lie in [lower, upper], |p̂ − p| / p ≤ (upper − lower) / lower."""
    return (lower is not None and upper is not None
            and 0 < lower <= value <= upper <= lower * (1 + CERTAIN_RAE))


def cox(replicates: Sequence[float], level: float) -> tuple[float, float]:
    """Cox's interval for the mean of a log-normal, from R positive replicates' logs y:
    exp(ȳ + s²/2 ± t·√(s²/R + s⁴/(2(R − 1)))). Replicate estimates of a rare event are right-
    skewed (most miss the rare heavy paths, a few find them); this interval widens upward as
    their logs spread, where a t interval on their mean stays symmetric in log p."""
    y = [math.log(v) for v in replicates]
    r = len(y)
    mean = sum(y) / r
    var = sum((v - mean) ** 2 for v in y) / (r - 1)
    half = stdtrit(r - 1, (1 + level) / 2) * math.sqrt(var / r + var**2 / (2 * (r - 1)))
    return min(1.0, math.exp(mean + var / 2 - half)), min(1.0, math.exp(mean + var / 2 + half))


def clipped(bounds: tuple[float, float], value: float, lower: float | None,
            upper: float | None) -> tuple[float, float]:
    """A confidence interval inside the method's certain bounds, where it has them: the truth
    lies in [lower, upper] for sure (float tolerance included), so nothing outside is a
    plausible value. The estimate itself stays inside."""
    low, high = bounds
    if lower is not None:
        low = max(low, min(lower, value))
    if upper is not None:
        high = min(high, max(upper, value))
    return low, high


def floored(value: float, low: float, high: float) -> tuple[float, float]:
    """[low, high] widened to at least value·(1 ± FLOAT_FLOOR), within [0, 1]."""
    return (max(0.0, min(low, value * (1 - FLOAT_FLOOR))),
            min(1.0, max(high, value * (1 + FLOAT_FLOOR))))
