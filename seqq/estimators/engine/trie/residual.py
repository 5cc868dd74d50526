"""The residual: what is left of q once leaves are removed (UniqueRandomizer's trie, which is
also the hybrid's pruned tree of App. D).

Each node keeps its *unsampled* mass m(node) = q(leaves below it not yet removed), in log
space, float64. Removing a leaf sets its mass to zero and recomputes its ancestors from their
children (`remove`); children never created keep their full mass q(node)·q(v | node), read off
the parent's row, so only the *changed* children (a leaf removed at or below them) are stored.

`residual_masses` is the one way a node's mass is computed; `residual_logits` gives every
child's mass as a float64 row (its fallback, and what draws fall back on where float32
underflows); `residual_proposal` gives the residual as float32 weights for drawing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from seqq.estimators.engine.categorical import (
    Categorical,
    Domain,
    fill_outside,
    logsumexp_,
    unshifted_rows,
)
from seqq.estimators.engine.summary import group_logsumexp
from seqq.estimators.engine.trie.proposals import guide, proposal

if TYPE_CHECKING:
    from seqq.estimators.engine.trie.tree import Trie

RESIDUAL_FLOOR = 2.0**-100  # float32 residual weights summing below this are redone in float64
# (a denormal's absolute error of 2⁻¹⁵⁰, over 50 000 symbols, is then under 1e-10 of the row)

Changed = tuple[Tensor, Tensor, Tensor]  # (index into the nodes, symbol, log residual), CPU


def changed_children(trie: Trie, depth: int, nodes: Tensor) -> Changed:
    """The children of distinct nodes whose residual is no longer their q-mass (a leaf
    removed at or below them), as (index into `nodes`, symbol, log residual) on the CPU.
    Every other child's residual is log q(node) + log q(v | node)."""
    changed = trie.removed_below.get(depth + 1, nodes[:0])
    if not len(changed):
        return nodes[:0], nodes[:0], torch.zeros(0, dtype=torch.float64)
    child = trie.levels[depth + 1]
    position = torch.full((trie.levels[depth].size,), -1)
    position[nodes] = torch.arange(len(nodes))
    at = position[child.parent[changed]]
    changed = changed[at >= 0]
    return at[at >= 0], child.token[changed], child.log_m[changed]


def remove(trie: Trie, depth_nodes: list[tuple[int, Tensor]]) -> None:
    """Take leaves out of the residual (set their mass to zero) and recompute their
    ancestors' masses bottom-up from their children (`residual_masses`)."""
    touched: dict[int, Tensor] = {}
    for depth, nodes in depth_nodes:
        if len(nodes):
            trie.levels[depth].log_m[nodes] = -math.inf
            touched[depth] = torch.cat([touched.get(depth, nodes[:0]), nodes])
    for depth in range(max(touched, default=0), -1, -1):
        if depth not in touched:
            continue
        known = trie.removed_below.get(depth, touched[depth][:0])
        trie.removed_below[depth] = torch.unique(torch.cat([known, touched[depth]]))
        if depth:  # the parents' masses read their children's from `removed_below`
            parents = torch.unique(trie.levels[depth].parent[touched[depth]])
            trie.levels[depth - 1].log_m[parents] = residual_masses(trie, depth - 1, parents)
            touched[depth - 1] = torch.cat([touched.get(depth - 1, parents[:0]), parents])
    trie.keeper.settle(trie)


def residual_masses(trie: Trie, depth: int, nodes: Tensor) -> Tensor:
    """[n] CPU: log Σ exp of the distinct expanded nodes' `residual_logits` rows, without
    building them. The uncreated children hold q(node)·(1 − s), s being the changed
    children's share of the proposal's normaliser Z(node) (they were drawn, so they lie in
    the domain), gathered at those children only: no pass over the [n, V] rows, which a
    large vocabulary makes costly. The changed children's residuals are added to it. Where
    s > ½ the difference would lose digits, and an exhausted node must come out exactly 0:
    those nodes are summed over their rows instead (`_masses_by_sums`)."""
    level, device = trie.levels[depth], trie.batch.device
    at, token, log_m = changed_children(trie, depth, nodes)
    rows = trie.rows(depth, nodes[at])
    dev_token = token.to(device)
    log_weight = level.log_probs.pick(rows, dev_token).double()
    log_psi = guide(trie, depth, nodes)
    if log_psi is not None:
        log_weight += log_psi[at.to(device), dev_token]
    log_mass = level.log_mass[rows.to(device)].double()  # finite: a leaf was drawn below
    share_of = (log_weight - log_mass).exp().cpu()
    share = torch.zeros(len(nodes), dtype=torch.float64).index_add_(0, at, share_of)
    uncreated = level.log_q[nodes] + torch.log1p(-share.clamp_max(1.0))
    masses = torch.logaddexp(uncreated, group_logsumexp(log_m, at, len(nodes)))
    dense = (share > 0.5).nonzero().flatten()
    if len(dense):
        masses[dense] = _masses_by_sums(trie, depth, nodes[dense])
    return masses


