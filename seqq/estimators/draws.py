"""Drawing i.i.d. paths through the prefix trie, as many as asked or as many as a budget buys.

A draw is one path per task (whose query is eligible); it costs at most Σ (length − 1) calls, and
less when its prefixes are already in the trie. With a budget, draws come in rounds: the first
draws what the calls left surely pay for at full price; each later one asks for what
`ROUND_SHARE` of the calls left buys at the previous round's cost per draw, and pays its calls in
draw order, so a round that asks too much stops exactly where the budget runs out
(`allowance.py`). Rounds end when a task's budget buys less than one more draw at that cost or
at full price, a round was cut, or its draws reach a cap (by default `CAP_FACTOR` times what the
budget buys at full price, which bounds the compute when nearly every prefix is cached). So
cached prefixes buy more samples; the sample count then depends on earlier draws' paths (a
stopping rule, not a fixed S).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor

from seqq.errors import BudgetError
from seqq.estimators.allowance import Allowance
from seqq.estimators.batch import Batch
from seqq.estimators.trie import Policy, Trie
from seqq.models.batching import even_chunks

DEFAULT_SAMPLES = 1000
CAP_FACTOR = 100
ROUND_SHARE = 0.8  # a later round asks for what this share of the calls left buys at the previous
# round's cost per draw: rarely more than they pay for (a cut round wastes the calls its dropped
# draws spent on their first steps), and most of what is left, so a few rounds spend the budget
T = TypeVar("T")
ROW_ELEMENTS = 2**24  # rows × V per walk at most: bounds the memory of one batched step


@dataclass
class Draws:
    row_branch: Tensor  # [R] branch of each path
    log_w: Tensor  # [R] float64 log p(x)/q(x), −inf for paths outside the query's mass
    log_q: Tensor  # [R] float64 log q(x) (0 for dead paths)


def cost_per_draw(trie: Trie, eligible: Tensor) -> Tensor:
    """Full-price calls of one draw per task: its query's effective length − 1 where eligible."""
    batch = trie.batch
    return torch.zeros(batch.num_tasks, dtype=torch.long).index_add_(
        0, batch.branch_task, torch.where(eligible, batch.lengths - 1, 0))


