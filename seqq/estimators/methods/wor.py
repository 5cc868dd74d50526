"""Sampling without replacement over Q through the prefix trie (UniqueRandomizer, 004) and the
sum-and-sample estimator over its draws (`engine/sum_and_sample.py`).

`wor` grows its head with batched WOR rounds (stochastic beam search over the trie's residual
masses), then draws the tail; `hindsight_gumbel` spends everything on WOR draws and weights
them with the Hindsight Gumbel Estimator; `wor_until` (`wor`'s declared `until`: ground truth,
`wor(rel_tol=)`) grows the head and the tail in doubling stages until a relative standard error
is met.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.errors import QueryError
from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.budget import (
    Draws,
    affordable,
    cannot_buy,
    cost_per_draw,
    iid_draws,
)
from seqq.estimators.engine.sum_and_sample import combine, head_plus_tail
from seqq.estimators.engine.summary import BranchResult, group_logsumexp, to_estimates
from seqq.estimators.engine.trie import Trie
from seqq.estimators.engine.trie.restricted import RestrictedLogQ, restricted_entropy
from seqq.estimators.engine.twist import Messages
from seqq.estimators.method import (
    OPEN_UNIT,
    POSITIVE,
    Answer,
    Budgets,
    Guarantee,
    Method,
    Options,
    option,
)

DEFAULT_WOR_SAMPLES = 100
DEFAULT_MAX_CALLS = 1_000_000


def _grow_head(trie: Trie, draws_per_branch: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """One WOR round: draw, remove from the residual, return (depth, leaf, branch) in order."""
    depths, leaves, branch = trie.sample_without_replacement(draws_per_branch)
    trie.remove([(d, leaves[depths == d]) for d in torch.unique(depths).tolist()])
    return depths, leaves, branch


def _wor_rounds(trie: Trie, budgets: Sequence[int] | None, samples: int | None
                ) -> list[tuple[Tensor, Tensor, Tensor]]:
    """WOR rounds: `samples` draws per query in one round, or, with a budget, rounds that
    each draw what the calls left pay for at full price (`samples` then caps the draws)."""
    batch = trie.batch
    alive = torch.ones(len(batch.branch_task), dtype=torch.bool)
    if budgets is None:
        count = DEFAULT_WOR_SAMPLES if samples is None else samples
        return [_grow_head(trie, torch.where(alive, count, 0))]
    cost = cost_per_draw(trie, alive)
    m = affordable(budgets, batch, cost)
    if (m < 1).any():
        t = int((m < 1).nonzero()[0])
        raise cannot_buy(int(budgets[t]), 1 + int(cost[t]))
    rounds, drawn = [], torch.zeros_like(m)
    cap = torch.full_like(m, samples) if samples is not None else None
    while (m > 0).any() and (cost > 0).any():
        if cap is not None:
            m = torch.minimum(m, cap - drawn)
        rounds.append(_grow_head(trie, m[batch.branch_task].clamp_min(0)))
        drawn += m
        exhausted = torch.zeros(batch.num_tasks, dtype=torch.bool).index_fill_(
            0, batch.branch_task[~torch.isfinite(trie.root_residual())], True)
        m = torch.where(exhausted | (cost == 0), 0, affordable(budgets, batch, cost))
    return rounds


def _head_sums(trie: Trie, rounds: list[tuple[Tensor, Tensor, Tensor]], N: int
               ) -> tuple[Tensor, Tensor]:
    """log p(S) and Σ_{x∈S} −q log q per branch over all WOR draws."""
    log_head = torch.full((N,), -math.inf, dtype=torch.float64)
    entropy = torch.zeros(N, dtype=torch.float64)
    for depths, leaves, branch in rounds:
        log_p = trie.node_values(depths, leaves, "log_p")
        log_q = trie.node_values(depths, leaves, "log_q")
        log_head = torch.logaddexp(log_head, group_logsumexp(log_p, branch, N))
        entropy.index_add_(0, branch, -log_q.exp() * log_q)
    return log_head, entropy


@dataclass(frozen=True)
class WorOptions(Options):
    samples: int | None = option(None, POSITIVE, "WOR draws per query for the head (100)")
    tail_samples: int | None = option(None, POSITIVE, "i.i.d. tail draws (as many as samples)")
    rel_tol: float | None = option(None, OPEN_UNIT, "run until this relative standard error")

    def check_with(self, method: str, twisted: bool) -> None:
        if twisted and self.rel_tol is not None:
            raise QueryError(f"{method}: rel_tol and surrogate cannot be combined")


def wor(batch: Batch, budgets: Budgets, options: WorOptions, twist: Messages | None) -> Answer:
    """Sum-and-sample over a WOR head: p(S) + (1 − q(S))·mean w, tail drawn from q(· | ∉ S).

    Options: `samples` WOR draws per query for the head (default 100) and `tail_samples`
    i.i.d. tail draws (default as many). With a budget, the head grows in WOR rounds of an
    eighth of the budget for as long as they pay: a round continues the head only if the last
    one shrank the residual R enough that R²/(calls left) — the tail's variance per call —
    fell; the rest of the budget (at least a fifth) goes to the tail, drawn until spent. The
    head may be chosen any way at all, so this adaptivity keeps the estimate unbiased. Exact,
    with stderr 0, once the head exhausts Q. Bounds: [p(S), p(S) + 1 − q(S)].

    `rel_tol` instead runs doubling stages (`wor_until`) until the relative standard error is
    below it, the head exhausts Q, or the budget (default 10^6 calls) is spent; stopping on
    the observed error makes that mode a (slightly biased) estimate, as adaptive IS is.

    With a twist, head and tail are drawn from the twisted proposal q̃ instead of q: the same
    estimator with q̃'s masses, still unbiased.
    """
    if options.rel_tol is not None:
        limit = torch.as_tensor(list(budgets) if budgets is not None
                                else [DEFAULT_MAX_CALLS] * batch.num_tasks)
        return Answer(wor_until(batch, options.rel_tol, limit,
                                draws=options.samples or DEFAULT_WOR_SAMPLES)[0])
    return _wor(batch, budgets, options.samples, options.tail_samples, twist)


def _wor(batch: Batch, budgets: Sequence[int] | None, samples: int | None,
         tail_samples: int | None, messages: Messages | None) -> Answer:
    trie = Trie(batch, messages)
    N = len(batch.branch_task)
    if budgets is None:
        count = DEFAULT_WOR_SAMPLES if samples is None else samples
        rounds = [_grow_head(trie, torch.full((N,), count))]
        tail_samples = tail_samples or count
    else:
        rounds = _adaptive_head(trie, budgets)
    log_head, head_entropy = _head_sums(trie, rounds, N)
    result, draws = head_plus_tail(trie, budgets, tail_samples, log_head, head_entropy, lambda t: (
        f"a budget of {int(budgets[t])} model calls leaves none for a tail sample after "
        "the first head round; raise the budget (budget=)"))
    head_sizes = torch.bincount(torch.cat([r[2] for r in rounds]) if rounds else
                                torch.zeros(0, dtype=torch.long), minlength=N)
    extras = [{"head_size": int(head_sizes[b].sum())} for b in batch.task_branches()]
    return Answer(result, extras=extras, weights=(draws.row_branch, draws.log_w))


def _adaptive_head(trie: Trie, budgets: Sequence[int]) -> list[tuple[Tensor, Tensor, Tensor]]:
    """Head rounds of budget/8 calls (at full price) while they shrink R²/(calls left)."""
    batch = trie.batch
    T = batch.num_tasks
    total = torch.as_tensor(list(budgets), dtype=torch.long)
    cost = cost_per_draw(trie, torch.ones(len(batch.branch_task), dtype=torch.bool))
    reserve = total // 5
    active = cost > 0
    rounds = []
    while active.any():
        left = total - batch.task_calls()
        room = torch.minimum(total // 8, left - reserve).clamp_min(0)
        m = torch.where(active, room // cost.clamp_min(1), 0)
        if not (m > 0).any():
            break
        log_R = group_logsumexp(trie.root_residual(), batch.branch_task, T)
        before = batch.task_calls().clone()
        rounds.append(_grow_head(trie, m[batch.branch_task]))
        shrink = torch.exp(2 * (group_logsumexp(trie.root_residual(), batch.branch_task, T)
                                - log_R)).nan_to_num(0.0)
        spent = (batch.task_calls() - before).double()
        worth = shrink < 1 - spent / left.double().clamp_min(1)
        active &= (m > 0) & worth & torch.isfinite(log_R)
    return rounds


def _in_order(rounds: list[tuple[Tensor, Tensor, Tensor]]) -> tuple[Tensor, Tensor, Tensor]:
    """All draws grouped by branch, each branch's draws in sampling order (round, then Gumbel)."""
    if not rounds:
        empty = torch.zeros(0, dtype=torch.long)
        return empty, empty, empty
    depths, leaves, branch = (torch.cat([r[i] for r in rounds]) for i in range(3))
    order = torch.sort(branch, stable=True).indices
    return depths[order], leaves[order], branch[order]


