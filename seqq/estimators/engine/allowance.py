"""Budgets that hold exactly while draws come in large rounds.

A budgeted sampler draws its paths in rounds (`draws.budget_rounds`). A round may ask for more
draws than the calls left would pay for at full price, because cached prefixes and early
decisions make most draws cheaper. The round's draws are numbered 0, 1, 2, … per branch, and
every model call a step needs is paid in that order: when a task's calls run out, its draws from
the first one that could not be paid onwards are dropped (the *cut*). So the kept draws are
always the first n of an i.i.d. sequence, none of them is paid for twice, `model_calls` never
exceeds the budget, and a budget is spent in a few rounds instead of hundreds of ever smaller
ones (docs/decisions.md §2).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

NO_CUT = 2**62  # the cut of a task whose draws were all paid


@dataclass
class Allowance:
    """Calls each task may still spend in this round, and each task's cut (the first draw
    number dropped; `NO_CUT` while every draw so far was paid)."""

    left: Tensor  # [T] long
    cut: Tensor  # [T] long

    @classmethod
    def of(cls, left: Tensor) -> Allowance:
        left = left.clamp_min(0).long()
        return cls(left.clone(), torch.full_like(left, NO_CUT))

    def pay(self, task: Tensor, first_draw: Tensor) -> Tensor:
        """Pay for calls (one per entry, e.g. a new prefix), each needed first by draw number
        `first_draw` of `task`, in draw order per task. Returns which entries were paid; the
        first unpaid entry of a task moves its cut there."""
        T = len(self.left)
        if not len(task):
            return torch.zeros(0, dtype=torch.bool)
        by_draw = torch.argsort(first_draw, stable=True)
        order = by_draw[torch.argsort(task[by_draw], stable=True)]  # by task, then draw
        t, d = task[order], first_draw[order]
        counts = torch.bincount(t, minlength=T)
        rank = torch.arange(len(t)) - (torch.cumsum(counts, 0) - counts)[t]
        within = d < self.cut[t]  # entries of draws not dropped yet (they come first per task)
        paid = within & (rank < self.left[t])
        unpaid = within & ~paid
        self.cut.scatter_reduce_(0, t[unpaid], d[unpaid], reduce="amin")
        self.left -= torch.bincount(t[paid], minlength=T)
        out = torch.zeros(len(task), dtype=torch.bool)
        out[order] = paid
        return out

    def keeps(self, task: Tensor, draw: Tensor) -> Tensor:
        """Which draws are still kept (before their task's cut)."""
        return draw < self.cut[task]

    def kept(self, drawn: Tensor) -> Tensor:
        """Draws kept per task of `drawn` asked for."""
        return torch.minimum(drawn, self.cut)

    @property
    def exhausted(self) -> Tensor:
        """[T] tasks whose round was cut: their budget is spent as far as draw order allows."""
        return self.cut < NO_CUT

    def charge(self, row_branch: Tensor, branch_task: Tensor) -> Charge:
        """The charge of rows grouped by branch, each branch's rows in draw order."""
        counts = torch.bincount(row_branch, minlength=len(branch_task))
        draw = torch.arange(len(row_branch)) - (torch.cumsum(counts, 0) - counts)[row_branch]
        return Charge(self, branch_task[row_branch], draw)


@dataclass
class Charge:
    """An allowance and the rows of one round that spend it: each row's task and draw number."""

    allowance: Allowance
    task: Tensor  # [R] long
    draw: Tensor  # [R] long

    def continuing(self, rows: Tensor) -> Tensor:
        """Rows that each need one model call to go on (a rollout's next step): which of them
        are paid; the others (and every later draw of their task) are dropped."""
        paid = self.allowance.pay(self.task[rows], self.draw[rows])
        return paid & self.allowance.keeps(self.task[rows], self.draw[rows])

    def kept(self) -> Tensor:
        """[R] the rows whose draws were all paid."""
        return self.allowance.keeps(self.task, self.draw)

    def select(self, rows: Tensor) -> Charge:
        return Charge(self.allowance, self.task[rows], self.draw[rows])
