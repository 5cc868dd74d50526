"""The restricted proposal q(· | node) at the trie's expanded nodes, and the memo that spares
rebuilding it.

q(v | node) ∝ p(v | node)·1[v allowed after node], or under a surrogate's twist
p(v | node)·1[allowed]·ψ(v). A walk step expands its new nodes and then draws from them at
once, and a twisted step asks for the same nodes' ψ several times (their proposal, their
children's steps): `Memo` keeps the last of each, so either is built once per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from seqq.estimators.engine.categorical import Categorical
from seqq.estimators.engine.distinct import distinct
from seqq.estimators.engine.rollout import conditional
from seqq.estimators.engine.twist import twist_rows

if TYPE_CHECKING:
    from seqq.estimators.engine.trie.tree import Trie


@dataclass
class Memo:
    """The proposals and twists built last, for the step that asks for them again."""

    # the restricted proposals of the rows expanded last: (depth, nodes, q(· | node));
    # a walk draws from the nodes it has just expanded without rebuilding their proposals
    fresh: tuple[int, Tensor, Categorical] | None = None
    # the twist of the last distinct nodes asked for: (depth, sorted nodes, log ψ [n, V]);
    # a walk step asks for its nodes' twist, then for its new children's parents (a subset)
    guide: tuple[int, Tensor, Tensor] | None = None


def normalisers(trie: Trie, depth: int, nodes: Tensor, log_probs: Tensor) -> Tensor:
    """The log normaliser of the proposal at newly expanded nodes (their `log_probs`
    rows): log p(V_k | prefix), or under a twist log Σ_v p(v | prefix)·1[allowed]·ψ(v).
    Their proposal is kept in the memo for the walk that expanded them."""
    log_psi = guide(trie, depth, nodes)
    choice = Categorical.from_logits(
        log_probs if log_psi is None else log_probs + log_psi,
        trie.batch.domain(trie.levels[depth].lattice_node[nodes], sparse=True))
    trie.memo.fresh = (depth, nodes, choice)
    return choice.log_total()


def proposal(trie: Trie, depth: int, nodes: Tensor) -> tuple[Categorical, Tensor | None]:
    """q(· | node) of distinct expanded nodes, and for each node its row in it (None: row
    i is node i): the one `normalisers` built if it holds them all, else built here."""
    fresh = trie.memo.fresh
    if fresh is not None and fresh[0] == depth and len(fresh[1]):
        _, known, choice = fresh
        if len(known) == len(nodes) and torch.equal(known, nodes):
            return choice, None  # a walk whose nodes were all new: the usual case
        position = torch.full((int(max(known.max(), nodes.max())) + 1,), -1)
        position[known] = torch.arange(len(known))
        rows = position[nodes]
        if bool((rows >= 0).all()):
            return choice, rows.to(choice.weights.device)
    level, log_psi = trie.levels[depth], guide(trie, depth, nodes)
    log_probs = level.log_probs.index_select(trie.rows(depth, nodes))
    return Categorical.from_logits(log_probs if log_psi is None else log_probs + log_psi,
                                   trie.batch.domain(level.lattice_node[nodes], sparse=True)
                                   ), None


def guide(trie: Trie, depth: int, nodes: Tensor) -> Tensor | None:
    """log ψ [n, V] of the twist at the nodes (None without messages)."""
    if trie.messages is None:
        return None
    last = trie.memo.guide
    if last is not None and last[0] == depth:
        _, known, log_psi = last
        at = torch.searchsorted(known, nodes).clamp_max(len(known) - 1)
        if len(known) and bool((known[at] == nodes).all()):
            return twist_rows(log_psi, at.to(log_psi.device))
    level = trie.levels[depth]
    log_psi = trie.messages.log_values(level.lattice_node[nodes],
                                       level.context[nodes].to(trie.batch.device))
    if len(nodes) < 2 or bool((nodes[1:] > nodes[:-1]).all()):  # sorted: searchable
        trie.memo.guide = (depth, nodes, log_psi)
    return log_psi


def child_steps(trie: Trie, depth: int, parents: Tensor, tokens: Tensor
                ) -> tuple[Tensor, Tensor, Tensor]:
    """What the children (parent, token) of expanded nodes add to log p, log q and
    log w (CPU, float64), from scalar gathers: log p(v | parent) masked to the allowed,
    log q(v | parent) = log p + log ψ − the parent's cached log normaliser, and
    log w = that normaliser − log ψ (log ψ = 0 without a twist). No [n, V] pass but the
    twist's, which the walk has usually just computed for these parents."""
    level, device = trie.levels[depth], trie.batch.device
    rows, dev_t = trie.rows(depth, parents), tokens.to(device)
    allowed = trie.batch.lattice.on(device).allowed[level.lattice_node[parents].to(device),
                                                    dev_t]
    picked = torch.where(allowed, level.log_probs.pick(rows, dev_t), -torch.inf)
    log_mass = level.log_mass[rows.to(device)]
    if trie.messages is None:
        log_q = conditional(picked[:, None], log_mass)[:, 0]
        return picked.double().cpu(), log_q.cpu(), log_mass.double().cpu()
    nodes, at = distinct(parents, level.size)
    twist = guide(trie, depth, nodes)[at.to(device), dev_t]
    log_q = conditional((picked + twist)[:, None], log_mass)[:, 0]
    return picked.double().cpu(), log_q.cpu(), (log_mass.double() - twist).cpu()
