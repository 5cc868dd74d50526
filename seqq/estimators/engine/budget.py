"""Turning a budget of model calls into draws, particles or beam widths: every method's one
way to spend a budget, and the one error when it cannot buy anything.

A draw is one path per task (whose query is eligible); it costs at most Σ (length − 1) calls, and
less when its prefixes are already in the trie. With a budget, draws come in rounds: the first
draws what the calls left surely pay for at full price; each later one asks for what
`ROUND_SHARE` of the calls left buys at the previous round's cost per draw, and pays its calls in
draw order, so a round that asks too much stops exactly where the budget runs out
(`allowance.py`). Rounds end when a task's budget buys less than one more draw at that cost or
at full price, a round was cut, or its draws reach a cap (by default `CAP_FACTOR` times what the
budget buys at full price, which bounds the compute when nearly every prefix is cached). So
cached prefixes buy more samples; the sample count then depends on earlier draws' paths (a
stopping rule, not a fixed S). Beams and particles are bought whole: the widest beam, or the
most particles, whose worst-case calls fit the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor

from seqq.errors import BudgetError
from seqq.estimators.engine.allowance import Allowance, Charge
from seqq.estimators.engine.batch import Batch, tree_calls
from seqq.estimators.engine.memory import rows_within
from seqq.estimators.engine.rollout import Paths
from seqq.estimators.engine.trie import Policy, Trie
from seqq.models.batching import even_chunks

DEFAULT_SAMPLES = 1000
CAP_FACTOR = 100
ROUND_SHARE = 0.8  # a later round asks for what this share of the calls left buys at the previous
# round's cost per draw: rarely more than they pay for (a cut round wastes the calls its dropped
# draws spent on their first steps), and most of what is left, so a few rounds spend the budget
T = TypeVar("T")


def cannot_buy(budget: int, needs: int, what: str = "one sample") -> BudgetError:
    """The error when a budget cannot pay for the least a method can do."""
    return BudgetError(f"a budget of {budget:,} model calls cannot buy {what} (that needs "
                       f"{needs:,}); raise the budget (budget=)")


@dataclass
class Draws:
    row_branch: Tensor  # [R] branch of each path
    log_w: Tensor  # [R] float64 log p(x)/q(x), −inf for paths outside the query's mass
    log_q: Tensor  # [R] float64 log q(x) (0 for dead paths)
    depth: Tensor | None = None  # [R] depth of each path's leaf in the trie (0 for dead paths)
    leaf: Tensor | None = None  # [R] its node at that depth (0 for dead paths)

    def take(self, keep: Tensor) -> Draws:
        """The draws `keep` selects (a mask or indices), leaves included."""
        return Draws(*(None if v is None else v[keep] for v in self._fields()))

    @classmethod
    def cat(cls, parts: Sequence[Draws]) -> Draws:
        """Several rounds' draws as one, in order (leaves kept where every round has them)."""
        fields = list(zip(*(p._fields() for p in parts), strict=True))
        return cls(*(None if any(v is None for v in f) else torch.cat(f) for f in fields))

    def _fields(self) -> tuple[Tensor | None, ...]:
        return self.row_branch, self.log_w, self.log_q, self.depth, self.leaf


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
    size = rows_within(trie.V)
    log_w, log_q, depths, leaves = [], [], [], []
    for part in even_chunks(torch.arange(len(row_branch)), size):
        depth, leaf = trie.walk(row_branch[part], policy,
                                None if charge is None else charge.select(part))
        dead = leaf < 0
        depth, leaf = torch.where(dead, 0, depth), torch.where(dead, 0, leaf)
        w = trie.node_values(depth, leaf, "log_w")
        q = trie.node_values(depth, leaf, "log_q")
        log_w.append(torch.where(dead, -torch.inf, w).double())
        log_q.append(torch.where(dead, 0.0, q).double())
        depths.append(depth)
        leaves.append(leaf)
    empty = torch.zeros(0, dtype=torch.float64)
    none = torch.zeros(0, dtype=torch.long)
    draws = Draws(row_branch, torch.cat(log_w) if log_w else empty,
                  torch.cat(log_q) if log_q else empty, torch.cat(depths) if depths else none,
                  torch.cat(leaves) if leaves else none)
    return draws if charge is None else draws.take(charge.kept())


def budget_rounds(batch: Batch, budgets: Sequence[int], samples: int | None, cost: Tensor,
                  needs: Tensor, draw: Callable[[Tensor, Allowance], T],
                  too_small: Callable[[int], str] | None = None) -> list[T]:
    """The rounds every sampler spends a budget in: `draw(m, allowance)` draws m[t] paths for
    each task, paying its calls from `allowance` in draw order (it drops the draws after the
    first one the calls left cannot pay for). The first round asks for what the calls left
    surely pay for at full price (`cost` per draw, per task); later ones for what
    `ROUND_SHARE` of them buys at the previous round's cost per draw, or at full price if that
    is more. A task stops when that is less than one draw, a round was cut (its budget is
    spent), or its draws reach the cap
    (`samples`, else `CAP_FACTOR` × the full-price count). Tasks in `needs` must afford one
    draw at full price, or `cannot_buy` is raised (worded by `too_small(task)` if given)."""
    budget = torch.as_tensor(list(budgets), dtype=torch.long)
    full_price = affordable(budgets, batch, cost)
    cap = CAP_FACTOR * full_price if samples is None else torch.full_like(full_price, samples)
    unaffordable = (torch.minimum(full_price, cap) < 1) & needs
    if unaffordable.any():
        t = int(unaffordable.nonzero()[0])
        if too_small is not None:
            raise BudgetError(too_small(t))
        raise cannot_buy(int(budgets[t]), 1 + int(cost[t]))
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
              policy: Policy, eligible: Tensor,
              too_small: Callable[[int], str] | None = None) -> Draws:
    """Draws for the eligible branches: `samples` each, or rounds until the budget is spent
    (then `samples`, if given, caps the draws). `too_small(task)` words the error when a budget
    cannot pay for a single draw (default: `cannot_buy`)."""
    batch = trie.batch
    task_of = batch.branch_task
    if budgets is None:  # `samples` may also be a tensor of draws per task
        count = torch.as_tensor(DEFAULT_SAMPLES if samples is None else samples)
        return draw_paths(trie, torch.where(eligible, count.expand(batch.num_tasks)[task_of], 0),
                          policy)
    needs = torch.zeros(batch.num_tasks, dtype=torch.bool).index_fill_(
        0, task_of[eligible], True)
    parts = budget_rounds(batch, budgets, samples, cost_per_draw(trie, eligible), needs,
                          lambda m, allowance: draw_paths(
                              trie, torch.where(eligible, m[task_of], 0), policy, allowance),
                          too_small)
    if not parts:  # nothing to draw: every eligible residual is empty
        return draw_paths(trie, torch.zeros(len(task_of), dtype=torch.long), policy)
    return Draws.cat(parts)


