"""Importance sampling that stops on its own error: ground truth's `absolute` rule (the paper's,
stopped by its Eq. 66 rule) and its `sampled` rule (stopped at a relative standard error), both
drawn as the `importance` method draws (`iid_draws` from the restricted proposal, through the
prefix trie so shared prefixes are paid once, within the trie's byte cap at any vocabulary).
The `importance` method declares these samplers, and the every-horizon truths
(`seqq.estimators.horizons`), as its `Method.adaptive`; `seqq.estimators.ground_truth` asks
the registry for them, decides which tasks need them and groups them; this module draws and
stops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.budget import Draws, iid_draws
from seqq.estimators.engine.summary import group_logsumexp
from seqq.estimators.engine.trie import Trie
from seqq.estimators.estimate import GroundTruth

DRAW_AHEAD = 0.5  # a round of the absolute rule draws ahead by up to this share of the samples
# so far: ≤ 1/3 of a task's samples wasted past its stop, and ~7 rounds from 10k to 100k


def _checkpoints(s_low: int, s_step: int, s_high: int) -> list[int]:
    """The sample counts at which the paper's rule is checked: S_low, then every S_step more,
    up to the first count ≥ S_high."""
    counts = [s_low]
    while counts[-1] < s_high:
        counts.append(counts[-1] + s_step)
    return counts


def _round_end(checks: list[int], first: int, drawn: int) -> int:
    """Index of the last checkpoint a round starting at `drawn` samples (the next checkpoint
    being `checks[first]`) draws up to: at least the next, else as far as `DRAW_AHEAD`·drawn
    more samples reach."""
    last = first
    while last + 1 < len(checks) and checks[last + 1] - drawn <= DRAW_AHEAD * drawn:
        last += 1
    return last


def adaptive_importance(sub: Batch, tasks: torch.Tensor, results: list, delta: float,
                         s_low: int, s_step: int, s_high: int, bar, origin: str) -> None:
    """`rule="absolute"` for the tasks of `sub` (results[tasks[t]] for its task t).

    The rule is checked at the paper's checkpoints (`_checkpoints`), on the first n samples
    of each task, exactly as if they were drawn S_step at a time; but a round draws up to
    several checkpoints at once (`_round_end`), and a task stopping at one of them drops the
    samples after it. Samples are i.i.d., so where each task stops, and its estimate there,
    are distributed as under one-step rounds, while the model sees a few large batches
    instead of up to 90 small ones. The dropped samples' calls are spent and counted."""
    trie = Trie(sub)
    N = len(sub.branch_task)
    sums = _SampleSums.empty(N)
    checks = _checkpoints(s_low, s_step, s_high)
    active, first, drawn = torch.arange(sub.num_tasks), 0, 0
    while len(active):
        last = _round_end(checks, first, drawn)
        eligible = torch.isin(sub.branch_task, active)
        count = checks[last] - drawn
        running = sums.running(eligible.nonzero().flatten(), count,
                               iid_draws(trie, None, count, "proposal", eligible))
        for n in checks[first:last + 1]:
            at = running.at(n - drawn)
            statistics = _task_statistics(sub, at.log_s1, at.log_s2, n)
            finished = active[((statistics[3] < delta) | (n >= s_high))[active]]
            if len(finished):
                _record_importance(sub, tasks, finished, at, n, statistics, results, origin)
                bar.update(len(finished))
                active = active[~torch.isin(active, finished)]
        sums, first, drawn = running.at(checks[last] - drawn), last + 1, checks[last]


def streamed_importance(sub: Batch, tasks: torch.Tensor, results: list, rel_tol: float,
                         s_low: int, s_step: int, s_high: int, bar, origin: str) -> None:
    """`rule="sampled"` for the tasks of `sub`: S_low paths each from the restricted proposal,
    then rounds sized by the samples the unfinished tasks' relative SE says they still need
    (at least S_step), until it is below `rel_tol` or S_high paths are drawn. Paths are drawn
    through the prefix trie, so a prefix many paths share is paid once; its byte cap
    (`eviction.py`) bounds memory whatever the vocabulary."""
    trie = Trie(sub)
    N = len(sub.branch_task)
    sums = _SampleSums.empty(N)
    active, drawn, count = torch.arange(sub.num_tasks), 0, min(s_low, s_high)
    while len(active):
        eligible = torch.isin(sub.branch_task, active)
        draws = iid_draws(trie, None, count, "proposal", eligible)
        sums = sums.running(eligible.nonzero().flatten(), count, draws).at(count)
        drawn += count
        statistics = _task_statistics(sub, sums.log_s1, sums.log_s2, drawn)
        rel = statistics[2]
        finished = active[((rel < rel_tol) | (drawn >= s_high))[active]]
        if len(finished):
            _record_importance(sub, tasks, finished, sums, drawn, statistics, results, origin)
            bar.update(len(finished))
            active = active[~torch.isin(active, finished)]
        if len(active):
            count = next_round(rel[active], rel_tol, drawn, s_step, s_high)