def _padded(values: Tensor, branch: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Values of draws grouped by branch laid out as [groups, longest] (zeros after the end)."""
    _, sizes = torch.unique_consecutive(branch, return_counts=True)
    group = torch.repeat_interleave(torch.arange(len(sizes)), sizes)
    column = torch.arange(len(branch)) - (torch.cumsum(sizes, 0) - sizes)[group]
    padded = torch.zeros(len(sizes), int(sizes.max()), dtype=torch.float64)
    padded[group, column] = values
    return padded, group, column


def _exclusive_prefix_and_suffix(log_p: Tensor, log_q: Tensor, branch: Tensor,
                                 shift: int = 0) -> tuple[Tensor, Tensor]:
    """log Σ_{j<i} p_j and log Σ_{j≥i+shift} q_j within each branch, summed in order (the
    suffix is summed from the end, so small residuals are not lost to cancellation)."""
    if not len(branch):
        return log_p, log_q
    p, group, column = _padded(log_p.exp(), branch)
    q, _, _ = _padded(log_q.exp(), branch)
    before = (p.cumsum(1) - p)[group, column]
    suffix = q.flip(1).cumsum(1).flip(1)
    suffix = torch.cat([suffix[:, shift:], torch.zeros(len(q), shift, dtype=torch.float64)], 1)
    return before.log(), suffix[group, column].log()


@dataclass(frozen=True)
class HindsightOptions(Options):
    samples: int | None = option(None, POSITIVE, "WOR draws per query (100)")
    repeats: int = option(1, POSITIVE, "Gumbels κ averaged (repeated HGE)")


def hindsight_gumbel(batch: Batch, budgets: Budgets, options: HindsightOptions,
                     twist: None) -> Answer:
    """The Hindsight Gumbel Estimator (004) over WOR draws s_1..s_n: Σ p(s_i)/q_κ(s_i),
    q_κ(s) = 1 − exp(−q(s)·e^{−κ}), where κ is the (n+1)-th Gumbel of the sampling process,
    drawn in hindsight from the residual masses R_0 = 1, R_1, …, R_n:
    e^{−κ} = Σ_{i=0}^{n} E_i / R_i with E_i ~ Exp(1). `repeats` > 1 averages several κ
    (repeated HGE). Options: `samples` draws per query (default 100), or all the budget's
    calls in WOR rounds. Exact once the draws exhaust Q; bounds [p(S), p(S) + 1 − q(S)].
    """
    trie = Trie(batch)
    N = len(batch.branch_task)
    depths, leaves, branch = _in_order(_wor_rounds(trie, budgets, options.samples))
    log_p = trie.node_values(depths, leaves, "log_p")
    log_q = trie.node_values(depths, leaves, "log_q")
    log_head = group_logsumexp(log_p, branch, N)
    # R_i after draw i = final residual + the q-mass of the draws after i (sums, no cancellation)
    log_after = _exclusive_prefix_and_suffix(log_p, log_q, branch, shift=1)[1]
    log_R = torch.logaddexp(trie.root_residual()[branch], log_after)  # R_i, i = 1..n
    count = torch.bincount(branch, minlength=N)
    generator = batch.generator
    values = []
    for _ in range(options.repeats):
        e0 = _exponential(N, generator)  # E_0 / R_0 with R_0 = 1
        ei = _exponential(len(branch), generator)
        inv = torch.where(torch.isneginf(log_R), math.inf, ei * torch.exp(-log_R))
        scale = e0.clone().index_add_(0, branch, inv)  # e^{−κ} per branch
        q_kappa = -torch.expm1(-log_q.exp() * scale[branch])
        terms = torch.exp(log_p - torch.log(q_kappa))
        values.append(torch.zeros(N, dtype=torch.float64).index_add_(0, branch, terms))
    value = torch.stack(values).mean(0)
    log_value = torch.where(count > 0, value.log(), -math.inf)
    return Answer(BranchResult(log_value, None, count, None, log_head, trie.root_residual()))


def _exponential(n: int, generator: torch.Generator) -> Tensor:
    u = torch.rand(n, generator=generator, device=generator.device, dtype=torch.float64).cpu()
    return -torch.log1p(-u)


def wor_until(batch: Batch, rel_tol: float, max_calls: int | Tensor, draws: int = 100,
              on_stage: Callable[[int], None] | None = None, twist: Messages | None = None,
              projected: bool = False, min_tail: int = 0) -> tuple[BranchResult, Tensor]:
    """Sum-and-sample in doubling stages on one trie until each task's relative standard error
    is below `rel_tol`, its head exhausts Q (exact), or its calls reach `max_calls`.

    Stage j adds up to draws·2^j WOR draws per query to the head and draws as many tail
    samples (each at most half of the calls left, at full price); a task stops once less than
    a base stage (`draws`) fits. Tail draws stay valid until
    the head changes, so they accumulate; once a head stage shrinks the residual R by less than
    a third, the head is frozen and the method becomes importance sampling from the residual
    (high-entropy queries, where WOR draws rarely pay). Stopping on the observed error makes
    this an estimate slightly biased, like adaptive IS. Returns each task's estimate and
    whether it met the target (per branch; `to_estimates` sums them per task);
    `on_stage(done)` reports progress (tasks finished so far).

    With a `twist` (a surrogate's messages) head and tail are drawn from the twisted q̃ (twisted
    WOR, still exact on exhaustion) and the entropy reported is still the restricted q's,
    H(q), estimated from q̃'s draws (`restricted_entropy`). `projected`: once a task's head is
    frozen, each stage draws the tail samples its observed error says are still missing
    (`_projected`) instead of doubling, so the last stage overshoots the target less; and a
    task's error counts only once `min_tail` valid tail draws back it (a few hundred draws
    can miss the rare large weights that dominate the variance, and understate it)."""
    trie = Trie(batch, twist)
    restricted = None if twist is None else RestrictedLogQ(trie)
    N, T = len(batch.branch_task), batch.num_tasks
    task = batch.branch_task
    limit = torch.as_tensor(max_calls).expand(T)
    active = torch.ones(T, dtype=torch.bool)
    frozen = torch.zeros(T, dtype=torch.bool)
    met = torch.zeros(T, dtype=torch.bool)
    final: BranchResult | None = None
    per_task = batch.task_branches()
    rounds: list[tuple[Tensor, Tensor, Tensor]] = []
    tails: list[tuple[int, Draws]] = []
    head_stage = torch.zeros(N, dtype=torch.long)  # tail draws older than this are stale
    cost = cost_per_draw(trie, torch.ones(N, dtype=torch.bool)).clamp_min(1)
    ask = torch.full((T,), draws, dtype=torch.long)  # draws each task asks of the next stage
    stage = 0
    while active.any():
        room = (limit - batch.task_calls()).clamp_min(0) // (2 * cost)
        count = torch.where(active, torch.minimum(room, ask), 0)
        if stage == 0 and (count < 1).any():
            t = int((count < 1).nonzero()[0])
            raise cannot_buy(int(limit[t]), 1 + 2 * int(cost[t]), "one head and one tail draw")
        active &= (count > 0) & ((room >= draws) | (stage == 0))  # no dribbling stages
        if not active.any():
            break
        grow = active & ~frozen
        if grow.any():
            log_R = group_logsumexp(trie.root_residual(), task, T)
            rounds.append(_grow_head(trie, torch.where(grow, count, 0)[task]))
            shrink = torch.exp(group_logsumexp(trie.root_residual(), task, T) - log_R)
            frozen |= grow & (shrink.nan_to_num(0.0) > 2 / 3)
            head_stage = torch.where(grow[task], stage, head_stage)
        log_rest = trie.root_residual()
        eligible = active[task] & torch.isfinite(log_rest)
        tails.append((stage, iid_draws(trie, None, count, "residual", eligible, str)))
        current = Draws.cat([d.take(stage_of >= head_stage[d.row_branch]) for stage_of, d in
                             ((d.row_branch.new_full(d.row_branch.shape, s), d)
                              for s, d in tails)])
        log_head, head_entropy = _head_sums(trie, rounds, N)
        result = combine(log_head, head_entropy, log_rest, current)
        if restricted is not None:
            result.entropy = restricted_entropy(restricted, rounds, current.depth, current.leaf,
                                                current.row_branch, current.log_q, N)
        estimates = to_estimates(batch, "wor", result, False)
        final = result if final is None else _updated(final, result, torch.cat(
            [per_task[t] for t in active.nonzero().flatten().tolist()]))
        tail_count = torch.zeros(T, dtype=torch.long).index_add_(
            0, task[current.row_branch], torch.ones_like(current.row_branch))
        for t in active.nonzero().flatten().tolist():
            e = estimates[t]
            exact = e.stderr == 0.0
            precise = (e.stderr is not None and e.value > 0 and e.stderr < rel_tol * e.value
                       and tail_count[t] >= min_tail)
            if exact or precise or e.value == 0.0:
                met[t] = exact or precise
                active[t] = False
        stage += 1
        ask = torch.full((T,), draws * 2 ** min(stage, 30), dtype=torch.long)
        if projected:
            ask = torch.where(frozen, _projected(estimates, tail_count, rel_tol, draws,
                                                 min_tail), ask)
        if on_stage is not None:
            on_stage(int((~active).sum()))
    return final, met  # type: ignore[return-value]


PROJECTED_MARGIN = 1.2  # a projected stage draws this many times the samples its error asks for


def _projected(estimates: list, tail_count: Tensor, rel_tol: float, draws: int,
               min_tail: int = 0) -> Tensor:
    """Tail draws per task that its relative standard error r after n valid draws says meet
    `rel_tol`: n·(MARGIN·(r/rel_tol)² − 1), and at least what reaches `min_tail`; at least
    `draws` and at most n more (the stage never more than doubles the tail, so a noisy early
    error cannot overshoot far)."""
    out = torch.full((len(estimates),), draws, dtype=torch.long)
    for t, e in enumerate(estimates):
        n = int(tail_count[t])
        if e.stderr and e.value > 0 and n:
            need = n * (PROJECTED_MARGIN * (e.stderr / (rel_tol * e.value)) ** 2 - 1)
            out[t] = min(max(math.ceil(need), min_tail - n, draws), n)
    return out


def _updated(final: BranchResult, result: BranchResult, branches: Tensor) -> BranchResult:
    """`final` with the entries of `branches` taken from `result` (a stage's estimate)."""
    for name in ("log_value", "variance", "samples", "entropy", "log_lower", "log_gap"):
        getattr(final, name)[branches] = getattr(result, name)[branches]
    return final


METHODS = (
    Method(name="wor", run=wor, options=WorOptions, guarantee=Guarantee.UNBIASED,
           surrogate="optional", certain_bounds=True, until=wor_until),
    Method(name="hindsight_gumbel", run=hindsight_gumbel, options=HindsightOptions,
           guarantee=Guarantee.UNBIASED, certain_bounds=True, replicates=8),
)
