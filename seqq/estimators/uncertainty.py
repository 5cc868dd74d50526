"""Every estimate's uncertainty: a confidence interval, diagnostics of its weights, a warning.

Intervals (`seqq.estimators.estimate.interval`), by what the method can say (docs/decisions.md
§38, measured in `python -m benchmarks --sections h`):

- sampling with a standard error: a log-normal interval, log p ∈ log p̂ ± z·σ with
  σ² = log(1 + (SE/p̂)²): never below 0, and wider above than below, as the sampling
  distribution of a mean of right-skewed weights is;
- replicates (SMC, randomized beam, Hindsight-Gumbel: dependent draws with no variance
  formula): Student's t on the replicates' mean, log-normal in shape as above, or, where the
  calibration benchmark showed it covers better (smc, randomized_beam: RESULTS.md (h)), Cox's
  interval for a log-normal mean on the replicates' logs, which widens upward as they spread;
- an estimate of 0 (or 1) from n binary draws that never varied: the one-sided limit
  −ln(1 − level)/n (the rule of three at 95 %), with no standard error;
- exact answers: the point (widened by float noise, below); deterministic lower bounds: their
  certain bounds.

No interval of a nonzero estimate is narrower than the model's float noise: it holds at least
p̂·(1 ± FLOAT_FLOOR), and an exact answer with certain bounds at least their float tolerance
(docs/decisions.md §38). Without this an exhausted `wor`, an exact beam or replicates that all
reached the same answer claimed a point that the exact value, computed in another batch, missed
by rounding (section (h) of benchmarks/RESULTS.md).

Diagnostics of a sampling estimate: its effective sample size (Σw)²/Σw² and the Pareto k̂ of the
upper tail of its weights (PSIS, Vehtari et al.; ArviZ's implementation). Where k̂ > 0.7 the
variance is likely infinite in practice and the standard error cannot be believed (likewise
with fewer than 10 effective samples). Then an answer whose enumerated head (certain lower bound
p(S): wor, the hybrid) holds most of it spans p(S) + (p̂ − p(S))·3^±1, since heavy draws can
miss the mass beyond the head.

A one-sentence `warning` says what to try where the answer cannot be trusted: fewer than
MIN_DRAWS paths drawn, whatever their weights (a flag read from the weights fires on the runs
that drew the rare heavy paths and leaves unflagged the ones that missed them, all low: issue
58); k̂ > 0.7 from enough weights, where the interval spans more than ±10 % of p̂; replicates
that disagree; and, whatever the diagnostics, an interval whose ends differ by a factor of
WIDE_RATIO (10) or more: the answer is unknown to within an order of magnitude (issue 61).

Certain bounds (beams, WOR: p(S) ≤ p ≤ p(S) + 1 − q(S)) hold in every run, so every interval is
clipped to them; where they are within CERTAIN_RAE of each other they are the interval, and no
warning is given: whatever the weights say, the answer is pinned (docs/decisions.md §38).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from torch import Tensor

from seqq.estimators.estimate import (
    K_HAT_LIMIT,
    SAMPLED,
    Estimate,
    IntervalKind,
    heavy_tailed,
    interval,
    pinned,
)

MIN_DRAWS = 200  # fewer paths drawn than this: no interval from them is trusted (issue 58: on
# a GRU count `wor`'s ~70 draws covered p in 73 % of runs and `importance`'s 182 in 70 %; wor's
# ~240 at 500 calls in 97 %)
MIN_TAIL_DRAWS = 100  # fewer nonzero weights than this: k̂ is too noisy to act on, not fitted
K_HAT_DRAWS = 250  # k̂ flags only from this many nonzero weights (issue 58: from ~120 draws of
# bounded weights it fired on 87 % of a GRU count's runs, which covered p in 94.5 %)
FLAG_WIDTH = 0.10  # heavy weights warn only where the interval spans more than ±this of p̂: a
# narrower one already says the answer is close (benchmarks/RESULTS.md (h): such flags were
# false alarms, the run within 5 % of p)
REPLICATE_SPREAD = 0.5  # replicates' relative standard error above this: they disagree
WIDE_RATIO = 10.0  # an interval whose ends differ by this factor says the answer is unknown
def weight_diagnostics(log_w: np.ndarray) -> dict[str, float]:
    """Draws, nonzero weights, effective sample size and Pareto k̂ of one estimate's weights."""
    finite = log_w[np.isfinite(log_w)]
    diagnostics = {"draws": float(len(log_w)), "nonzero": float(len(finite)),
                   "ess": 0.0, "pareto_k": math.nan}
    if not len(finite):
        return diagnostics
    w = np.exp(finite - finite.max())
    diagnostics["ess"] = float(w.sum() ** 2 / (w**2).sum())
    if len(finite) >= MIN_TAIL_DRAWS and np.ptp(finite) > 0:
        diagnostics["pareto_k"] = float(_pareto_k(finite))
    return diagnostics


