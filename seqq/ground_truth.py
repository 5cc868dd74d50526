"""Ground truth for benchmarks (docs/decisions.md §6), the cheapest sound answer per query, recorded
in `GroundTruth.method`:

- `dp`: the model's own exact answer (`log_probability`, e.g. Markov models' forward DP);
- `enumeration`: exact enumeration when it costs at most `exact_max_calls` model calls;
- otherwise a surrogate: `wor` (sum-and-sample over a growing WOR head in the prefix trie, until
  the relative standard error is below `rel_tol`; exact if the head exhausts Q) under
  `rule="relative"`, or `importance` (the paper's adaptive IS with its Eq. 66 rule, its samples
  drawn through the prefix trie so shared prefixes are paid once) under `rule="absolute"`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from tqdm.auto import tqdm

from seqq.estimators.batch import Batch, prepare, subset, tree_calls
from seqq.estimators.draws import draw_paths
from seqq.estimators.exact import exact
from seqq.estimators.summary import group_logsumexp
from seqq.estimators.trie import Trie
from seqq.estimators.wor import wor_until
from seqq.models.protocol import SequenceModel
from seqq.queries import Query

Method = Literal["dp", "enumeration", "wor", "importance"]
TRIE_CALLS = 2**21  # worst-case calls of the WOR surrogate's tasks sharing one trie (about 4.5 GB
# of states for an LSTM-128; each group's trie is freed before the next)


@dataclass(frozen=True)
class GroundTruth:
    value: float
    log_value: float
    kind: Literal["exact", "surrogate"]
    samples: int
    rel_stderr: float
    model_calls: int
    entropy: float | None
    method: Method = "importance"


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
    progress: bool | None = None,
) -> list[GroundTruth]:
    """The model's exact answer if it has one; else exact enumeration where it costs
    ≤ `exact_max_calls`; else a surrogate: under `rule="relative"`, WOR sum-and-sample until
    the relative standard error < `rel_tol` (at most s_high·(K−1) calls per query); under
    `rule="absolute"` (the paper's), IS with S_low samples, then +S_step until the per-sample
    weight variance (Eq. 66) < δ, or S_high samples. `progress` shows a bar (default: when
    some query needs a surrogate)."""
    if rule not in ("absolute", "relative"):
        raise ValueError(f"ground-truth rule must be 'absolute' or 'relative', got {rule!r}")
    if isinstance(queries, Query):
        queries = [queries] * len(histories)
    if hasattr(model, "log_probability"):
        return [_model_exact(model, h, q) for h, q in zip(histories, queries, strict=True)]
    batch = prepare(model, histories, queries, seed)
    cheap = tree_calls(batch) <= exact_max_calls
    results: list[GroundTruth | None] = [None] * batch.num_tasks
    bar = tqdm(total=batch.num_tasks, desc="ground truth", unit="query",
               disable=not (progress if progress is not None else bool((~cheap).any())))
    if cheap.any():
        tasks = cheap.nonzero().flatten()
        before = batch.counter.calls.clone()
        for t, est in zip(tasks.tolist(), exact(subset(batch, tasks)), strict=True):
            results[t] = GroundTruth(est.value, est.log_value, "exact", 0, 0.0,
                                     int(batch.counter.calls[t] - before[t] + 1), est.entropy,
                                     "enumeration")
        bar.update(len(tasks))
    hard = (~cheap).nonzero().flatten()
    if len(hard) and rule == "relative":
        _wor_surrogate(batch, hard, results, rel_tol, s_high, bar)
    elif len(hard):
        _surrogate(batch, hard, results, rule, delta, rel_tol, s_low, s_step, s_high, bar)
    bar.close()
    return results  # type: ignore[return-value]


def ground_truth(model: SequenceModel, history: Sequence[int], query: Query,
                 seed: int | None = None, **options) -> GroundTruth:
    return ground_truth_many(model, [history], [query], seed=seed, **options)[0]


def _model_exact(model, history: Sequence[int], query: Query) -> GroundTruth:
    """The model's own exact answer (forward DP), and H(q) where it offers that too."""
    log_value = model.log_probability(history, query)
    entropy = None
    if hasattr(model, "restricted_entropy") and math.isfinite(log_value):
        entropy = model.restricted_entropy(history, query)
    return GroundTruth(math.exp(log_value), log_value, "exact", 0, 0.0, 0, entropy, "dp")


def _wor_surrogate(batch: Batch, tasks: torch.Tensor, results: list, rel_tol: float,
                   s_high: int, bar) -> None:
    """`wor_until` on groups of tasks whose worst-case calls sum to at most `TRIE_CALLS`: the
    trie keeps every prefix it evaluated (a state per prefix), so one trie for all of a
    sweep's hard queries would outgrow memory at tight tolerances."""
    before = batch.counter.calls.clone()
    max_calls = s_high * (int(batch.lengths.max()) - 1) + 1
    per_group = max(1, TRIE_CALLS // max_calls)
    for group in tasks.split(per_group):
        estimates, _ = wor_until(subset(batch, group), rel_tol, max_calls,
                                 on_stage=_stage_reporter(bar))
        _record_wor(batch, group, estimates, before, results)


def _stage_reporter(bar) -> Callable[[int], None]:
    """Moves `bar` by the tasks a `wor_until` run has finished (it reports running totals)."""
    done = 0

    def report(finished: int) -> None:
        nonlocal done
        bar.update(finished - done)
        done = finished

    return report


def _record_wor(batch: Batch, tasks: torch.Tensor, estimates: list, before: torch.Tensor,
                results: list) -> None:
    for t, est in zip(tasks.tolist(), estimates, strict=True):
        rel = 0.0 if not est.stderr else est.stderr / est.value
        results[t] = GroundTruth(est.value, est.log_value, "exact" if est.stderr == 0.0 else
                                 "surrogate", int(est.num_samples or 0), rel,
                                 int(batch.counter.calls[t] - before[t] + 1), est.entropy, "wor")


def _surrogate(batch: Batch, tasks: torch.Tensor, results: list, rule: str, delta: float,
               rel_tol: float, s_low: int, s_step: int, s_high: int, bar) -> None:
    """Adaptive IS from the restricted proposal, drawn through a prefix trie per group of
    tasks (worst-case calls at most `TRIE_CALLS` per group), so a prefix shared by several
    samples costs one call; the samples and the stopping rule are the paper's."""
    max_calls = s_high * (int(batch.lengths.max()) - 1) + 1
    for group in tasks.split(max(1, TRIE_CALLS // max_calls)):
        _adaptive_importance(subset(batch, group), group, results, rule, delta, rel_tol, s_low,
                             s_step, s_high, bar)


def _adaptive_importance(sub: Batch, tasks: torch.Tensor, results: list, rule: str,
                         delta: float, rel_tol: float, s_low: int, s_step: int, s_high: int,
                         bar) -> None:
    """`_surrogate` for the tasks of `sub` (results[tasks[t]] for its task t)."""
    trie = Trie(sub)
    N, T = len(sub.branch_task), sub.num_tasks
    log_s1 = torch.full((N,), -math.inf, dtype=torch.float64)
    log_s2, neg_log_q = log_s1.clone(), torch.zeros(N, dtype=torch.float64)
    drawn = torch.zeros(T, dtype=torch.long)
    active = torch.arange(T)
    while len(active):
        S = s_low if drawn[active[0]] == 0 else s_step
        per_task = torch.zeros(T, dtype=torch.long).index_fill_(0, active, S)
        draws = draw_paths(trie, per_task[sub.branch_task], "proposal")
        owner = draws.row_branch
        log_s1 = torch.logaddexp(log_s1, group_logsumexp(draws.log_w, owner, N))
        log_s2 = torch.logaddexp(log_s2, group_logsumexp(2 * draws.log_w, owner, N))
        neg_log_q.index_add_(0, owner, -draws.log_q)
        drawn[active] += S
        value, log_value, rel, per_sample_var = _task_statistics(sub, log_s1, log_s2, drawn)
        done = (per_sample_var < delta) if rule == "absolute" else (rel < rel_tol)
        finished = active[(done | (drawn >= s_high))[active]]
        log_n = drawn.double().clamp_min(1).log()[sub.branch_task]
        share = torch.exp(log_s1 - log_n - log_value[sub.branch_task]).nan_to_num(0.0)
        entropy = torch.zeros(T, dtype=torch.float64).index_add_(
            0, sub.branch_task, share * neg_log_q) / drawn.clamp_min(1)
        calls = sub.task_calls()
        for t in finished.tolist():
            results[int(tasks[t])] = GroundTruth(
                value[t].item(), log_value[t].item(), "surrogate", int(drawn[t]),
                rel[t].item() if value[t] > 0 else 0.0, int(calls[t]), entropy[t].item(),
                "importance")
        bar.update(len(finished))
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