def _masses_by_sums(trie: Trie, depth: int, nodes: Tensor) -> Tensor:
    """`residual_masses` by sums only, never differences, so an exhausted node's mass is
    exactly 0: the uncreated children's mass is exp(offset)·Σ exp(log p (+ log ψ)) over
    them, summed in float64 with no shift (a model's log-probabilities need none; nodes
    whose proposal normaliser Z is outside `unshifted_rows`' range, or whose sum
    overflows, fall back on the float64 `residual_logits`), plus the changed children's
    residuals."""
    below = _below(trie, depth, nodes)
    weights = below.log_probs.double()
    if below.guide is not None:
        weights.add_(below.guide)
    fill_outside(weights.exp_(), below.domain, 0.0)
    at, token, log_m = below.changed
    weights[at.to(weights.device), token.to(weights.device)] = 0.0
    total = weights.sum(-1)
    redo = (~unshifted_rows(below.log_mass.double().exp()) | ~torch.isfinite(total))
    redo = redo.cpu().nonzero().flatten()
    uncreated = (total.log_() + below.offset).cpu()
    masses = torch.logaddexp(uncreated, group_logsumexp(log_m, at, len(nodes)))
    if len(redo):
        masses[redo] = logsumexp_(residual_logits(trie, depth, nodes[redo])).cpu()
    return masses


def residual_logits(trie: Trie, depth: int, nodes: Tensor) -> Tensor:
    """[n, V] float64 log unsampled mass of every child of the (expanded, distinct) nodes:
    a changed child's own residual mass, else log q(node) + log q(v | node), built by one
    promoting pass over the model's rows and one masking pass."""
    below = _below(trie, depth, nodes)
    logits = below.log_probs + below.offset[:, None]
    if below.guide is not None:
        logits.add_(below.guide)
    fill_outside(logits, below.domain, -math.inf)
    at, token, log_m = below.changed
    logits[at.to(logits.device), token.to(logits.device)] = log_m.to(logits.device)
    return logits


@dataclass
class _Below:
    """What the residual masses below expanded nodes are made of."""

    log_probs: Tensor  # [n, V] the model's rows at the nodes
    log_mass: Tensor  # [n] log Z(node): the proposal's normaliser, log Σ p(v)·ψ(v) over the domain
    offset: Tensor  # [n] float64 log q(node) − log Z(node)
    guide: Tensor | None  # [n, V] log ψ of a twist
    domain: Domain  # the symbols allowed at each node
    changed: Changed  # `changed_children`


def _below(trie: Trie, depth: int, nodes: Tensor) -> _Below:
    level = trie.levels[depth]
    rows = trie.rows(depth, nodes)
    log_probs = level.log_probs.index_select(rows)
    device = log_probs.device
    log_mass = level.log_mass[rows.to(device)]
    offset = level.log_q[nodes].to(device) - torch.where(
        torch.isneginf(log_mass), 0.0, log_mass).double()  # log q(node) − log Z(node)
    return _Below(log_probs, log_mass, offset, guide(trie, depth, nodes),
                  trie.batch.domain(level.lattice_node[nodes], sparse=True),
                  changed_children(trie, depth, nodes))


def residual_proposal(trie: Trie, depth: int, nodes: Tensor,
                      known: tuple[Categorical, Tensor | None] | None = None,
                      changed: Changed | None = None
                      ) -> tuple[Categorical, Tensor | None] | None:
    """q(· | node, not removed) of distinct expanded nodes, as `proposals.proposal` gives
    q(· | node): the proposal's float32 weights with each changed child's weight set to its
    residual (rounded like every proposal draw). A node with nothing removed below it draws
    from its proposal itself, which its expansion has usually just built. None if some
    node's residual weights underflow float32 (below RESIDUAL_FLOOR while its residual is
    not 0): such nodes need the float64 `residual_logits`. `known` and `changed`: the
    nodes' proposal and `changed_children`, when the caller has them."""
    choice, rows = known or proposal(trie, depth, nodes)
    at, token, log_m = changed or changed_children(trie, depth, nodes)
    if not len(at):
        return choice, rows
    weights = choice.weights.clone() if rows is None else choice.weights[rows]
    shift = choice.shift if rows is None else choice.shift[rows]
    log_total = choice.log_total() if rows is None else choice.log_total()[rows]
    device = weights.device
    log_q = trie.levels[depth].log_q[nodes].to(device)
    scale = log_q - log_total + shift.double()  # log of (residual mass / weight)
    dev_at = at.to(device)
    weights[dev_at, token.to(device)] = (log_m.to(device) - scale[dev_at]).exp().to(
        weights.dtype)
    residual = Categorical.from_weights(weights, shift, choice.width)
    alive = torch.isfinite(trie.levels[depth].log_m[nodes]).to(device)
    if bool((alive & (residual.block_cdf[:, -1] < RESIDUAL_FLOOR)).any()):
        return None
    return residual, None
