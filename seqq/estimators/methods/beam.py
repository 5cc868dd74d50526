"""Beam-search estimators: deterministic lower bounds p(B) on p(Q) from the final beams B, with
the gap bound p(Q) − p(B) ≤ 1 − q(B) (Thm. 1). The search itself is `engine/beam_search.py`."""

from __future__ import annotations

from dataclasses import dataclass

from seqq.errors import BudgetError
from seqq.estimators.engine.batch import Batch, tree_calls
from seqq.estimators.engine.beam_search import (
    Coverage,
    Rule,
    TailSplit,
    TopB,
    beam_search,
    beam_sizes,
    leaves,
)
from seqq.estimators.engine.budget import widths_for_budget
from seqq.estimators.engine.summary import BranchResult, log_one_minus
from seqq.estimators.method import POSITIVE, UNIT, Answer, Budgets, Guarantee, Method, Options, option

DEFAULT_MAX_WIDTH = 1500
DEFAULT_BEAM_WIDTH = 10


def lower_bound(batch: Batch, rule: Rule) -> Answer:
    """p(B) for the final beams: a deterministic lower bound on p(Q)."""
    N = len(batch.branch_task)
    levels = beam_search(batch, rule)
    log_pB, log_qB = leaves(levels, N)
    sizes = beam_sizes(levels, N)
    log_gap = log_one_minus(log_qB)  # Thm. 1: p(Q) - p(B) ≤ 1 - q(B)
    extras = [{"beam_sizes": sizes[b].tolist(), "gap_bound": log_gap[b].exp().sum().item()}
              for b in batch.task_branches()]
    return Answer(BranchResult(log_pB, None, None, None, log_pB, log_gap), True, extras)


@dataclass(frozen=True)
class TopOptions(Options):
    beam_width: int | None = option(None, POSITIVE, "beams per step (10; a budget's widest)")


def top_b(batch: Batch, budgets: Budgets, options: TopOptions, twist: None) -> Answer:
    """Top-B beam search; with a budget the beam is the widest that fits (`beam_width` caps it)."""
    if budgets is None:
        width = options.beam_width or DEFAULT_BEAM_WIDTH
    else:
        width = options.beam_width or int(min(tree_calls(batch).max().item(), max(budgets)))
    return lower_bound(batch, TopB(widths_for_budget(batch, budgets, width)))


@dataclass(frozen=True)
class CoverageOptions(Options):
    alpha: float = option(0.9, UNIT, "mass of q each step's beams cover")
    max_width: int | None = option(None, POSITIVE, "cap on beams per step (memory)")


def coverage(batch: Batch, budgets: Budgets, options: CoverageOptions, twist: None) -> Answer:
    """Coverage beam search; `max_width` optionally caps beams per step (memory), which voids
    the coverage guarantee at the steps where it binds (the gap bound still holds)."""
    if budgets is not None:
        raise BudgetError("controlled by alpha, not by a budget; pass alpha=")
    return lower_bound(batch, Coverage(options.alpha, cap=options.max_width))


@dataclass(frozen=True)
class TailOptions(Options):
    max_width: int = option(DEFAULT_MAX_WIDTH, POSITIVE, "beams per step at most")


def tail(batch: Batch, budgets: Budgets, options: TailOptions, twist: None) -> Answer:
    """Tail-splitting beam search (App. D's beam, without the hybrid's samples)."""
    return lower_bound(batch, TailSplit(widths_for_budget(batch, budgets, options.max_width)))


METHODS = (
    Method(name="beam", run=top_b, options=TopOptions, guarantee=Guarantee.LOWER_BOUND,
           certain_bounds=True),
    Method(name="coverage_beam", run=coverage, options=CoverageOptions,
           guarantee=Guarantee.LOWER_BOUND, certain_bounds=True, takes_budget=False),
    Method(name="tail_beam", run=tail, options=TailOptions, guarantee=Guarantee.LOWER_BOUND,
           certain_bounds=True),
)
