"""Sampling without replacement: distinct leaves per branch from the residual, by stochastic
beam search (Kool et al. 2019) — top-down Gumbel-top-k over the trie's residual masses.

A node's children are perturbed and conditioned on the node's own perturbed value
(`gumbel.py`), so the leaves kept are exactly the top k of independently perturbed leaves,
i.e. a sample without replacement from the residual. Only the nodes on the kept paths are
expanded.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from seqq.estimators.engine.categorical import block_sums
from seqq.estimators.engine.trie.gumbel import (
    BlockLogits,
    block_width,
    top_conditioned,
    top_per_group,
    top_truncated_gumbel,
)
from seqq.estimators.engine.trie.proposals import guide, proposal
from seqq.estimators.engine.trie.residual import (
    changed_children,
    residual_logits,
    residual_proposal,
)

if TYPE_CHECKING:
    from seqq.estimators.engine.trie.tree import Trie


def sample_without_replacement(trie: Trie, draws: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """`draws[b]` distinct leaves per branch from the residual, by stochastic beam search
    (top-down Gumbel-top-k over the trie's residual masses). Returns (depth, leaf, branch)
    grouped by branch, each branch's leaves in sampling order (decreasing Gumbel).

    Paths of one query may end at different depths (a free lattice node ends a path), so
    the leaves found so far stay in the running: at each depth the top `draws[b]` of
    (leaves found, children of open nodes) are kept, and a leaf can be pushed out by
    deeper paths with larger keys. The result is exactly the top-k of the perturbed leaves.
    """
    log_m = trie.levels[0].log_m
    start = ((draws > 0) & torch.isfinite(log_m)).nonzero().flatten()
    node, gumbel = start, torch.zeros(len(start), dtype=torch.float64)
    empty = torch.zeros(0, dtype=torch.long)
    leaf_depth, leaf, leaf_key, leaf_branch = empty, empty, empty.double(), empty
    depth = 0
    while len(node):
        if depth:
            trie.keeper.next_step()
            trie.expand(depth, node)
            trie.keeper.settle(trie, spare=True)
        branch = trie.levels[depth].branch[node]
        # a node adds at most `draws` of its branch to the top: only its own top ones compete
        width = min(trie.V, int(draws[branch].max()))
        top, top_token = top_children(trie, depth, node, gumbel, width)
        width = top.shape[1]
        flat = torch.cat([leaf_key, top.flatten().cpu()])
        group = torch.cat([leaf_branch, branch.repeat_interleave(width)])
        keep = top_per_group(flat, group, draws)
        found = len(leaf_key)
        old, new = keep[keep < found], keep[keep >= found] - found
        leaf_depth, leaf, leaf_key, leaf_branch = (x[old] for x in (leaf_depth, leaf,
                                                                    leaf_key, leaf_branch))
        symbol = new % width if top_token is None else top_token.flatten().cpu()[new]
        child = trie.child_nodes(depth, node[new // width], symbol)
        done = trie.finished(depth + 1, child)
        keys = top.flatten().cpu()[new]
        leaf_depth = torch.cat([leaf_depth, torch.full((int(done.sum()),), depth + 1)])
        leaf = torch.cat([leaf, child[done]])
        leaf_key = torch.cat([leaf_key, keys[done]])
        leaf_branch = torch.cat([leaf_branch, trie.levels[depth + 1].branch[child[done]]])
        node, gumbel = child[~done], keys[~done]
        depth += 1
    trie.keeper.settle(trie)
    order = torch.sort(leaf_key, descending=True, stable=True).indices
    order = order[torch.sort(leaf_branch[order], stable=True).indices]
    return leaf_depth[order], leaf[order], leaf_branch[order]


def top_children(trie: Trie, depth: int, nodes: Tensor, bound: Tensor, k: int
                 ) -> tuple[Tensor, Tensor | None]:
    """`top_truncated_gumbel` over the residual children of distinct expanded nodes.
    Below half the vocabulary (a language model's) no float64 residual row is built: the
    residual's float32 weights (`residual_proposal`) give the block masses, and only the opened
    blocks' logits are computed (`residual_blocks`)."""
    generator, device = trie.batch.generator, trie.batch.device
    blocks = None if 2 * k > trie.V else residual_blocks(trie, depth, nodes,
                                                         block_width(trie.V, k))
    if blocks is None:
        return top_truncated_gumbel(residual_logits(trie, depth, nodes), bound.to(device),
                                    generator, k)
    return top_conditioned(blocks, bound.to(device), generator, k)


def residual_blocks(trie: Trie, depth: int, nodes: Tensor, width: int) -> BlockLogits | None:
    """The residual logits of distinct expanded nodes (`residual_logits`), seen in blocks
    of `width` symbols: block masses from the residual's float32 weights (one pass); the
    opened blocks' logits from the model's rows at those symbols only, each changed child
    its own residual. None where `residual_proposal` is."""
    choice, rows = proposal(trie, depth, nodes)
    at, token, log_m = changed = changed_children(trie, depth, nodes)
    residual = residual_proposal(trie, depth, nodes, (choice, rows), changed)
    if residual is None:
        return None
    level = trie.levels[depth]
    masses = block_sums(residual[0].weights, width)
    total, log_total = choice.block_cdf[:, -1], choice.log_total()
    if residual[1] is not None:
        masses = masses[residual[1]]
    if rows is not None:
        total, log_total = total[rows], log_total[rows]
    device = masses.device
    log_q = level.log_q[nodes].to(device)
    log_share = masses.double().log_() - torch.where(total > 0, total.log(), 0.0)[:, None]
    offset = log_q - torch.where(torch.isneginf(log_total), 0.0, log_total)
    log_psi = guide(trie, depth, nodes)
    model_rows = trie.rows(depth, nodes)
    lattice_nodes = level.lattice_node[nodes].to(device)
    allowed = trie.batch.lattice.on(device).allowed
    changed_key, order = torch.sort(at * trie.V + token)
    changed_key, changed_log_m = changed_key.to(device), log_m[order].to(device)

    def logits_at(symbols: Tensor) -> Tensor:
        picked = level.log_probs.pick(model_rows.repeat_interleave(symbols.shape[1]),
                                      symbols.flatten()).view_as(symbols)
        logits = picked + offset[:, None]
        if log_psi is not None:
            logits.add_(log_psi.gather(1, symbols))
        logits.masked_fill_(~allowed[lattice_nodes[:, None], symbols], -math.inf)
        if len(changed_key):
            key = torch.arange(len(symbols), device=device)[:, None] * trie.V + symbols
            found = torch.searchsorted(changed_key, key).clamp_max_(len(changed_key) - 1)
            logits = torch.where(changed_key[found] == key, changed_log_m[found], logits)
        return logits

    return BlockLogits(log_share + log_q[:, None], width, trie.V, logits_at)
