"""Beam search over the restricted proposal tree: top-B, coverage (Thm. 1) and tail-splitting.

All branches (the queries of all tasks) advance level by level together: one batched model call per
level expands every kept beam. Only choosing which candidates to keep is per branch. The tree of
levels is kept, because the hybrid samples from it after pruning (App. D).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.categorical import (
    Domain,
    block_maxima,
    few_allowed,
    outside_filled,
    row_counts,
)
from seqq.estimators.engine.memory import values_within
from seqq.estimators.engine.rollout import conditional, domain_log_mass, restrict
from seqq.estimators.engine.selection import top_k
from seqq.estimators.engine.summary import group_logsumexp
from seqq.models.protocol import State


@dataclass
class Level:
    """Nodes at one depth for all branches, grouped by branch. Non-final nodes have been expanded:
    `log_probs[row[i]]` is p(next | node i) and `state` holds the model state after it."""

    branch: Tensor  # [n] (CPU)
    lattice_node: Tensor  # [n] the query-lattice node the prefix has reached
    parent: Tensor  # [n] index into the previous level, -1 at the root
    token: Tensor  # [n] symbol at this depth, -1 at the root
    log_p: Tensor  # [n] float64 joint log p of the prefix
    log_q: Tensor  # [n] float64 joint log q of the prefix
    final: Tensor  # [n] bool: a complete path of its query (a member of B)
    row: Tensor  # [n] row in `log_probs` / `state` (the non-final nodes in order), -1 if final
    log_probs: Tensor | None = None  # [expanded, V] on the model's device
    state: State | None = None
    log_m: Tensor | None = None  # [n] residual q-mass below each node outside B (hybrid)


@dataclass(frozen=True)
class TopB:
    """Keep the B candidates with highest joint q (docs/decisions.md §3); B per branch."""

    width: Tensor  # [N]
    by_q: bool = True

    @property
    def cap(self) -> int:
        return int(self.width.max())

    def counts(self, scores: Tensor, branch: Tensor, depth: int, lengths: Tensor,
               totals: tuple | None) -> Tensor:
        return torch.minimum(self.width[branch].to(scores.device), row_counts(torch.isfinite(scores)))


@dataclass(frozen=True)
class Coverage:
    """Keep the fewest candidates whose joint q reaches α_k = α^{k/K} (docs/decisions.md §4)."""

    alpha: float
    by_q: bool = True
    cap: int | None = None

    def counts(self, scores: Tensor, branch: Tensor, depth: int, lengths: Tensor,
               totals: tuple | None) -> Tensor:
        target = self.alpha ** ((depth + 1) / lengths.to(scores.device).double())
        short = torch.cumsum(scores.exp(), -1) < target[:, None]  # still below the target
        return torch.minimum(row_counts(short) + 1, row_counts(torch.isfinite(scores)))


@dataclass(frozen=True)
class TailSplit:
    """Keep the first b of the joint-p-sorted candidates, b = argmin var(w_1:b) + var(w_b+1:n)
    (population variances, b < n, b ≤ max_width; docs/decisions.md §3)."""

    max_width: Tensor  # [N]
    by_q: bool = False

    @property
    def cap(self) -> int:
        return int(self.max_width.max())

    def counts(self, scores: Tensor, branch: Tensor, depth: int, lengths: Tensor,
               totals: tuple | None) -> Tensor:
        n, s1, s2, shift = (x[branch].to(scores.device)[:, None] for x in totals)
        w = torch.exp(scores - shift)  # totals cover *all* candidates, scaled by exp(-shift)
        b = torch.arange(1, scores.shape[1] + 1, device=scores.device, dtype=torch.float64)
        p1, p2 = torch.cumsum(w, -1), torch.cumsum(w**2, -1)
        left = p2 / b - (p1 / b) ** 2
        right = (s2 - p2) / (n - b) - ((s1 - p1) / (n - b)) ** 2
        allowed = (b < n) & (b <= self.max_width[branch].to(scores.device)[:, None])
        best = torch.where(allowed, left + right, torch.inf).argmin(-1) + 1
        return torch.where(n[:, 0] <= 1, n[:, 0], best).long()


Rule = TopB | Coverage | TailSplit


def beam_search(batch: Batch, rule: Rule) -> list[Level]:
    """Grow the tree level by level; returns levels[0] = roots … levels[-1] = deepest leaves."""
    N = len(batch.branch_task)
    roots = torch.arange(N)
    level = Level(
        branch=roots, lattice_node=batch.branch_root.clone(), parent=torch.full((N,), -1),
        token=torch.full((N,), -1),
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
    tail_split = isinstance(rule, TailSplit)  # its variance split counts each node's domain
    domain = batch.domain(level.lattice_node[open_nodes], sparse=not tail_split)
    log_probs = level.log_probs  # its rows are the open nodes, in order (see `row`)
    parent_log = (level.log_q if rule.by_q else level.log_p)[open_nodes].to(batch.device)

    def joint(values: Tensor, rows: Tensor | None) -> Tensor:
        """Joint log q (or log p) of children with masked log-probs `values` [r, k] of the
        open nodes `rows` (all, in order, when None): float64, increasing in each value."""
        mass, parent = (log_mass, parent_log) if rows is None else (log_mass[rows],
                                                                     parent_log[rows])
        step = conditional(values, mass) if rule.by_q else values.to(torch.float64, copy=True)
        return step.add_(parent[:, None])

    if tail_split:  # its variance split needs every candidate's score
        masked, log_mass = restrict(log_probs, domain)
        scores = joint(masked, None)
        local, token = best_candidates(scores, branch, depth, rule, batch.lengths,
                                       _branch_totals(scores, domain, branch))
    elif isinstance(domain, Tensor) and not few_allowed(domain):  # a dense mask: masked once
        masked, log_mass = restrict(log_probs, domain)
        local, token = best_candidates(masked, branch, depth, rule, batch.lengths, joint=joint)
    else:  # a list, or a few symbols: ranked on the rows as they are, no masked copy
        log_mass = domain_log_mass(log_probs, domain)
        local, token = best_candidates(log_probs, branch, depth, rule, batch.lengths,
                                       joint=joint, domain=domain)
    parent = open_nodes[local]
    child_branch = level.branch[parent]
    dev_local, dev_token = local.to(batch.device), token.to(batch.device)
    kept_log_probs = log_probs[dev_local, dev_token, None]  # in the domain: as masked
    kept = joint(kept_log_probs, dev_local)[:, 0].cpu()
    if rule.by_q:
        log_q = kept
        log_p = level.log_p[parent] + kept_log_probs[:, 0].double().cpu()
    else:
        log_p = kept
        log_q = level.log_q[parent] + conditional(kept_log_probs, log_mass[dev_local])[:, 0].cpu()
    lattice_node = batch.lattice.advance(level.lattice_node[parent], token)
    final = batch.lattice.free[lattice_node]
    grow = (~final).nonzero().flatten()
    row = torch.full((len(parent),), -1)
    row[grow] = torch.arange(len(grow))
    next_probs = next_state = None
    if len(grow):
        parent_rows = level.row[parent[grow]].to(batch.device)
        next_probs, next_state = batch.counter.step(level.state, token[grow].to(batch.device),
                                                    rows=parent_rows)
    return Level(child_branch, lattice_node, parent, token, log_p, log_q, final, row,
                 next_probs, next_state)


BLOCKED_VOCAB = 4096  # vocabularies from this size pre-select candidates by blocks
CANDIDATE_BLOCK = 128  # symbols per block (one max per block is about as cheap as any width)


def best_candidates(scores: Tensor, branch: Tensor, depth: int, rule: Rule, lengths: Tensor,
                    totals: tuple | None = None,
                    joint: Callable[[Tensor, Tensor | None], Tensor] | None = None,
                    domain: Domain | None = None) -> tuple[Tensor, Tensor]:
    """(node, symbol) of the candidates `rule` keeps in every branch, grouped by branch.
    `scores` [n, V] rank the children of n nodes; nodes are grouped by `branch` (CPU); only
    symbols in `domain`, when given, are candidates. With `joint(values, rows)` the ranking
    scores are `joint(scores, None)`, increasing in each value of a row: each node's best are
    found on `scores` as given (e.g. float32 log-probs) and only they are mapped, so no
    float64 [n, V] table is built."""
    V = scores.shape[-1]
    k = min(rule.cap or V, V)
    node = None  # the node of each row of candidates, where rows are blocks of nodes
    if k < V and V >= BLOCKED_VOCAB:  # a branch's best lie in its best blocks
        node, top_scores, top_tokens = _best_blocks(scores, branch, depth, k, lengths, joint,
                                                    domain)
    else:
        if domain is not None:
            scores = outside_filled(scores, domain, -torch.inf)
        if k < V:  # a branch's best are among its nodes' best: pre-select them
            top_scores, top_tokens = scores.topk(k, dim=-1)
        else:  # every symbol may be kept: a per-node sort would cost more than it saves
            top_scores, top_tokens = scores, None
        if joint is not None:
            top_scores = joint(top_scores, None)
    row_branch = branch if node is None else branch[node]
    if not len(row_branch):  # no block holds a candidate (all scores −inf)
        return row_branch.new_zeros(0), row_branch.new_zeros(0)
    local, token = [], []
    for rows in _chunks(row_branch, top_scores.shape[1]):
        on_device = rows.to(top_scores.device)
        row, symbol = _choose(top_scores[on_device],
                              None if top_tokens is None else top_tokens[on_device],
                              row_branch[rows], depth, rule, lengths, totals)
        local.append(rows[0] + row)
        token.append(symbol)
    local, token = (local[0], token[0]) if len(local) == 1 else (torch.cat(local), torch.cat(token))
    return (local, token) if node is None else (node[local], token)


def _best_blocks(scores: Tensor, branch: Tensor, depth: int, k: int, lengths: Tensor,
                 joint: Callable[[Tensor, Tensor | None], Tensor] | None,
                 domain: Domain | None) -> tuple[Tensor, Tensor, Tensor]:
    """The candidates in each branch's k blocks (runs of CANDIDATE_BLOCK symbols of a node)
    of highest maximum, which hold the branch's best k: each of those blocks holds a candidate
    scoring at least T, the k-th highest block maximum, so the k-th best candidate scores ≥ T
    and every better one lies in a block whose maximum is ≥ T. One max pass over [n, V]
    replaces a per-node top-k, much dearer over a large vocabulary; an `Excluded` domain only
    redoes the maxima of the blocks holding its symbols, and a mask of few allowed symbols
    takes none: only their blocks are read. Returns the node of each block [R]
    (CPU, grouped by branch), and its candidates' ranking scores and symbols [R, W] (−inf
    outside the domain and past the vocabulary's end)."""
    (n, V), W = scores.shape, CANDIDATE_BLOCK
    if isinstance(domain, Tensor) and few_allowed(domain):  # only their blocks have candidates
        maxima = scores.new_full((n, -(-V // W)), -torch.inf)
        _redo_maxima(maxima, scores, *domain.nonzero(as_tuple=True), domain)
    else:
        if isinstance(domain, Tensor):
            scores, domain = outside_filled(scores, domain, -torch.inf), None
        maxima = block_maxima(scores, W)
        if domain is not None:
            _redo_maxima(maxima, scores, *domain.listed(), domain)
    widths = torch.full((int(branch.max()) + 1,), k)
    node, block = best_candidates(maxima if joint is None else joint(maxima, None), branch,
                                  depth, TopB(widths), lengths)
    on_device = node.to(scores.device)
    values, symbols = _blocks(scores, on_device, block.to(scores.device), domain)
    return node, values if joint is None else joint(values, on_device), symbols


def _redo_maxima(maxima: Tensor, scores: Tensor, row: Tensor, symbol: Tensor, domain: Domain
                 ) -> None:
    """The maxima of the blocks holding the symbols (row i, symbol i), over the domain only."""
    blocks = maxima.shape[1]
    touched = torch.unique(row * blocks + symbol // CANDIDATE_BLOCK)
    node, block = touched // blocks, touched % blocks
    maxima[node, block] = _blocks(scores, node, block, domain)[0].amax(-1)


def _blocks(scores: Tensor, node: Tensor, block: Tensor, domain: Domain | None
            ) -> tuple[Tensor, Tensor]:
    """Block `block[i]` of row `node[i]` of `scores` for each i (distinct pairs), [R, W], with
    −inf past the vocabulary's end and outside the domain; and their symbols."""
    (n, V), W = scores.shape, CANDIDATE_BLOCK
    symbols = block[:, None] * W + torch.arange(W, device=scores.device)
    inside_vocab = symbols.clamp_max(V - 1)
    values = scores[node[:, None], inside_vocab]
    values[symbols >= V] = -torch.inf
    if isinstance(domain, Tensor):
        values[~domain[node[:, None], inside_vocab]] = -torch.inf
    elif domain is not None:
        blocks = -(-V // W)
        at = torch.full((n * blocks,), -1, device=scores.device)
        at[node * blocks + block] = torch.arange(len(node), device=scores.device)
        row, symbol = domain.listed()
        found = at[row * blocks + symbol // W]
        inside = found >= 0
        values[found[inside], symbol[inside] % W] = -torch.inf
    return values, symbols


PADDED_ELEMENTS = values_within(8)  # branches × candidates (float64 scores) laid out at once


def _chunks(branch: Tensor, k: int) -> list[Tensor]:
    """Contiguous node ranges holding whole branches, each small enough to pad at once."""
    _, sizes = torch.unique_consecutive(branch, return_counts=True)
    if len(sizes) * int(sizes.max()) * k <= PADDED_ELEMENTS:
        return [torch.arange(len(branch))]
    chunks, start, nodes, branches, widest = [], 0, 0, 0, 0
    for size in sizes.tolist():
        wider = max(widest, size * k)
        if branches and wider * (branches + 1) > PADDED_ELEMENTS:
            chunks.append(torch.arange(start, start + nodes))
            start, nodes, branches, wider = start + nodes, 0, 0, size * k
        nodes, branches, widest = nodes + size, branches + 1, wider
    chunks.append(torch.arange(start, start + nodes))
    return chunks


def _choose(top_scores: Tensor, top_tokens: Tensor | None, branch: Tensor, depth: int,
            rule: Rule, lengths: Tensor, totals: tuple | None) -> tuple[Tensor, Tensor]:
    """Apply the rule to every branch at once: each branch's candidates (the rows of
    `top_scores`: its nodes' top-k, its best blocks, or all its nodes' symbols when
    `top_tokens` is None) are laid out in one padded row, sorted, and the rule says how many
    of the best to keep. Returns (row, symbol) of the kept candidates, grouped by branch."""
    ids, nodes_per_branch = torch.unique_consecutive(branch, return_counts=True)
    first_node = torch.cumsum(nodes_per_branch, 0) - nodes_per_branch
    k = top_scores.shape[1]
    device = top_scores.device
    most = int(nodes_per_branch.max())
    width = most * k
    if bool((nodes_per_branch == most).all()):  # equal branches: no padding, just a view
        padded = top_scores.reshape(len(ids), width)
    else:  # a branch's nodes are its row's slots of k (cheaper than a scatter per element)
        group = torch.repeat_interleave(torch.arange(len(ids)), nodes_per_branch)
        local = torch.arange(len(branch)) - first_node[group]
        padded = torch.full((len(ids), most, k), -torch.inf, dtype=top_scores.dtype,
                            device=device)
        padded[group.to(device), local.to(device)] = top_scores
        padded = padded.view(len(ids), width)
    keep_at_most = min(width, rule.cap or width)
    sorted_scores, position = top_k(padded, keep_at_most)
    count = rule.counts(sorted_scores, ids, depth, lengths[ids], totals)
    rank = torch.arange(keep_at_most, device=device)
    kept = (rank < count[:, None]) & torch.isfinite(sorted_scores)
    g, r = kept.nonzero(as_tuple=True)
    node = first_node.to(device)[g] + position[g, r] // k
    token = position[g, r] % k if top_tokens is None else top_tokens[node, position[g, r] % k]
    return node.cpu(), token.cpu()


def _branch_totals(scores: Tensor, domain: Tensor, branch: Tensor
                   ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per branch: candidate count, Σw and Σw² with w = exp(score − shift), and the shift."""
    N = int(branch.max()) + 1
    node_max = scores.amax(-1).cpu()
    shift = torch.full((N,), -math.inf, dtype=torch.float64).scatter_reduce(
        0, branch, node_max, reduce="amax")
    shift = torch.where(torch.isfinite(shift), shift, 0.0)
    w = torch.exp(scores - shift[branch].to(scores.device)[:, None])
    count = torch.zeros(N, dtype=torch.long).index_add_(0, branch, row_counts(domain).cpu())
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
