"""Beam search over the restricted proposal tree: top-B, coverage (Thm. 1) and tail-splitting.

All branches (products of all tasks) advance level by level together: one batched model call per
level expands every kept beam. Only choosing which candidates to keep is per branch. The tree of
levels is kept, because the hybrid samples from it after pruning (App. D).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.estimators.batch import Batch
from seqq.estimators.rollout import restrict
from seqq.estimators.summary import group_logsumexp
from seqq.models.protocol import State


@dataclass
class Level:
    """Nodes at one depth for all branches, grouped by branch. Non-final nodes have been expanded:
    `log_probs[row[i]]` is p(next | node i) and `state` holds the model state after it."""

    branch: Tensor  # [n] (CPU)
    parent: Tensor  # [n] index into the previous level, -1 at the root
    token: Tensor  # [n] symbol at this depth, -1 at the root
    log_p: Tensor  # [n] float64 joint log p of the prefix
    log_q: Tensor  # [n] float64 joint log q of the prefix
    final: Tensor  # [n] bool: a complete path of its product (a member of B)
    row: Tensor  # [n] row in `log_probs` / `state`, -1 for final nodes
    log_probs: Tensor | None = None  # [expanded, V] on the model's device
    state: State | None = None
    log_m: Tensor | None = None  # [n] residual q-mass below each node outside B (hybrid)


@dataclass(frozen=True)
class TopB:
    """Keep the B candidates with highest joint q (decisions.md §3); B per branch."""

    width: Tensor  # [N]
    by_q: bool = True

    @property
    def cap(self) -> int:
        return int(self.width.max())

    def keep(self, scores: Tensor, depth: int, length: int, totals: tuple, b: int) -> int:
        return min(int(self.width[b]), len(scores))


@dataclass(frozen=True)
class Coverage:
    """Keep the fewest candidates whose joint q reaches α_k = α^{k/K} (decisions.md §4)."""

    alpha: float
    by_q: bool = True
    cap: int | None = None

    def keep(self, scores: Tensor, depth: int, length: int, totals: tuple, b: int) -> int:
        target = self.alpha ** ((depth + 1) / length)
        covered = torch.cumsum(scores.exp(), 0)
        reached = (covered >= target).nonzero()
        return int(reached[0]) + 1 if len(reached) else len(scores)


@dataclass(frozen=True)
class TailSplit:
    """Keep the first b of the joint-p-sorted candidates, b = argmin var(w_1:b) + var(w_b+1:n)
    (population variances, b < n, b ≤ max_width; decisions.md §3)."""

    max_width: Tensor  # [N]
    by_q: bool = False

    @property
    def cap(self) -> int:
        return int(self.max_width.max())

    def keep(self, scores: Tensor, depth: int, length: int, totals: tuple, b: int) -> int:
        n, s1, s2, shift = (x.item() for x in totals)  # all candidates, w scaled by exp(-shift)
        if n <= 1:
            return int(n)
        w = torch.exp(scores - shift)
        cap = min(len(w), n - 1, int(self.max_width[b]))
        b = torch.arange(1, cap + 1, dtype=torch.float64)
        p1, p2 = torch.cumsum(w, 0)[: len(b)], torch.cumsum(w**2, 0)[: len(b)]
        left = p2 / b - (p1 / b) ** 2
        right = (s2 - p2) / (n - b) - ((s1 - p1) / (n - b)) ** 2
        return int(torch.argmin(left + right)) + 1


Rule = TopB | Coverage | TailSplit


def beam_search(batch: Batch, rule: Rule) -> list[Level]:
    """Grow the tree level by level; returns levels[0] = roots … levels[-1] = deepest leaves."""
    N = len(batch.branch_task)
    roots = torch.arange(N)
    level = Level(
        branch=roots, parent=torch.full((N,), -1), token=torch.full((N,), -1),
        log_p=torch.zeros(N, dtype=torch.float64), log_q=torch.zeros(N, dtype=torch.float64),
        final=torch.zeros(N, dtype=torch.bool), row=roots,
        log_probs=batch.root_log_probs[batch.branch_task.to(batch.device)],
        state=batch.counter.select(batch.root_state, batch.branch_task.to(batch.device)),
    )
    levels = [level]
    depth = 0
    while level.log_probs is not None:
        level = _expand(batch, level, depth, rule)
        levels.append(level)
        depth += 1
    return levels


def _expand(batch: Batch, level: Level, depth: int, rule: Rule) -> Level:
    open_nodes = (~level.final).nonzero().flatten()
    branch = level.branch[open_nodes]
    domain = batch.masks[branch.to(batch.device), depth]
    log_probs = level.log_probs[level.row[open_nodes].to(batch.device)]
    masked, log_mass = restrict(log_probs, domain)
    cond_log_q = (masked - log_mass[:, None]).double()
    if rule.by_q:
        scores = level.log_q[open_nodes].to(batch.device)[:, None] + cond_log_q
    else:
        scores = level.log_p[open_nodes].to(batch.device)[:, None] + masked.double()
    k = min(rule.cap or batch.vocab_size, batch.vocab_size)
    top_scores, top_tokens = (t.cpu() for t in scores.topk(k, dim=-1))
    totals = _branch_totals(scores, domain, branch) if isinstance(rule, TailSplit) else None

    kept_node, kept_token = [], []
    for b, (start, stop) in _runs(branch):
        flat = top_scores[start:stop].flatten()
        order = torch.argsort(flat, descending=True, stable=True)
        order = order[torch.isfinite(flat[order])]
        stats = tuple(x[b] for x in totals) if totals else ()
        count = rule.keep(flat[order], depth, int(batch.lengths[b]), stats, b)
        chosen = order[:count]
        kept_node.append(start + chosen // k)
        kept_token.append(top_tokens[start:stop].flatten()[chosen])
    local = torch.cat(kept_node)  # index among open nodes
    token = torch.cat(kept_token)
    parent = open_nodes[local]
    child_branch = level.branch[parent]
    dev_local, dev_token = local.to(batch.device), token.to(batch.device)
    log_p = level.log_p[parent] + log_probs[dev_local, dev_token].double().cpu()
    log_q = level.log_q[parent] + cond_log_q[dev_local, dev_token].cpu()
    final = batch.lengths[child_branch] == depth + 1
    grow = (~final).nonzero().flatten()
    row = torch.full((len(parent),), -1)
    row[grow] = torch.arange(len(grow))
    next_probs = next_state = None
    if len(grow):
        parent_rows = level.row[parent[grow]].to(batch.device)
        next_state = batch.counter.select(level.state, parent_rows)
        next_probs, next_state = batch.counter.step(next_state, token[grow].to(batch.device))
    return Level(child_branch, parent, token, log_p, log_q, final, row, next_probs, next_state)


def _runs(branch: Tensor) -> list[tuple[int, tuple[int, int]]]:
    """(branch id, (start, stop)) for each run of equal ids in a grouped vector."""
    ids, counts = torch.unique_consecutive(branch, return_counts=True)
    stops = torch.cumsum(counts, 0).tolist()
    starts = [0, *stops[:-1]]
    return [(int(b), (s, e)) for b, s, e in zip(ids.tolist(), starts, stops, strict=True)]


def _branch_totals(scores: Tensor, domain: Tensor, branch: Tensor
                   ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per branch: candidate count, Σw and Σw² with w = exp(score − shift), and the shift."""
    N = int(branch.max()) + 1
    node_max = scores.amax(-1).cpu()
    shift = torch.full((N,), -math.inf, dtype=torch.float64).scatter_reduce(
        0, branch, node_max, reduce="amax")
    shift = torch.where(torch.isfinite(shift), shift, 0.0)
    w = torch.exp(scores - shift[branch].to(scores.device)[:, None])
    count = torch.zeros(N, dtype=torch.long).index_add_(0, branch, domain.sum(-1).cpu())
    s1 = torch.zeros(N, dtype=torch.float64).index_add_(0, branch, w.sum(-1).cpu())
    s2 = torch.zeros(N, dtype=torch.float64).index_add_(0, branch, (w**2).sum(-1).cpu())
    return count, s1, s2, shift


def leaves(levels: list[Level], num_branches: int) -> tuple[Tensor, Tensor]:
    """log p(B) and log q(B) per branch, summed over the final nodes of every level."""
    log_p = torch.full((num_branches,), -math.inf, dtype=torch.float64)
    log_q = log_p.clone()
    for level in levels:
        f = level.final.nonzero().flatten()
        if len(f):
            log_p = torch.logaddexp(log_p, group_logsumexp(level.log_p[f], level.branch[f],
                                                              num_branches))
            log_q = torch.logaddexp(log_q, group_logsumexp(level.log_q[f], level.branch[f],
                                                              num_branches))
    return log_p, log_q


def beam_sizes(levels: list[Level], num_branches: int) -> Tensor:
    """[num_branches, depth] number of beams kept at each step."""
    sizes = torch.zeros(num_branches, len(levels) - 1, dtype=torch.long)
    for d, level in enumerate(levels[1:]):
        sizes[:, d] = torch.bincount(level.branch, minlength=num_branches)
    return sizes
