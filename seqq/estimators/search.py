"""Beam-search estimators (lower bounds) and the beam + importance-sampling hybrid (§4.2, App. D).

The hybrid keeps the tail-splitting beam set B exactly and importance-samples Q∖B from
q_B = q(· | ∉ B): the beam tree becomes the prefix trie, B's leaves are removed from it (which
is App. D's pruning), and samples walk the trie, paying only for prefixes outside it. The weight
of a tail sample is p(x)·(1 − q(B)) / q(x) (docs/decisions.md §5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch
from torch import Tensor

from seqq.errors import BudgetError
from seqq.estimators.batch import Batch, tree_calls
from seqq.estimators.beam import (
    Coverage,
    Level,
    Rule,
    TailSplit,
    TopB,
    beam_search,
    beam_sizes,
    leaves,
)
from seqq.estimators.estimate import Estimate
from seqq.estimators.summary import BranchResult, to_estimates
from seqq.estimators.trie import Trie
from seqq.estimators.twisted import Messages, with_surrogate
from seqq.estimators.wor import head_plus_tail, log_one_minus
from seqq.models.automaton import ContextAutomaton

DEFAULT_MAX_WIDTH = 1500
DEFAULT_TAIL_SAMPLES = 100
DEFAULT_BEAM_WIDTH = 10


def widths_for_budget(batch: Batch, budgets: Sequence[int] | None, width: int,
                      method: str) -> Tensor:
    """Beam width per branch: `width`, or the widest beam whose calls fit each task's budget."""
    if budgets is None:
        return torch.full((len(batch.branch_task),), width, dtype=torch.long)
    budgets_t = torch.as_tensor(list(budgets), dtype=torch.float64)
    low = torch.ones(batch.num_tasks, dtype=torch.long)
    narrowest = tree_calls(batch, 1)
    if (narrowest > budgets_t).any():
        t = int((narrowest > budgets_t).nonzero()[0])
        raise BudgetError(f"{method}: a budget of {int(budgets_t[t])} model calls cannot pay for "
                          f"a beam of width 1 ({int(narrowest[t])} calls)")
    high = torch.full_like(low, int(min(width, budgets_t.max().item())))  # a level costs ≤ width
    while (low < high).any():  # largest width with calls ≤ budget, per task
        mid = (low + high + 1) // 2
        fits = tree_calls(batch, mid[batch.branch_task].double()) <= budgets_t
        low = torch.where(fits & (low < high), mid, low)
        high = torch.where(~fits & (low < high), mid - 1, high)
    return low[batch.branch_task]


def beam(batch: Batch, method: str, rule: Rule) -> list[Estimate]:
    """p(B) for the final beams: a deterministic lower bound on p(Q)."""
    N = len(batch.branch_task)
    levels = beam_search(batch, rule)
    log_pB, log_qB = leaves(levels, N)
    sizes = beam_sizes(levels, N)
    log_gap = log_one_minus(log_qB)  # Thm. 1: p(Q) - p(B) ≤ 1 - q(B)
    extras = [{"beam_sizes": sizes[b].tolist(), "gap_bound": log_gap[b].exp().sum().item()}
              for b in batch.task_branches()]
    return to_estimates(batch, method, BranchResult(log_pB, None, None, None, log_pB, log_gap),
                        True, extras)


def top_b(batch: Batch, budgets: Sequence[int] | None, beam_width: int | None = None
          ) -> list[Estimate]:
    """Top-B beam search; with a budget the beam is the widest that fits (`beam_width` caps it)."""
    if budgets is None:
        width = beam_width or DEFAULT_BEAM_WIDTH
    else:
        width = beam_width or int(min(tree_calls(batch).max().item(), max(budgets)))
    return beam(batch, "beam", TopB(widths_for_budget(batch, budgets, width, "beam")))


def coverage(batch: Batch, budgets: Sequence[int] | None, alpha: float = 0.9,
             max_width: int | None = None) -> list[Estimate]:
    """Coverage beam search; `max_width` optionally caps beams per step (memory), which voids
    the coverage guarantee at the steps where it binds (the gap bound still holds)."""
    if budgets is not None:
        raise BudgetError("coverage_beam is controlled by alpha, not by a budget; pass alpha=")
    if not 0 < alpha <= 1:
        raise ValueError(f"coverage alpha must lie in (0, 1], got {alpha}")
    return beam(batch, "coverage_beam", Coverage(alpha, cap=max_width))


def tail(batch: Batch, budgets: Sequence[int] | None, max_width: int = DEFAULT_MAX_WIDTH
         ) -> list[Estimate]:
    widths = widths_for_budget(batch, budgets, max_width, "tail_beam")
    return beam(batch, "tail_beam", TailSplit(widths))


def hybrid(batch: Batch, budgets: Sequence[int] | None, samples: int | None = None,
           max_width: int = DEFAULT_MAX_WIDTH, surrogate: ContextAutomaton | None = None
           ) -> list[Estimate]:
    """p(B) from tail-splitting beam search + IS of p(Q∖B) under the pruned proposal q_B.

    The beam tree becomes the prefix trie with B removed (App. D's pruning), so tail samples
    pay only for prefixes outside the explored tree. `samples` tail samples per query
    (default 100); with a budget, tail samples are drawn until the budget is spent.
    `surrogate` draws the tail from the twisted q̃ restricted to Q∖B instead (twisted.py):
    still unbiased (sum-and-sample holds for any tail proposal); no bounds or entropy then.
    """
    if surrogate is not None:
        return with_surrogate(batch, budgets, surrogate, "hybrid", lambda part, b, m: _hybrid(
            part, b, samples, max_width, m))
    return _hybrid(batch, budgets, samples, max_width, None)


def _hybrid(batch: Batch, budgets: Sequence[int] | None, samples: int | None, max_width: int,
            messages: Messages | None) -> list[Estimate]:
    N = len(batch.branch_task)
    levels = beam_search(batch, TailSplit(torch.full((N,), max_width)))
    log_pB, _ = leaves(levels, N)
    trie = Trie.from_beam(batch, levels, messages)
    trie.remove([(d, level.final.nonzero().flatten()) for d, level in enumerate(levels)])
    tail_samples = samples if budgets is not None else samples or DEFAULT_TAIL_SAMPLES
    result = head_plus_tail(trie, budgets, tail_samples, log_pB,
                            _beam_entropy(levels, N), lambda t: (
        f"hybrid: the beam used {int(batch.task_calls()[t])} of the {int(budgets[t])} model "
        "calls, leaving none for a tail sample"))
    sizes = beam_sizes(levels, N)
    extras = [{"beam_sizes": sizes[b].tolist(), "beam_mass": log_pB[b].exp().sum().item()}
              for b in batch.task_branches()]
    if messages is not None:  # 1 − q̃(B) does not bound p(Q∖B); −log q̃ is not H(q)
        result = replace(result, entropy=None, log_lower=None, log_gap=None)
    return to_estimates(batch, "hybrid", result, False, extras)


def _beam_entropy(levels: list[Level], num_branches: int) -> Tensor:
    """Σ_{x∈B} q(x)·(−log q(x)) per branch: the beam's exact share of H(q)."""
    total = torch.zeros(num_branches, dtype=torch.float64)
    for level in levels:
        f = level.final.nonzero().flatten()
        total.index_add_(0, level.branch[f], -level.log_q[f].exp() * level.log_q[f])
    return total
