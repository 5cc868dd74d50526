"""Ground truth for benchmarks (docs/decisions.md §6): exact enumeration when it is affordable,
otherwise a surrogate from adaptive importance sampling with a recorded relative error."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from seqq.estimators.batch import Batch, prepare, subset, tree_calls
from seqq.estimators.exact import exact
from seqq.estimators.montecarlo import sample_rows
from seqq.estimators.summary import group_logsumexp
from seqq.models.protocol import SequenceModel
from seqq.queries import Query


@dataclass(frozen=True)
class GroundTruth:
    value: float
    log_value: float
    kind: Literal["exact", "surrogate"]
    samples: int
    rel_stderr: float
    model_calls: int
    entropy: float | None


@torch.inference_mode()
def ground_truth_many(
    model: SequenceModel,
    histories: Sequence[Sequence[int]],
    queries: Sequence[Query] | Query,
    seed: int | None = None,
    exact_max_calls: float = 2_000_000,
    rule: Literal["absolute", "relative"] = "absolute",
    delta: float = 1e-7,
    rel_tol: float = 0.01,
    s_low: int = 10_000,
    s_step: int = 1_000,
    s_high: int = 100_000,
) -> list[GroundTruth]:
    """Exact where enumeration costs ≤ `exact_max_calls`; else IS with S_low samples, then +S_step
    until the per-sample weight variance (Eq. 66) < δ (`rule="absolute"`, the paper's) or the
    relative standard error < rel_tol (`rule="relative"`), or S_high samples."""
    if rule not in ("absolute", "relative"):
        raise ValueError(f"ground-truth rule must be 'absolute' or 'relative', got {rule!r}")
    if isinstance(queries, Query):
        queries = [queries] * len(histories)
    batch = prepare(model, histories, queries, seed)
    cheap = tree_calls(batch) <= exact_max_calls
    results: list[GroundTruth | None] = [None] * batch.num_tasks
    if cheap.any():
        tasks = cheap.nonzero().flatten()
        before = batch.counter.calls.clone()
        for t, est in zip(tasks.tolist(), exact(subset(batch, tasks)), strict=True):
            results[t] = GroundTruth(est.value, est.log_value, "exact", 0, 0.0,
                                     int(batch.counter.calls[t] - before[t] + 1), est.entropy)
    if (~cheap).any():
        _surrogate(batch, (~cheap).nonzero().flatten(), results, rule, delta, rel_tol,
                   s_low, s_step, s_high)
    return results  # type: ignore[return-value]


def ground_truth(model: SequenceModel, history: Sequence[int], query: Query,
                 seed: int | None = None, **options) -> GroundTruth:
    return ground_truth_many(model, [history], [query], seed=seed, **options)[0]


def _surrogate(batch: Batch, tasks: torch.Tensor, results: list, rule: str, delta: float,
               rel_tol: float, s_low: int, s_step: int, s_high: int) -> None:
    N = len(batch.branch_task)
    log_s1 = torch.full((N,), -math.inf, dtype=torch.float64)
    log_s2, neg_log_q = log_s1.clone(), torch.zeros(N, dtype=torch.float64)
    drawn = torch.zeros(batch.num_tasks, dtype=torch.long)
    active = tasks
    while len(active):
        S = s_low if drawn[active[0]] == 0 else s_step
        sub = subset(batch, active)
        branch_ids = torch.isin(batch.branch_task, active).nonzero().flatten()  # sub's branches
        rows = torch.repeat_interleave(torch.arange(len(branch_ids)), S)
        paths = sample_rows(sub, rows, "proposal")
        owner = branch_ids[rows]
        log_s1 = torch.logaddexp(log_s1, group_logsumexp(paths.log_weight, owner, N))
        log_s2 = torch.logaddexp(log_s2, group_logsumexp(2 * paths.log_weight, owner, N))
        neg_log_q.index_add_(0, owner, -paths.log_q)
        drawn[active] += S
        value, log_value, rel, per_sample_var = _task_statistics(batch, log_s1, log_s2, drawn)
        done = (per_sample_var < delta) if rule == "absolute" else (rel < rel_tol)
        finished = active[(done | (drawn >= s_high))[active]]
        log_n = drawn.double().clamp_min(1).log()[batch.branch_task]
        share = torch.exp(log_s1 - log_n - log_value[batch.branch_task]).nan_to_num(0.0)
        entropy = torch.zeros(batch.num_tasks, dtype=torch.float64).index_add_(
            0, batch.branch_task, share * neg_log_q) / drawn.clamp_min(1)
        for t in finished.tolist():
            results[t] = GroundTruth(value[t].item(), log_value[t].item(), "surrogate",
                                     int(drawn[t]), rel[t].item() if value[t] > 0 else 0.0,
                                     int(batch.counter.calls[t]), entropy[t].item())
        active = active[~torch.isin(active, finished)]


def _task_statistics(batch: Batch, log_s1: torch.Tensor, log_s2: torch.Tensor,
                     drawn: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per task: p̂, log p̂, relative standard error, and per-sample weight variance (Eq. 66),
    from per-branch running sums Σw and Σw² kept in log space (products' samples independent)."""
    T, task = batch.num_tasks, batch.branch_task
    n = drawn.double().clamp_min(1)
    log_mean = log_s1 - n.log()[task]  # per branch
    log_value = group_logsumexp(log_mean, task, T)
    shift = torch.where(torch.isfinite(log_value), log_value, 0.0)
    scaled_mean = torch.exp(log_mean - shift[task])
    scaled_var = (torch.exp(log_s2 - n.log()[task] - 2 * shift[task]) - scaled_mean**2).clamp_min(0)
    var = torch.zeros(T, dtype=torch.float64).index_add_(0, task, scaled_var)  # relative to p̂²
    rel = torch.where(torch.isfinite(log_value), (var / n).sqrt(), torch.inf)
    return log_value.exp(), log_value, rel, var * torch.exp(2 * shift)