def draw_in_rounds(batch: Batch, budgets: Sequence[int] | None, samples: int | None,
                   draw: Callable[[Tensor, Charge | None], Paths]) -> tuple[Tensor, Paths]:
    """Independent paths per branch rolled out without the trie, `draw(row_branch, charge)`
    rolling them out: `samples` each, or, with a budget, `budget_rounds` until it is spent
    (paths decided early cost less, so later rounds buy more; `samples` then caps the count).
    Returns each kept path's branch and the paths."""
    if budgets is None:
        rows = _per_branch_samples(batch, torch.full((batch.num_tasks,),
                                                     samples or DEFAULT_SAMPLES))
        return rows, draw(rows, None)
    cost = _calls_per_sample(batch)
    needs = torch.zeros(batch.num_tasks, dtype=torch.bool).index_fill_(0, batch.branch_task, True)

    def draw_round(per_task: Tensor, allowance: Allowance) -> tuple[Tensor, Paths]:
        rows = _per_branch_samples(batch, per_task)
        charge = allowance.charge(rows, batch.branch_task)
        paths = draw(rows, charge)
        keep = charge.kept()
        return rows[keep], paths.take(keep)

    parts = budget_rounds(batch, budgets, samples, cost, needs, draw_round)
    return (torch.cat([r for r, _ in parts]) if parts else torch.zeros(0, dtype=torch.long),
            Paths.cat([p for _, p in parts]))


def _per_branch_samples(batch: Batch, per_task: Tensor) -> Tensor:
    return torch.repeat_interleave(torch.arange(len(batch.branch_task)),
                                   per_task[batch.branch_task])


def _calls_per_sample(batch: Batch) -> Tensor:
    """At most (effective length − 1) calls buy one sample of a task (0 if its query is empty)."""
    return torch.zeros(batch.num_tasks, dtype=torch.long).index_add_(
        0, batch.branch_task, batch.lengths - 1)


def widths_for_budget(batch: Batch, budgets: Sequence[int] | None, width: int,
                      least: str = "a beam of width 1") -> Tensor:
    """Beam width (or particles) per branch: `width`, or the widest beam whose calls fit each
    task's budget (at most one call per kept prefix and step)."""
    if budgets is None:
        return torch.full((len(batch.branch_task),), width, dtype=torch.long)
    budgets_t = torch.as_tensor(list(budgets), dtype=torch.float64)
    low = torch.ones(batch.num_tasks, dtype=torch.long)
    narrowest = tree_calls(batch, 1)
    if (narrowest > budgets_t).any():
        t = int((narrowest > budgets_t).nonzero()[0])
        raise cannot_buy(int(budgets_t[t]), int(narrowest[t]), least)
    high = torch.full_like(low, int(min(width, budgets_t.max().item())))  # a level costs ≤ width
    while (low < high).any():  # largest width with calls ≤ budget, per task
        mid = (low + high + 1) // 2
        fits = tree_calls(batch, mid[batch.branch_task].double()) <= budgets_t
        low = torch.where(fits & (low < high), mid, low)
        high = torch.where(~fits & (low < high), mid - 1, high)
    return low[batch.branch_task]


def particles_within(batch: Batch, reach: Tensor, budgets: Tensor, cap: int, depth: int,
                     branch: Tensor, particles: Tensor) -> Tensor:
    """The most particles per branch (≤ cap, ≥ now; one number per task) whose worst-case calls
    from here on fit what is left of each task's budget: P particles evaluate at most
    min(P, undecided prefixes of length j) prefixes of each length j > depth."""
    ahead = reach[:, depth + 1:]
    tasks, task_of = torch.unique(batch.branch_task, return_inverse=True)
    left = (budgets[tasks] - batch.task_calls()[tasks]).double()  # ids of this batch
    low = torch.zeros(len(tasks), dtype=particles.dtype).scatter_reduce(
        0, task_of, particles, reduce="amax")
    high = torch.full_like(low, cap).maximum(low)
    while (low < high).any():  # largest count whose worst case fits, per task
        mid = (low + high + 1) // 2
        calls = torch.minimum(ahead, mid[task_of, None].double()).sum(-1)
        fits = torch.zeros(len(tasks), dtype=torch.float64).index_add_(0, task_of, calls) <= left
        low = torch.where(fits & (low < high), mid, low)
        high = torch.where(~fits & (low < high), mid - 1, high)
    return low[task_of]