def _pareto_k(log_w: np.ndarray) -> float:
    from arviz_stats.base import array_stats  # imported on first use: it loads scipy's stats

    with np.errstate(all="ignore"):
        try:
            return float(array_stats.psislw(-log_w)[1])  # psislw reads negated log weights
        except ValueError:  # a tail of equal weights (few distinct paths): nothing heavy to fit
            return math.nan


def warning_for(diagnostics: dict[str, float], method: str,
                width: float = math.inf) -> str | None:
    """One sentence when the estimate cannot be trusted, else None. Too few draws flag
    whatever their weights (issue 58: a flag raised by few *effective* samples fired on the
    runs that drew the rare heavy paths and left unflagged those that missed them, all low).
    Heavy weights (Pareto k̂, fitted on at least K_HAT_DRAWS of them) flag only where the
    interval's relative half-width `width` exceeds FLAG_WIDTH: on rare events over long
    horizons they are what tells the runs that missed p (benchmarks/RESULTS.md (h))."""
    draws = diagnostics.get("draws", math.inf)
    if draws < MIN_DRAWS:
        return (f"only {draws:.0f} paths were drawn, too few for the interval to be trusted (a "
                "run that has not yet drawn the rare paths that carry p looks precise); try a "
                "larger budget")
    k = diagnostics.get("pareto_k", math.nan)
    if k > K_HAT_LIMIT and diagnostics.get("nonzero", 0) >= K_HAT_DRAWS and width > FLAG_WIDTH:
        return (f"the weights are heavy-tailed (Pareto k̂ = {k:.2f} > {K_HAT_LIMIT}), so the "
                "estimate and its interval may be far off; try a larger budget, method='smc', "
                "or a surrogate")
    spread = diagnostics.get("replicate_rel_se", math.nan)
    if spread > REPLICATE_SPREAD:
        return (f"the {method} replicates disagree (relative standard error {spread:.2f}); "
                "try a larger budget or a surrogate")
    return None


def with_uncertainty(estimate: Estimate, kind: IntervalKind, level: float,
                     log_weights: Tensor | None = None, dof: int | None = None,
                     diagnostics: dict[str, float] | None = None) -> Estimate:
    """`estimate` with its interval at `level`, diagnostics and warning. A sampling estimate
    whose draws never varied (all misses, or all hits of binary weights) gets the one-sided
    limit instead of a standard error of 0."""
    diagnostics = dict(diagnostics or {})
    if log_weights is not None:
        diagnostics.update(weight_diagnostics(log_weights.double().cpu().numpy()))
    stderr = estimate.stderr
    if kind in SAMPLED and stderr == 0.0 and estimate.value in (0.0, 1.0):
        kind, stderr = "zero", None
        dof = estimate.num_samples or int(diagnostics.get("draws", 0)) or 1
    bounds = interval(kind, estimate.value, stderr, dof, level, estimate.lower, estimate.upper,
                      estimate.extras.get("replicates"), heavy_tailed(diagnostics))
    low, high = bounds if bounds is not None else (None, None)
    warning = None  # none where the certain bounds pin the answer (then they are its interval)
    if kind not in ("exact", "zero") and not pinned(estimate.value, estimate.lower,
                                                    estimate.upper):
        width = (max(high / estimate.value - 1, 1 - low / estimate.value)
                 if bounds is not None and estimate.value > 0 else math.inf)
        warning = warning_for(diagnostics, estimate.method, width)
    if (warning is None and kind != "exact" and bounds is not None and low > 0
            and high / low >= WIDE_RATIO):
        warning = (f"its {level:.0%} interval [{low:.3g}, {high:.3g}] spans a factor of "
                   f"{high / low:,.0f}, so the answer is not known to within an order of "
                   "magnitude; try a larger budget or a surrogate")
    if kind == "zero" and warning is None:
        known = f"p ≤ {high:.3g}" if estimate.value == 0 else f"p ≥ {low:.3g}"
        warning = (f"{'none' if estimate.value == 0 else 'all'} of the {dof} draws reached the "
                   f"query, so only {known} is known ({level:.0%}); try method='importance' or "
                   "a larger budget")
    return replace(estimate, stderr=stderr, ci_low=low, ci_high=high, level=level,
                   interval_kind=kind, dof=dof, diagnostics=diagnostics, warning=warning)