def affordable(budgets: Sequence[int] | Tensor, batch: Batch, cost: Tensor) -> Tensor:
    """Draws per task that the calls left surely pay for (cost 0: the budget's worth)."""
    left = torch.as_tensor(list(budgets), dtype=torch.long) - batch.task_calls()
    return torch.where(cost > 0, left.clamp_min(0) // cost.clamp_min(1), left.clamp_min(0))


def draw_paths(trie: Trie, per_branch: Tensor, policy: Policy,
               allowance: Allowance | None = None) -> Draws:
    """`per_branch[b]` i.i.d. paths of every branch, walked in row chunks bounded in memory
    (most rows reach cached prefixes and call nothing; the model's own steps are cut to the
    device's row chunks by `CallCounter.step`). Prefixes shared across chunks are still paid
    once: the trie keeps them. With an `allowance` the calls are paid in draw order and
    only the draws before each task's cut are returned."""
    row_branch = torch.repeat_interleave(torch.arange(len(per_branch)), per_branch)
    charge = None if allowance is None else allowance.charge(row_branch, trie.batch.branch_task)
    size = max(1, ROW_ELEMENTS // trie.V)
    log_w, log_q = [], []
    for part in even_chunks(torch.arange(len(row_branch)), size):
        depth, leaf = trie.walk(row_branch[part], policy,
                                None if charge is None else charge.select(part))
        dead = leaf < 0
        depth, leaf = torch.where(dead, 0, depth), torch.where(dead, 0, leaf)
        w = trie.node_values(depth, leaf, "log_w")
        q = trie.node_values(depth, leaf, "log_q")
        log_w.append(torch.where(dead, -torch.inf, w).double())
        log_q.append(torch.where(dead, 0.0, q).double())
    empty = torch.zeros(0, dtype=torch.float64)
    draws = Draws(row_branch, torch.cat(log_w) if log_w else empty,
                  torch.cat(log_q) if log_q else empty)
    if charge is None:
        return draws
    keep = charge.kept()
    return Draws(draws.row_branch[keep], draws.log_w[keep], draws.log_q[keep])


def budget_rounds(batch: Batch, budgets: Sequence[int], samples: int | None, cost: Tensor,
                  needs: Tensor, too_small: Callable[[int], str],
                  draw: Callable[[Tensor, Allowance], T]) -> list[T]:
    """The rounds every sampler spends a budget in: `draw(m, allowance)` draws m[t] paths for
    each task, paying its calls from `allowance` in draw order (it drops the draws after the
    first one the calls left cannot pay for). The first round asks for what the calls left
    surely pay for at full price (`cost` per draw, per task); later ones for what
    `ROUND_SHARE` of them buys at the previous round's cost per draw, or at full price if that
    is more. A task stops when that is less than one draw, a round was cut (its budget is
    spent), or its draws reach the cap
    (`samples`, else `CAP_FACTOR` × the full-price count). Tasks in `needs` must afford one
    draw at full price, or `too_small(task)` is raised."""
    budget = torch.as_tensor(list(budgets), dtype=torch.long)
    full_price = affordable(budgets, batch, cost)
    cap = CAP_FACTOR * full_price if samples is None else torch.full_like(full_price, samples)
    unaffordable = (torch.minimum(full_price, cap) < 1) & needs
    if unaffordable.any():
        raise BudgetError(too_small(int(unaffordable.nonzero()[0])))
    drawn = torch.zeros(batch.num_tasks, dtype=torch.long)
    parts: list[T] = []
    active = needs.clone()
    ask = full_price
    while active.any():
        before = batch.task_calls()
        m = torch.where(active, torch.minimum(ask, cap - drawn), 0).clamp_min(0)
        allowance = Allowance.of(budget - before)
        parts.append(draw(m, allowance))
        kept = allowance.kept(m)
        drawn += kept
        # the next round at this round's cost per draw (caching makes each round cheaper)
        per_draw = (batch.task_calls() - before).double() / kept.clamp_min(1)
        left = budget - batch.task_calls()
        ask = torch.floor(ROUND_SHARE * left / per_draw.clamp_min(1 / CAP_FACTOR))
        ask = torch.maximum(ask.clamp_max(float(cap.max())).long(),  # never below full price
                            affordable(budgets, batch, cost))
        active &= (m > 0) & ~allowance.exhausted & (drawn < cap) & (cost > 0)
    return parts


def iid_draws(trie: Trie, budgets: Sequence[int] | None, samples: int | Tensor | None,
              policy: Policy,
              eligible: Tensor, too_small: Callable[[int], str]) -> Draws:
    """Draws for the eligible branches: `samples` each, or rounds until the budget is spent
    (then `samples`, if given, caps the draws). `too_small(task)` words the error when a budget
    cannot pay for a single draw."""
    batch = trie.batch
    task_of = batch.branch_task
    if budgets is None:  # `samples` may also be a tensor of draws per task
        count = torch.as_tensor(DEFAULT_SAMPLES if samples is None else samples)
        return draw_paths(trie, torch.where(eligible, count.expand(batch.num_tasks)[task_of], 0),
                          policy)
    needs = torch.zeros(batch.num_tasks, dtype=torch.bool).index_fill_(
        0, task_of[eligible], True)
    parts = budget_rounds(batch, budgets, samples, cost_per_draw(trie, eligible), needs,
                          too_small, lambda m, allowance: draw_paths(
                              trie, torch.where(eligible, m[task_of], 0), policy, allowance))
    if not parts:  # nothing to draw: every eligible residual is empty
        return draw_paths(trie, torch.zeros(len(task_of), dtype=torch.long), policy)
    return Draws(*(torch.cat([getattr(p, f) for p in parts])
                   for f in ("row_branch", "log_w", "log_q")))