def next_round(rel: torch.Tensor, rel_tol: float, drawn: int, s_step: int, s_high: int) -> int:
    """Paths per unfinished task in the next round of a rule that stops at a relative SE:
    what the median of their relative SEs `rel` after `drawn` paths says is still missing
    (SE ∝ 1/√n), at least S_step, and no more than S_high paths in all."""
    still = float(((rel / rel_tol) ** 2 - 1).clamp_max(s_high).median()) * drawn
    return int(min(max(s_step, still), s_high - drawn))


def _record_importance(sub: Batch, tasks: torch.Tensor, finished: torch.Tensor,
                       sums: _SampleSums, n: int, statistics: tuple[torch.Tensor, ...],
                       results: list, origin: str) -> None:
    """The truths of the `finished` tasks of `sub`, stopped after n samples with these sums:
    the estimate, its relative SE, the calls so far, and H(q) = E_q[−log q], each branch's
    mean −log q weighted by its share of p̂."""
    value, log_value, rel, _ = statistics
    log_share = sums.log_s1 - math.log(n) - log_value[sub.branch_task]
    entropy = torch.zeros(sub.num_tasks, dtype=torch.float64).index_add_(
        0, sub.branch_task, torch.exp(log_share).nan_to_num(0.0) * sums.neg_log_q) / n
    calls = sub.task_calls()
    for t in finished.tolist():
        results[int(tasks[t])] = GroundTruth(
            value[t].item(), log_value[t].item(), "estimated", n,
            rel[t].item() if value[t] > 0 else 0.0, int(calls[t]), entropy[t].item(), origin)


@dataclass(frozen=True)
class _SampleSums:
    """Per branch, over the samples so far: log Σw, log Σw² and Σ −log q."""

    log_s1: torch.Tensor
    log_s2: torch.Tensor
    neg_log_q: torch.Tensor

    @classmethod
    def empty(cls, branches: int) -> _SampleSums:
        none = torch.full((branches,), -math.inf, dtype=torch.float64)
        return cls(none, none.clone(), torch.zeros(branches, dtype=torch.float64))

    def running(self, branches: torch.Tensor, count: int, draws: Draws) -> _RunningSums:
        """These sums extended by a round's draws, `count` for each of `branches` (sorted),
        in draw order."""
        shape = (len(branches), count)
        log_w = draws.log_w.view(shape)
        return _RunningSums(self, branches, torch.logcumsumexp(log_w, 1),
                            torch.logcumsumexp(2 * log_w, 1),
                            torch.cumsum(-draws.log_q.view(shape), 1))


@dataclass(frozen=True)
class _RunningSums:
    """`_SampleSums` after each of a round's draws (column j: after j + 1 draws per branch)."""

    before: _SampleSums
    branches: torch.Tensor
    log_s1: torch.Tensor
    log_s2: torch.Tensor
    neg_log_q: torch.Tensor

    def at(self, count: int) -> _SampleSums:
        """The sums after the round's first `count` draws of each branch."""
        b, j = self.branches, count - 1
        log_s1, log_s2 = self.before.log_s1.clone(), self.before.log_s2.clone()
        neg_log_q = self.before.neg_log_q.clone()
        log_s1[b] = torch.logaddexp(log_s1[b], self.log_s1[:, j])
        log_s2[b] = torch.logaddexp(log_s2[b], self.log_s2[:, j])
        neg_log_q[b] += self.neg_log_q[:, j]
        return _SampleSums(log_s1, log_s2, neg_log_q)


def _task_statistics(batch: Batch, log_s1: torch.Tensor, log_s2: torch.Tensor,
                     drawn: int) -> tuple[torch.Tensor, ...]:
    """Per task: p̂, log p̂, relative standard error, and per-sample weight variance (Eq. 66),
    from per-branch running sums Σw and Σw² kept in log space (products' samples independent),
    after `drawn` samples of every branch."""
    T, task = batch.num_tasks, batch.branch_task
    log_n = math.log(drawn)
    log_mean = log_s1 - log_n  # per branch
    log_value = group_logsumexp(log_mean, task, T)
    shift = torch.where(torch.isfinite(log_value), log_value, 0.0)
    scaled_mean = torch.exp(log_mean - shift[task])
    scaled_var = (torch.exp(log_s2 - log_n - 2 * shift[task]) - scaled_mean**2).clamp_min(0)
    var = torch.zeros(T, dtype=torch.float64).index_add_(0, task, scaled_var)  # relative to p̂²
    rel = torch.where(torch.isfinite(log_value), (var / drawn).sqrt(), torch.inf)
    return log_value.exp(), log_value, rel, var * torch.exp(2 * shift)

