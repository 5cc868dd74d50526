"""Sampling estimators: importance sampling under the restricted proposal (Eq. 5-9), drawn
through the prefix trie; naive Monte Carlo from p and uniform Monte Carlo over Q (Eq. 7), rolled
out without a trie (their paths leave Q or ignore p, so a cached q-tree would not serve them).
All tasks' samples run in shared batches."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from seqq.errors import BudgetError
from seqq.estimators.batch import Batch
from seqq.estimators.draws import DEFAULT_SAMPLES, cost_per_draw, iid_draws
from seqq.estimators.estimate import Estimate
from seqq.estimators.rollout import Paths, Policy, Twist, rollout
from seqq.estimators.summary import BranchResult, segment_average, segment_mean, to_estimates
from seqq.estimators.trie import Trie

ROW_ELEMENTS = 2**26  # rows × V per chunk: bounds the memory of one batched step


def samples_for_budget(budgets: Sequence[int] | None, calls_per_sample: Tensor,
                       samples: int | None, method: str) -> Tensor:
    """Samples per task: as asked, or the most that fit the budget after the shared first call."""
    if budgets is None:
        return torch.full_like(calls_per_sample, samples or DEFAULT_SAMPLES)
    budgets_t = torch.as_tensor(list(budgets), dtype=torch.long)
    fitted = torch.where(calls_per_sample > 0,
                         (budgets_t - 1) // calls_per_sample.clamp_min(1), budgets_t)
    too_small = (fitted < 1).nonzero().flatten()
    if len(too_small):
        t = int(too_small[0])
        raise BudgetError(
            f"{method}: a budget of {int(budgets_t[t])} model calls cannot buy one sample "
            f"(that needs {1 + int(calls_per_sample[t])}); raise the budget"
        )
    return fitted


def sample_rows(batch: Batch, row_branch: Tensor, policy: Policy, masks: Tensor | None = None,
                lengths: Tensor | None = None, twist: Callable[[Tensor], Twist] | None = None
                ) -> Paths:
    """Roll out every row from the root of its task, in chunks that bound memory; `twist`
    makes the twist of a chunk's rows from their branches."""
    branch_task = batch.branch_task if masks is None else torch.arange(batch.num_tasks)
    chunk = max(1, ROW_ELEMENTS // batch.vocab_size)
    parts = []
    for rows in row_branch.split(chunk):
        tasks = branch_task[rows].to(batch.device)
        state = batch.counter.select(batch.root_state, tasks)
        parts.append(rollout(batch, rows, batch.root_log_probs[tasks], state, 0, policy,
                             masks, lengths, None if twist is None else twist(rows)))
    return Paths(*(torch.cat([getattr(p, f) for p in parts])
                   for f in ("tokens", "log_p", "log_q", "log_weight")))


def _per_branch_samples(batch: Batch, per_task: Tensor) -> Tensor:
    return torch.repeat_interleave(torch.arange(len(batch.branch_task)),
                                   per_task[batch.branch_task])


def _calls_per_sample(batch: Batch) -> Tensor:
    """Σ over a task's products of (length − 1): one sample of each costs this many calls."""
    return torch.zeros(batch.num_tasks, dtype=torch.long).index_add_(
        0, batch.branch_task, batch.lengths - 1)


def importance(batch: Batch, budgets: Sequence[int] | None, samples: int | None = None
               ) -> list[Estimate]:
    """p̂ = mean p(x)/q(x), x ~ q i.i.d.; the weight is Π_k p(V_k | x_<k).

    Paths are drawn through the prefix trie, so a prefix shared by several samples costs one
    call. `samples` per product (default 1000); with a budget, draws continue in rounds until
    the budget is spent (`samples` then caps the count), so duplicates buy extra samples.
    """
    trie = Trie(batch)
    eligible = torch.ones(len(batch.branch_task), dtype=torch.bool)
    draws = iid_draws(trie, budgets, samples, "proposal", eligible, lambda t: (
        f"importance: a budget of {int(budgets[t])} model calls cannot buy one sample "
        f"(that needs {1 + int(cost_per_draw(trie, eligible)[t])}); raise the budget"))
    N = len(batch.branch_task)
    log_value, variance, count = segment_mean(draws.log_w, draws.row_branch, N)
    entropy = segment_average(-draws.log_q, draws.row_branch, N)
    return to_estimates(batch, "importance",
                         BranchResult(log_value, variance, count.long(), entropy), False)


def weighted_samples(batch: Batch, budgets: Sequence[int] | None, samples: int | None,
                     method: str, twist: Callable[[Tensor], Twist] | None = None
                     ) -> list[Estimate]:
    """Importance sampling by independent rollouts under the restricted proposal or its twist
    (`twisted`); every sample pays its full K−1 calls. H(q) is reported only for the untwisted
    proposal: a twisted one's entropy is another quantity."""
    per_task = samples_for_budget(budgets, _calls_per_sample(batch), samples, method)
    row_branch = _per_branch_samples(batch, per_task)
    paths = sample_rows(batch, row_branch, "proposal", twist=twist)
    N = len(batch.branch_task)
    log_value, variance, count = segment_mean(paths.log_weight, row_branch, N)
    entropy = segment_average(-paths.log_q, row_branch, N) if twist is None else None
    return to_estimates(batch, method,
                        BranchResult(log_value, variance, count.long(), entropy), False)


def uniform(batch: Batch, budgets: Sequence[int] | None, samples: int | None = None
            ) -> list[Estimate]:
    """p̂ = |Q_i| · mean p(x), x ~ U(Q_i), per product (Eq. 7); unbiased but may exceed 1."""
    per_task = samples_for_budget(budgets, _calls_per_sample(batch), samples, "uniform")
    row_branch = _per_branch_samples(batch, per_task)
    paths = sample_rows(batch, row_branch, "uniform")
    within = torch.arange(batch.masks.shape[1]) < batch.lengths[:, None]  # free tail sums to 1
    log_size = (batch.masks.sum(-1).double().log().cpu() * within).sum(-1)  # log |Q_i|
    N = len(batch.branch_task)
    log_value, variance, count = segment_mean(paths.log_p + log_size[row_branch], row_branch, N)
    return to_estimates(batch, "uniform", BranchResult(log_value, variance, count.long(), None),
                        False)


def naive(batch: Batch, budgets: Sequence[int] | None, samples: int | None = None
          ) -> list[Estimate]:
    """p̂ = mean 1[x ∈ Q], x ~ p over the query's horizon; zero for rare queries."""
    T, K, V = batch.num_tasks, batch.masks.shape[1], batch.vocab_size
    horizon = torch.zeros(T, dtype=torch.long).scatter_reduce(
        0, batch.branch_task, batch.lengths, reduce="amax").clamp_min(1)
    per_task = samples_for_budget(budgets, horizon - 1, samples, "naive")
    row_task = torch.repeat_interleave(torch.arange(T), per_task)
    free = torch.ones(T, K, V, dtype=torch.bool, device=batch.device)
    paths = sample_rows(batch, row_task, "proposal", masks=free, lengths=horizon)
    hit = _inside(batch, row_task, paths.tokens)
    log_w = torch.where(hit, 0.0, -torch.inf).double()
    log_value, variance, count = segment_mean(log_w, row_task, T)
    # naive scores whole tasks, not products: each task's result sits at its own index
    groups = [torch.tensor([t]) if len(b) else b for t, b in enumerate(batch.task_branches())]
    return to_estimates(batch, "naive", BranchResult(log_value, variance, count.long(), None),
                        False, groups=groups)


def _inside(batch: Batch, row_task: Tensor, tokens: Tensor) -> Tensor:
    """Which sampled paths lie in their task's query: every (row, product of its task) pair is
    checked at once; positions a row did not sample (-1) are free in every product."""
    counts = torch.bincount(batch.branch_task, minlength=batch.num_tasks)
    first = torch.cumsum(counts, 0) - counts  # first branch of each task
    per_row = counts[row_task]
    pair_row = torch.repeat_interleave(torch.arange(len(row_task)), per_row)
    rank = torch.arange(len(pair_row)) - (torch.cumsum(per_row, 0) - per_row)[pair_row]
    pair_branch = (first[row_task[pair_row]] + rank).to(batch.device)
    pair_tokens = tokens[pair_row].to(batch.device)
    positions = torch.arange(tokens.shape[1], device=batch.device)
    allowed = batch.masks[pair_branch[:, None], positions, pair_tokens.clamp_min(0)]
    allowed |= pair_tokens < 0
    hits = allowed.all(-1).long().cpu()
    return torch.zeros(len(row_task), dtype=torch.long).index_add_(0, pair_row, hits) > 0
