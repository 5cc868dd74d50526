"""Beam-search estimators (lower bounds) and the beam + importance-sampling hybrid (§4.2, App. D).

The hybrid keeps the tail-splitting beam set B exactly and importance-samples Q∖B from
q_B = q(· | ∉ B): the beam tree is pruned by giving each tree node its residual mass
m(node) = q(paths below it that are not in B | node), and samples walk the pruned tree until they
leave it, then continue under q. The weight of a tail sample is p(x)·(1 − q(B)) / q(x)
(docs/decisions.md §5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
from seqq.estimators.rollout import conditional, restrict, rollout, sample_categorical
from seqq.estimators.summary import BranchResult, segment_average, segment_mean, to_estimates

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
    high = torch.full_like(low, width)
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
    extras = []
    for b in batch.task_branches():
        gap = (-torch.expm1(log_qB[b])).clamp_min(0).sum().item()  # Thm. 1: p(Q) - p(B) ≤ 1 - q(B)
        extras.append({"beam_sizes": sizes[b].tolist(), "gap_bound": gap})
    return to_estimates(batch, method, BranchResult(log_pB, None, None, None), True, extras)


def top_b(batch: Batch, budgets: Sequence[int] | None, beam_width: int | None = None
          ) -> list[Estimate]:
    """Top-B beam search; with a budget the beam is the widest that fits (`beam_width` caps it)."""
    if budgets is None:
        width = beam_width or DEFAULT_BEAM_WIDTH
    else:
        width = beam_width or int(tree_calls(batch).max().item())  # no cap but Q itself
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
           max_width: int = DEFAULT_MAX_WIDTH) -> list[Estimate]:
    """p(B) from tail-splitting beam search + IS of p(Q∖B) under the pruned proposal q_B."""
    N = len(batch.branch_task)
    levels = beam_search(batch, TailSplit(torch.full((N,), max_width)))
    log_pB, _ = leaves(levels, N)
    pruned = [_prune(batch, levels, d) for d in range(len(levels) - 1)]
    _fill_residuals(levels, pruned)
    log_rest = levels[0].log_m  # log(1 - q(B)) per branch (roots are branches in order)
    per_task = _tail_samples(batch, budgets, samples, log_rest)
    row_branch = torch.repeat_interleave(torch.arange(N), torch.where(
        torch.isfinite(log_rest), per_task[batch.branch_task], 0))
    log_w, log_q = _sample_tail(batch, levels, pruned, row_branch)
    log_tail, var_tail, count = segment_mean(log_w, row_branch, N)
    has_tail = count > 0
    log_value = torch.where(has_tail, torch.logaddexp(log_pB, log_rest + log_tail), log_pB)
    variance = torch.where(has_tail, var_tail * torch.exp(2 * log_rest), 0.0)
    tail_entropy = segment_average(-log_q, row_branch, N)
    entropy = _beam_entropy(levels, N) + torch.where(has_tail, log_rest.exp() * tail_entropy, 0.0)
    sizes = beam_sizes(levels, N)
    extras = [{"beam_sizes": sizes[b].tolist(), "beam_mass": log_pB[b].exp().sum().item()}
              for b in batch.task_branches()]
    return to_estimates(batch, "hybrid", BranchResult(log_value, variance, count.long(), entropy),
                        False, extras)


def _tail_samples(batch: Batch, budgets: Sequence[int] | None, samples: int | None,
                  log_rest: Tensor) -> Tensor:
    if budgets is None:
        return torch.full((batch.num_tasks,), samples or DEFAULT_TAIL_SAMPLES, dtype=torch.long)
    left = torch.as_tensor(list(budgets), dtype=torch.long) - batch.counter.calls
    per_sample = torch.zeros(batch.num_tasks, dtype=torch.long).index_add_(
        0, batch.branch_task, torch.where(torch.isfinite(log_rest), batch.lengths - 1, 0))
    fitted = torch.where(per_sample > 0, left // per_sample.clamp_min(1), left.clamp_min(1))
    if (fitted < 1).any():
        t = int((fitted < 1).nonzero()[0])
        raise BudgetError(f"hybrid: the beam used {int(batch.counter.calls[t])} of the "
                          f"{int(budgets[t])} model calls, leaving none for a tail sample")
    return fitted


def _prune(batch: Batch, levels: list[Level], depth: int) -> dict[str, Tensor]:
    """Restricted conditionals of the open nodes at `depth` (children's mass filled in later).

    Beam search computed these once already; recomputing one masked log-sum-exp per level here
    is cheaper than keeping [nodes, V] float64 tensors of every level for all beam methods."""
    level = levels[depth]
    open_nodes = (~level.final).nonzero().flatten()
    log_probs = level.log_probs[level.row[open_nodes].to(batch.device)]
    domain = batch.masks[level.branch[open_nodes].to(batch.device), depth]
    masked, log_mass = restrict(log_probs, domain)
    return {"cond": conditional(masked, log_mass), "log_mass": log_mass.double(),
            "log_probs": log_probs}


def _fill_residuals(levels: list[Level], pruned: list[dict[str, Tensor]]) -> None:
    """Bottom-up residual masses m(node) and pruned logits log q(v|node) + log m(child)."""
    levels[-1].log_m = torch.full((len(levels[-1].branch),), -math.inf, dtype=torch.float64)
    for depth in range(len(levels) - 2, -1, -1):
        level, children, p = levels[depth], levels[depth + 1], pruned[depth]
        open_index = torch.full((len(level.branch),), -1)
        open_nodes = (~level.final).nonzero().flatten()
        open_index[open_nodes] = torch.arange(len(open_nodes))
        rows = open_index[children.parent].to(p["cond"].device)
        tokens = children.token.to(p["cond"].device)
        logits = p["cond"].clone()
        logits[rows, tokens] = p["cond"][rows, tokens] + children.log_m.to(logits.device)
        p["logits"], p["open_index"] = logits, open_index
        p["child_key"], p["child_order"] = torch.sort(children.parent * logits.shape[1]
                                                      + children.token)
        log_m = torch.full((len(level.branch),), -math.inf, dtype=torch.float64)
        log_m[open_nodes] = torch.logsumexp(logits, -1).cpu()
        level.log_m = log_m


def _sample_tail(batch: Batch, levels: list[Level], pruned: list[dict[str, Tensor]],
                 row_branch: Tensor) -> tuple[Tensor, Tensor]:
    """Walk the pruned tree; rows that leave it continue under q. Returns log w/(1-q(B)), log q."""
    R, V = len(row_branch), batch.vocab_size
    log_w, log_q = torch.zeros(R, dtype=torch.float64), torch.zeros(R, dtype=torch.float64)
    rows, node = torch.arange(R), row_branch.clone()  # level-0 node i is the root of branch i
    for depth, p in enumerate(pruned):
        if not len(rows):
            break
        o = p["open_index"][node].to(p["logits"].device)
        drawn = sample_categorical(p["logits"][o], batch.generator)
        log_w[rows] += p["log_mass"][o].cpu()
        log_q[rows] += p["cond"][o, drawn].cpu()
        drawn = drawn.cpu()
        going_on = batch.lengths[row_branch[rows]] > depth + 1
        key = node * V + drawn
        pos = torch.searchsorted(p["child_key"], key).clamp_max(max(len(p["child_key"]) - 1, 0))
        inside = going_on & (p["child_key"][pos] == key) if len(p["child_key"]) else going_on & False
        leave = going_on & ~inside
        if leave.any():
            out = rows[leave]
            level = levels[depth]
            state = batch.counter.select(level.state, level.row[node[leave]].to(batch.device))
            log_probs, state = batch.counter.step(state, drawn[leave].to(batch.device))
            rest = rollout(batch, row_branch[out], log_probs, state, start=depth + 1)
            log_w[out] += rest.log_weight
            log_q[out] += rest.log_q
        rows, node = rows[inside], p["child_order"][pos[inside]]
    return log_w, log_q


def _beam_entropy(levels: list[Level], num_branches: int) -> Tensor:
    """Σ_{x∈B} q(x)·(−log q(x)) per branch: the beam's exact share of H(q)."""
    total = torch.zeros(num_branches, dtype=torch.float64)
    for level in levels:
        f = level.final.nonzero().flatten()
        total.index_add_(0, level.branch[f], -level.log_q[f].exp() * level.log_q[f])
    return total

