"""Turning per-row (or per-branch) log-weights into per-task `Estimate`s, in log space."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.estimators.engine.batch import Batch
from seqq.estimators.estimate import Estimate


@dataclass
class BranchResult:
    """Per-branch estimates: log of the estimate, variance of the estimate, samples, entropy."""

    log_value: Tensor  # [N] float64
    variance: Tensor | None  # [N] float64 variance of the branch estimate, None if deterministic
    samples: Tensor | None  # [N] samples used per branch
    entropy: Tensor | None  # [N] H(q) of the branch's proposal, nats
    log_lower: Tensor | None = None  # [N] log p(S) of the paths the branch enumerated
    log_gap: Tensor | None = None  # [N] log(1 - q(S)): upper bound = p(S) + 1 - q(S)


def segment_mean(log_w: Tensor, group: Tensor, num_groups: int) -> tuple[Tensor, Tensor, Tensor]:
    """log of the mean, variance of the mean (unbiased), and count of w = exp(log_w) per group."""
    count = torch.bincount(group, minlength=num_groups).double()
    shift = torch.full((num_groups,), -math.inf, dtype=torch.float64)
    shift = shift.scatter_reduce(0, group, log_w, reduce="amax")
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    scaled = torch.exp(log_w - shift[group])
    s1 = torch.zeros(num_groups, dtype=torch.float64).index_add_(0, group, scaled)
    s2 = torch.zeros(num_groups, dtype=torch.float64).index_add_(0, group, scaled**2)
    mean = s1 / count.clamp_min(1)
    sample_var = ((s2 - s1 * mean) / (count - 1).clamp_min(1)).clamp_min(0)
    variance = torch.where(count > 1, sample_var / count.clamp_min(1), torch.nan)
    return mean.log() + shift, variance * torch.exp(2 * shift), count


def segment_average(values: Tensor, group: Tensor, num_groups: int) -> Tensor:
    count = torch.bincount(group, minlength=num_groups).double().clamp_min(1)
    return torch.zeros(num_groups, dtype=torch.float64).index_add_(0, group, values) / count


STEP_ULPS = 16  # a model's log-probabilities may move this many ulps of their size with the batch


def float_tolerance(batch: Batch, steps: int, log_p: float) -> float:
    """Relative error a probability p of paths of `steps` model steps may carry: the model's
    outputs depend on the batch they are computed in (other rows change the order of float
    sums), by a few ulps of its dtype per step and per nat of −log p: an unlikely path's
    log-probability sums large logits, whose rounding grows with their size (issue 51: on the
    authors' LSTM a p of 7.7e-6 over 3 steps moved 5.8e-6 with its batch, beyond 16 ulps per
    step; docs/decisions.md §38)."""
    return (STEP_ULPS * torch.finfo(batch.root_log_probs.dtype).eps
            * (steps + (abs(log_p) if math.isfinite(log_p) else 0.0)))


def to_estimates(batch: Batch, method: str, result: BranchResult, lower_bound: bool,
                 extras: list[dict] | None = None, groups: list[Tensor] | None = None
                 ) -> list[Estimate]:
    """Sum each task's disjoint products; their estimates are independent, so variances add.
    `groups` says which entries of `result` belong to each task (its branches by default).
    Certain bounds are widened by the model's float tolerance; an estimate whose enumerated
    set holds all of Q (no gap left) is exact."""
    estimates = []
    for t, b in enumerate(batch.task_branches() if groups is None else groups):
        if len(b) == 0:
            estimates.append(Estimate(
                method=method, value=0.0, log_value=-math.inf, stderr=0.0,
                model_calls=int(batch.task_calls()[t]), is_lower_bound=lower_bound,
                note="the query is empty: some position allows no symbol, so p = 0",
                extras=extras[t] if extras else {}, lower=0.0, upper=0.0,
                interval_kind="exact"))
            continue
        logs = result.log_value[b]
        log_value = torch.logsumexp(logs, 0).item()
        stderr = None
        if result.variance is not None:
            var = result.variance[b]
            stderr = None if torch.isnan(var).any() else math.sqrt(var.sum().item())
        entropy = None
        if result.entropy is not None:
            share = torch.softmax(logs, 0) if math.isfinite(log_value) else torch.full_like(
                logs, 1 / len(b))
            entropy = (share * result.entropy[b]).sum().item()
        samples = int(result.samples[b].sum()) if result.samples is not None else None
        lower = upper = None
        exhausted = False
        if result.log_lower is not None:
            lower = torch.logsumexp(result.log_lower[b], 0).exp().item()
            gap = torch.logsumexp(result.log_gap[b], 0).exp().item()
            exhausted = gap == 0.0 and not stderr
            steps = int(batch.lengths[b].max())  # p(S) errs relative to its size; 1 − q(S),
            # a difference of masses near 1, errs absolutely, as a path of p near 1 does
            lower, upper = (lower * (1 - float_tolerance(batch, steps, math.log(lower or 1.0))),
                            min(1.0, lower + gap + 2 * float_tolerance(batch, steps, 0.0)))
        estimates.append(Estimate(
            method=method, value=math.exp(log_value), log_value=log_value, stderr=stderr,
            model_calls=int(batch.task_calls()[t]), is_lower_bound=lower_bound,
            entropy=entropy, num_samples=samples, extras=extras[t] if extras else {},
            lower=lower, upper=upper, interval_kind="exact" if exhausted else "none"))
    return estimates


def group_logsumexp(values: Tensor, group: Tensor, num_groups: int) -> Tensor:
    """log Σ exp(values) within each group (−inf for empty groups)."""
    shift = torch.full((num_groups,), -math.inf, dtype=torch.float64).scatter_reduce(
        0, group, values, reduce="amax")
    safe = torch.where(torch.isfinite(shift), shift, 0.0)
    total = torch.zeros(num_groups, dtype=torch.float64).index_add_(
        0, group, torch.exp(values - safe[group]))
    return total.log() + safe


def log_one_minus(log_x: Tensor) -> Tensor:
    """log(1 − x) for x = exp(log_x) ≤ 1; −inf where x ≥ 1."""
    return torch.log(-torch.expm1(log_x.clamp_max(0))).nan_to_num(nan=-math.inf)
