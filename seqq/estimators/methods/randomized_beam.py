"""Randomized beam search: 001's sum-and-sample estimator (Eq. 4) applied at every depth.

Every node carries ŵ, an unbiased estimate of its prefix's probability (1 at the root). At each
depth the children c = b·v (v ∈ V_k) of all kept nodes b are candidates with ŵ(c) = ŵ(b)·p(v|b);
the `top` best by ŵ are kept exactly, and `sampled` more are drawn from the rest with probability
r(c) = ŵ(c)/S_tail (the tail renormalised, seed-notes §2 (d)), systematically, equal draws merged:
a drawn candidate gets ŵ(c)·m_c/(sampled·r(c)) = m_c·S_tail/sampled. E[ŵ'(c)] = ŵ(c), so by the
tower property the last depth's exact sum Σ_b ŵ(b)·p(V_K | b) is unbiased for p(Q). With
`sampled` = 0 this is top-K beam search (a lower bound, no longer unbiased); with `top` = 0 it
is sequential importance resampling at every step. All tasks' queries run level by level
together, one batched model call per depth, like beam.py; nodes on one prefix share its call
(engine/advance.py). A symbol that decides the query ends its path: its mass is summed exactly.

With a `surrogate`, candidates are ranked and drawn by ŵ(c)·ψ(c) instead, ψ(c) = β_{k+1} of c's
surrogate state (twisted.py's backward messages): the beam keeps the prefixes likely to
*complete* the query, not only the likely ones. ŵ stays an estimate of the prefix's
probability: a drawn candidate gets m_c·S̃_tail/(sampled·ψ(c)), S̃_tail = Σ_tail ŵ·ψ, whose
expectation is still ŵ(c); the head may be chosen by any score. So it stays unbiased.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.errors import BudgetError
from seqq.estimators.engine.advance import extend
from seqq.estimators.engine.batch import Batch, subset, tree_calls
from seqq.estimators.engine.beam_search import TopB, best_candidates
from seqq.estimators.engine.budget import widths_for_budget
from seqq.estimators.engine.categorical import Categorical, Domain, row_counts, without
from seqq.estimators.engine.memory import consecutive_groups, rows_within
from seqq.estimators.engine.resample import resample_groups
from seqq.estimators.engine.rollout import gather_rows, restrict, split_ending
from seqq.estimators.engine.summary import BranchResult, group_logsumexp
from seqq.estimators.engine.twist import Messages, twist_rows
from seqq.estimators.method import (
    NON_NEGATIVE,
    Answer,
    Budgets,
    Guarantee,
    Method,
    Options,
    option,
)

DEFAULT_TOP = 5
DEFAULT_SAMPLED = 5


@dataclass(frozen=True)
class RandomizedBeamOptions(Options):
    top: int | None = option(None, NON_NEGATIVE, "nodes kept exactly per depth (5)")
    sampled: int | None = option(None, NON_NEGATIVE, "nodes drawn from the rest per depth (5)")


def randomized_beam(batch: Batch, budgets: Budgets, options: RandomizedBeamOptions,
                    twist: Messages | None) -> Answer:
    """Unbiased p̂ from a beam of `top` exact + `sampled` drawn nodes per depth and query.
    With a budget, the widest beam top + sampled that fits (at most one call per node), split
    as asked (`top` or `sampled` fixes that part) or evenly, drawn part rounded up. The kept
    nodes are dependent draws with no simple variance estimate: the driver runs replicates.
    A twist steers ranking and drawing by the surrogate's completion chance. Tasks run in
    groups whose beams × V fit the memory of one step."""
    head, drawn = _split(batch, budgets, options.top, options.sampled)
    N = len(batch.branch_task)
    log_value = torch.full((N,), -math.inf, dtype=torch.float64)
    sizes = torch.zeros(N, int(batch.lengths.max()) - 1 if N else 0, dtype=torch.long)
    per_task = batch.task_branches()
    loads = [int((head + drawn)[b].sum()) for b in per_task]
    for tasks in consecutive_groups(loads, rows_within(batch.vocab_size)):
        branches = torch.cat([per_task[t] for t in tasks.tolist()])
        if not len(branches):
            continue  # only empty queries here: p = 0
        part_twist = None if twist is None else dataclasses.replace(
            twist, context=twist.context[branches.to(twist.context.device)])
        value, part_sizes = _search(subset(batch, tasks), head[branches], drawn[branches],
                                    part_twist)
        log_value[branches] = value
        sizes[branches, :part_sizes.shape[1]] = part_sizes
    extras = [{"top": head[b].tolist(), "sampled": drawn[b].tolist(),
               "beam_sizes": sizes[b].tolist()} for b in per_task]
    return Answer(BranchResult(log_value, None, None, None), bool((drawn == 0).all()), extras)


def _split(batch: Batch, budgets: Sequence[int] | None, top: int | None, sampled: int | None
           ) -> tuple[Tensor, Tensor]:
    """(top, sampled) per branch."""
    N = len(batch.branch_task)
    if budgets is None:
        return (torch.full((N,), DEFAULT_TOP if top is None else top),
                torch.full((N,), DEFAULT_SAMPLED if sampled is None else sampled))
    cap = int(tree_calls(batch).max().item()) if top is None or sampled is None else top + sampled
    if cap < 1:
        raise BudgetError("top + sampled must be at least 1 with a budget")
    width = widths_for_budget(batch, budgets, cap)
    if top is not None:
        head = torch.clamp(width, max=top)
        return head, width - head
    drawn = width - width // 2 if sampled is None else torch.clamp(width, max=sampled)
    return width - drawn, drawn


def _search(batch: Batch, top: Tensor, sampled: Tensor, messages: Messages | None
            ) -> tuple[Tensor, Tensor]:
    """log p̂ per branch and the nodes kept at depths 1..L−1 [N, L−1]: each costs one call.
    A symbol that decides the query (its lattice child is free) is summed exactly at once;
    the beam moves on along the others."""
    N, device, lattice = len(batch.branch_task), batch.device, batch.lattice
    L = int(batch.lengths.max()) if N else 1
    log_value = torch.full((N,), -math.inf, dtype=torch.float64)
    sizes = torch.zeros(N, L - 1, dtype=torch.long)
    branch, log_w = torch.arange(N), torch.zeros(N, dtype=torch.float64)  # the frontier
    node = batch.branch_root.clone()
    prefix = batch.branch_task.clone()  # the evaluated prefix of each frontier row
    log_probs, state = batch.root_log_probs, batch.root_state
    twist = None if messages is None else messages.rows(branch)
    depth = 0
    while len(branch):
        node_log_probs = gather_rows(log_probs, prefix)
        log_end, domain = split_ending(batch, node, node_log_probs, sparse=True)
        log_value = torch.logaddexp(log_value, group_logsumexp(log_w + log_end, branch, N))
        guide = None if twist is None else twist.log_values(node)
        masked, log_mass = restrict(node_log_probs, domain)
        open_rows = torch.isfinite(log_mass).cpu().nonzero().flatten()
        if not len(open_rows):
            break
        open_log_probs = gather_rows(node_log_probs, open_rows)
        open_masked, open_domain = gather_rows(masked, open_rows), gather_rows(domain, open_rows)
        open_guide = None if guide is None else twist_rows(guide, open_rows.to(device))
        picked, token, log_w = _next_beam(batch, depth, branch[open_rows], log_w[open_rows],
                                          open_log_probs, open_masked, open_domain, top,
                                          sampled, open_guide)
        parent = open_rows[picked]
        twist = None if twist is None else twist.select(parent).advance(token)
        branch = branch[parent]
        node = lattice.advance(node[parent], token)
        sizes[:, depth] = torch.bincount(branch, minlength=N)
        prefix, log_probs, state = extend(batch, state, prefix[parent], token)
        depth += 1
    return log_value, sizes


def _next_beam(batch: Batch, depth: int, branch: Tensor, log_w: Tensor, log_probs: Tensor,
               masked: Tensor, domain: Domain, top: Tensor, sampled: Tensor,
               guide: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """(node, symbol, log ŵ) of the next beam, grouped by branch: the head kept exactly and
    the tail sample, both chosen by ŵ·ψ with ψ = exp(`guide`) (1 without a twist). A branch
    with no more candidates than top + sampled keeps them all."""
    N, device = len(top), log_probs.device
    node_log_w = log_w.to(device)

    def joint(values: Tensor, rows: Tensor | None) -> Tensor:
        """log ŵ of children with masked log-probs `values` of the nodes `rows` (all when
        None): float64, as log_w is."""
        return (node_log_w if rows is None else node_log_w[rows])[:, None] + values

    steered = log_probs if guide is None else log_probs + guide
    candidates = torch.zeros(N, dtype=torch.long).index_add_(
        0, branch, row_counts(masked > -torch.inf).cpu())  # log-probs are < +inf
    keep_all = candidates <= top + sampled
    head_width = torch.where(keep_all, candidates, top)
    draws = torch.where(keep_all, 0, sampled)
    node = torch.zeros(0, dtype=torch.long)
    token = torch.zeros(0, dtype=torch.long)
    if int(head_width.max()) > 0:
        rule = TopB(head_width, by_q=False)
        node, token = (best_candidates(masked, branch, depth, rule, batch.lengths, joint=joint)
                       if guide is None else
                       best_candidates(joint(masked, None) + guide, branch, depth, rule,
                                       batch.lengths))
    dev_node = node.to(device)
    head_log_w = joint(masked[dev_node, token.to(device), None], dev_node)[:, 0].cpu()
    if int(draws[branch].max()) == 0:
        return node, token, head_log_w
    tail = Categorical.from_logits(steered, without(domain, node.to(device), token.to(device)))
    node_tail = log_w + tail.log_total().cpu()  # log ŵ(b)·Σ_tail p·ψ
    log_tail = group_logsumexp(node_tail, branch, N)  # log S̃_tail per branch
    draws = torch.where(torch.isfinite(log_tail), draws, 0)
    ids, per_branch = torch.unique_consecutive(branch, return_counts=True)
    hits = resample_groups(node_tail, per_branch, draws[ids], batch.generator)
    chosen = hits.nonzero().flatten()
    row, drawn_token, multiplicity = tail.systematic(hits[chosen], batch.generator,
                                                     chosen.to(device))
    multiplicity = multiplicity.double().cpu()
    drawn_node = chosen[row.cpu()]
    b = branch[drawn_node]
    drawn_log_w = multiplicity.log() + log_tail[b] - draws[b].double().log()
    if guide is not None:
        drawn_log_w -= guide[chosen.to(device)[row], drawn_token].cpu()
    node = torch.cat([node, drawn_node])
    order = torch.argsort(node * batch.vocab_size + torch.cat([token, drawn_token.cpu()]))
    return (node[order], torch.cat([token, drawn_token.cpu()])[order],
            torch.cat([head_log_w, drawn_log_w])[order])


METHODS = (Method(
    name="randomized_beam", run=randomized_beam, options=RandomizedBeamOptions,
    guarantee=Guarantee.UNBIASED, surrogate="optional", replicates=8, log_replicates=True),)
