"""One prefix trie over the restricted proposal tree of every query of a batch (004 Alg. 2).

Every sampling estimator walks this trie, so a prefix evaluated once is never paid for again:
each expanded node keeps the model's log p(· | prefix) row and its state, and a walk only calls
the model for prefixes that are new (all new prefixes at one depth go through one batched call).

Each node also keeps its *unsampled* restricted mass m(node) = q(leaves below it not yet removed)
(UniqueRandomizer's trie, which is also the hybrid's pruned tree of App. D): removing a leaf sets
its mass to zero and recomputes its ancestors as sums of their children (no subtraction, so no
cancellation). Children never created keep their full mass q(node)·q(v | node), read off the
parent's row. Masses are joint q-masses in log space, float64.

Walks draw i.i.d. paths either from q (`policy="proposal"`) or from the residual
q(· | not removed) (`policy="residual"`); `sample_without_replacement` draws distinct paths
from the residual with stochastic beam search (Gumbel-top-k, top-down).

With `messages` (a surrogate's backward messages, twisted.py) the trie's proposal is the twisted
q̃(v | node) ∝ p(v | node)·1[allowed]·ψ(v), ψ the surrogate's chance of completing the query
after v; each node then also carries its surrogate state. Every trie method (importance, wor,
hindsight_gumbel) works unchanged on q̃, with weights p/q̃ exact whatever the surrogate is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import torch
from torch import Tensor

from seqq.estimators.engine.allowance import NO_CUT, Charge
from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.categorical import (
    Categorical,
    Domain,
    block_sums,
    fill_outside,
    logsumexp_,
    unshifted_rows,
)
from seqq.estimators.engine.distinct import distinct
from seqq.estimators.engine.rollout import conditional
from seqq.estimators.engine.row_blocks import RowBlocks
from seqq.estimators.engine.selection import top_k
from seqq.estimators.engine.summary import group_logsumexp
from seqq.estimators.engine.twist import twist_rows
from seqq.models.counting import OwnedState

if TYPE_CHECKING:
    from seqq.estimators.engine.twist import Messages

Policy = Literal["proposal", "residual"]
RESIDUAL_FLOOR = 2.0**-100  # float32 residual weights summing below this are redone in float64
# (a denormal's absolute error of 2⁻¹⁵⁰, over 50 000 symbols, is then under 1e-10 of the row)


@dataclass
class Level:
    """The nodes at one depth, for all branches. Node i has been expanded when row[i] ≥ 0:
    log_probs[row[i]] is p(next | node) and its state is row `index[row]` of `chunks[chunk[row]]`.

    Levels grow as walks add nodes and rows (`append`): each field is a view of the used part
    of a buffer that doubles when full, so growing a level by many small walks costs time
    linear in its size, not quadratic (as re-concatenating every field would)."""

    branch: Tensor  # [n] branch (task) of the batch
    lattice_node: Tensor  # [n] the query-lattice node the prefix has reached
    parent: Tensor  # [n] node index at the previous depth, -1 at roots
    token: Tensor  # [n] symbol at this depth, -1 at roots
    log_p: Tensor  # [n] float64 joint log p of the prefix
    log_q: Tensor  # [n] float64 joint log q of the prefix
    log_w: Tensor  # [n] float64 log p − log q of the prefix (Σ_j log p(V_j | x_<j) untwisted)
    log_m: Tensor  # [n] float64 log of the unsampled q-mass below the node
    row: Tensor  # [n] row of an expanded node, -1 otherwise
    log_probs: RowBlocks  # [r, V] model output per expanded node (model's device)
    log_mass: Tensor  # [r] log normaliser of each expanded node's proposal (`_masses`)
    context: Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))  # [n]
    chunk: Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))  # [r]
    index: Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))  # [r]
    chunks: list[OwnedState] = field(default_factory=list)
    keys: Tensor | None = None  # sorted parent·V + token of the nodes (lookup), built lazily
    order: Tensor | None = None  # node of each key
    buffers: dict[str, Tensor] = field(default_factory=dict, repr=False)  # behind the fields

    @property
    def size(self) -> int:
        return len(self.branch)

    def append(self, **fields: Tensor) -> None:
        """Add entries at the end of the named fields (all node fields, or all row fields).
        `log_probs` gain a block (`RowBlocks`: model outputs are never copied). An empty
        field adopts its new entries as they are (a level's first walk copies nothing), so
        callers hand over tensors they own, one per field."""
        for name, new in fields.items():
            used = getattr(self, name)
            if isinstance(used, RowBlocks):
                used.append(new)
                continue
            dtype = (used.dtype if used.dtype == new.dtype
                     else torch.promote_types(used.dtype, new.dtype))
            if not len(used):
                adopted = new.to(dtype)
                self.buffers[name] = adopted
                setattr(self, name, adopted)
                continue
            n, end = len(used), len(used) + len(new)
            buffer = self.buffers.get(name, used)
            if buffer.data_ptr() != used.data_ptr():  # the field was replaced: start afresh
                buffer = used
            if end > len(buffer) or buffer.dtype != dtype:
                grown = new.new_empty((max(end, 2 * len(buffer)), *new.shape[1:]), dtype=dtype)
                grown[:n] = used
                buffer = grown
            buffer[n:end] = new
            self.buffers[name] = buffer
            setattr(self, name, buffer[:end])

    def index_keys(self, keys: Tensor, nodes: Tensor) -> None:
        """Merge new nodes (sorted, distinct `keys` absent so far) into the lookup's order."""
        if self.keys is None:
            return  # built at the next lookup
        position = torch.searchsorted(self.keys, keys) + torch.arange(len(keys))
        is_new = torch.zeros(len(self.keys) + len(keys), dtype=torch.bool)
        is_new[position] = True
        merged_keys, merged_order = self.keys.new_empty(len(is_new)), self.order.new_empty(
            len(is_new))
        merged_keys[position], merged_order[position] = keys, nodes
        merged_keys[~is_new], merged_order[~is_new] = self.keys, self.order
        self.keys, self.order = merged_keys, merged_order


def _empty_level(V: int, device: torch.device) -> Level:
    long, f64 = torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.float64)
    return Level(long, long, long, long, f64, f64, f64, f64, long,
                 RowBlocks(torch.zeros(0, V, device=device)),
                 torch.zeros(0, dtype=torch.float64, device=device))


class Trie:
    """The prefix trie of all branches of a batch; roots are the branches (depth 0)."""

    def __init__(self, batch: Batch, messages: Messages | None = None):
        self.batch = batch
        self.messages = messages
        self.V = batch.vocab_size
        N = len(batch.branch_task)
        tasks = batch.branch_task.to(batch.device)
        zero = torch.zeros(N, dtype=torch.float64)
        roots = Level(
            branch=torch.arange(N), lattice_node=batch.branch_root.clone(),
            parent=torch.full((N,), -1), token=torch.full((N,), -1),
            log_p=zero, log_q=zero.clone(), log_w=zero.clone(), log_m=zero.clone(),
            row=torch.arange(N), log_probs=RowBlocks(batch.root_log_probs[tasks]),
            log_mass=torch.zeros(0, dtype=torch.float64),
            chunk=torch.zeros(N, dtype=torch.long), index=torch.arange(N),
            chunks=[batch.counter.select(batch.root_state, tasks)],
            context=(torch.zeros(N, dtype=torch.long) if messages is None
                     else messages.context.cpu()))
        self.levels = [roots]
        # the restricted proposals of the rows expanded last: (depth, nodes, q(· | node));
        # a walk draws from the nodes it has just expanded without rebuilding their proposals
        self._fresh: tuple[int, Tensor, Categorical] | None = None
        # the twist of the last distinct nodes asked for: (depth, sorted nodes, log ψ [n, V]);
        # a walk step asks for its nodes' twist, then for its new children's parents (a subset)
        self._last_guide: tuple[int, Tensor, Tensor] | None = None
        # per depth, the sorted nodes with a removed leaf below them (or removed themselves):
        # every other node's residual q(· | node, not removed) is its proposal q(· | node)
        self.removed_below: dict[int, Tensor] = {}
        roots.log_mass = self._masses(0, torch.arange(N), roots.log_probs.whole())

    @classmethod
    def from_beam(cls, batch: Batch, beam_levels: list, messages: Messages | None = None
                  ) -> Trie:
        """The trie holding a finished beam search's tree (App. D's partial view of Q's tree):
        its expanded nodes keep their rows and states, so samples pay nothing inside it. With
        `messages` the nodes' proposal masses are re-derived under the twisted q̃."""
        trie = cls(batch, messages)
        trie.levels = []
        for b in beam_levels:
            expanded = (b.row >= 0).nonzero().flatten()  # rows are the expanded nodes in order
            log_probs = (b.log_probs if b.log_probs is not None
                         else torch.zeros(0, batch.vocab_size, device=batch.device))
            trie.levels.append(Level(
                branch=b.branch, lattice_node=b.lattice_node, parent=b.parent, token=b.token,
                log_p=b.log_p, log_q=b.log_q, log_w=b.log_p - b.log_q, log_m=b.log_q.clone(),
                row=b.row.clone(), log_probs=RowBlocks(log_probs),
                log_mass=torch.zeros(len(expanded), dtype=torch.float64),  # set below
                context=torch.zeros(len(b.branch), dtype=torch.long),
                chunk=torch.zeros(len(expanded), dtype=torch.long),
                index=torch.arange(len(expanded)),
                chunks=[b.state] if b.state is not None else []))
        if messages is not None:
            trie.levels[0].context = messages.context.cpu()
        for depth, level in enumerate(trie.levels):  # a level's twist needs its parents' masses
            if depth and messages is not None:
                trie._twist_level(depth)
            level.log_mass = trie._masses(depth, (level.row >= 0).nonzero().flatten(),
                                          level.log_probs.whole())
        return trie

    def _twist_level(self, depth: int) -> None:
        """Surrogate states, log q̃ and log w of a level built without the twist."""
        level, parent = self.levels[depth], self.levels[depth - 1]
        p, t = level.parent, level.token
        _, log_q, log_w = self._child_steps(depth - 1, p, t)
        level.context = self.messages.next_context_cpu[parent.context[p], t]
        level.log_q = parent.log_q[p] + log_q
        level.log_w = parent.log_w[p] + log_w
        level.log_m = level.log_q.clone()

    # --- structure ------------------------------------------------------------------------
    def level(self, depth: int) -> Level:
        while len(self.levels) <= depth:
            self.levels.append(_empty_level(self.V, self.batch.device))
        return self.levels[depth]

    def finished(self, depth: int, nodes: Tensor) -> Tensor:
        """Which nodes end a path: nothing after them is restricted (their lattice node is free)."""
        return self.batch.lattice.free[self.levels[depth].lattice_node[nodes]]

    def _masses(self, depth: int, nodes: Tensor, log_probs: Tensor) -> Tensor:
        """The log normaliser of the proposal at newly expanded nodes (their `log_probs`
        rows): log p(V_k | prefix), or under a twist log Σ_v p(v | prefix)·1[allowed]·ψ(v).
        Their proposal is kept in `_fresh` for the walk that expanded them."""
        guide = self._guide(depth, nodes)
        proposal = Categorical.from_logits(
            log_probs if guide is None else log_probs + guide,
            self.batch.domain(self.levels[depth].lattice_node[nodes], sparse=True))
        self._fresh = (depth, nodes, proposal)
        return proposal.log_total()

    def _proposal(self, depth: int, nodes: Tensor) -> tuple[Categorical, Tensor | None]:
        """q(· | node) of distinct expanded nodes, and for each node its row in it (None: row
        i is node i): the one `_masses` built if it holds them all, else built here."""
        fresh = self._fresh
        if fresh is not None and fresh[0] == depth and len(fresh[1]):
            _, known, proposal = fresh
            if len(known) == len(nodes) and torch.equal(known, nodes):
                return proposal, None  # a walk whose nodes were all new: the usual case
            position = torch.full((int(max(known.max(), nodes.max())) + 1,), -1)
            position[known] = torch.arange(len(known))
            rows = position[nodes]
            if bool((rows >= 0).all()):
                return proposal, rows.to(proposal.weights.device)
        level, guide = self.levels[depth], self._guide(depth, nodes)
        log_probs = level.log_probs.index_select(level.row[nodes])
        return Categorical.from_logits(log_probs if guide is None else log_probs + guide,
                                       self.batch.domain(level.lattice_node[nodes], sparse=True)
                                       ), None

    def _guide(self, depth: int, nodes: Tensor) -> Tensor | None:
        """log ψ [n, V] of the twist at the nodes (None without messages)."""
        if self.messages is None:
            return None
        if self._last_guide is not None and self._last_guide[0] == depth:
            _, known, guide = self._last_guide
            at = torch.searchsorted(known, nodes).clamp_max(len(known) - 1)
            if len(known) and bool((known[at] == nodes).all()):
                return twist_rows(guide, at.to(guide.device))
        level = self.levels[depth]
        guide = self.messages.log_values(level.lattice_node[nodes],
                                         level.context[nodes].to(self.batch.device))
        if len(nodes) < 2 or bool((nodes[1:] > nodes[:-1]).all()):  # sorted: searchable
            self._last_guide = (depth, nodes, guide)
        return guide

    def child_nodes(self, depth: int, parents: Tensor, tokens: Tensor) -> Tensor:
        """Nodes at depth+1 for (parent, token) pairs, created where missing (no model call)."""
        child = self.level(depth + 1)
        keys, inverse = distinct(parents * self.V + tokens, self.levels[depth].size * self.V)
        if child.size:
            found = self._lookup(child, keys)
            new = (found < 0).nonzero().flatten()
        else:  # a depth no walk has reached yet: every child is new
            found, new = torch.empty_like(keys), slice(None)
        created = keys[new]
        if len(created):
            p, t = created // self.V, created % self.V
            parent = self.levels[depth]
            step_p, step_q, step_w = self._child_steps(depth, p, t)
            log_q = parent.log_q[p] + step_q
            context = (parent.context[p] if self.messages is None
                       else self.messages.next_context_cpu[parent.context[p], t])
            found[new] = child.size + torch.arange(len(created))
            child.index_keys(created, found[new])
            child.append(branch=parent.branch[p],
                         lattice_node=self.batch.lattice.advance(parent.lattice_node[p], t),
                         parent=p, token=t, log_p=parent.log_p[p] + step_p, log_q=log_q,
                         log_w=parent.log_w[p] + step_w, log_m=log_q.clone(),
                         row=torch.full((len(created),), -1), context=context)
        return found[inverse]

    def _child_steps(self, depth: int, parents: Tensor, tokens: Tensor
                     ) -> tuple[Tensor, Tensor, Tensor]:
        """What the children (parent, token) of expanded nodes add to log p, log q and
        log w (CPU, float64), from scalar gathers: log p(v | parent) masked to the allowed,
        log q(v | parent) = log p + log ψ − the parent's cached log normaliser, and
        log w = that normaliser − log ψ (log ψ = 0 without a twist). No [n, V] pass but the
        twist's, which the walk has usually just computed for these parents."""
        level, device = self.levels[depth], self.batch.device
        rows, dev_t = level.row[parents], tokens.to(device)
        allowed = self.batch.lattice.on(device).allowed[level.lattice_node[parents].to(device),
                                                        dev_t]
        picked = torch.where(allowed, level.log_probs.pick(rows, dev_t), -torch.inf)
        log_mass = level.log_mass[rows.to(device)]
        if self.messages is None:
            log_q = conditional(picked[:, None], log_mass)[:, 0]
            return picked.double().cpu(), log_q.cpu(), log_mass.double().cpu()
        nodes, at = distinct(parents, level.size)
        twist = self._guide(depth, nodes)[at.to(device), dev_t]
        log_q = conditional((picked + twist)[:, None], log_mass)[:, 0]
        return picked.double().cpu(), log_q.cpu(), (log_mass.double() - twist).cpu()

    def _lookup(self, level: Level, keys: Tensor) -> Tensor:
        if level.size == 0:
            return torch.full((len(keys),), -1)
        if level.keys is None:
            level.keys, level.order = torch.sort(level.parent * self.V + level.token)
        pos = torch.searchsorted(level.keys, keys).clamp_max(level.size - 1)
        return torch.where(level.keys[pos] == keys, level.order[pos], -1)

    def expand(self, depth: int, nodes: Tensor) -> None:
        """Make sure the nodes (at depth ≥ 1, not finished) carry p(· | node):
        every node not yet expanded costs one model call, all of them in one chunked step.
        Its row chunks' new states are kept as the level's chunks, never joined (a join would
        copy every new state once more)."""
        level = self.levels[depth]
        todo = distinct(nodes[level.row[nodes] < 0], level.size)[0]
        if not len(todo):
            return
        parents = self.levels[depth - 1]
        prow = parents.row[level.parent[todo]]
        chunk = parents.chunk[prow]
        if len(parents.chunks) > 1 and not bool((chunk[1:] >= chunk[:-1]).all()):
            by_chunk = torch.sort(chunk, stable=True).indices  # each parent chunk's rows together
            todo, prow, chunk = todo[by_chunk], prow[by_chunk], chunk[by_chunk]
        device = self.batch.device
        log_probs, states = self.batch.counter.step_parts(
            parents.chunks, level.token[todo].to(device), parents.index[prow].to(device), chunk)
        sizes = torch.tensor([len(state.owners) for state in states])
        starts = sizes.cumsum(0) - sizes
        level.row[todo] = len(level.log_probs) + torch.arange(len(todo))
        level.append(log_probs=log_probs, log_mass=self._masses(depth, todo, log_probs),
                     chunk=torch.arange(len(level.chunks), len(level.chunks) + len(states)
                                        ).repeat_interleave(sizes),
                     index=torch.arange(len(todo)) - starts.repeat_interleave(sizes))
        level.chunks.extend(states)

    # --- residual masses --------------------------------------------------------------------
    def residual_logits(self, depth: int, nodes: Tensor) -> Tensor:
        """[n, V] float64 log unsampled mass of every child of the (expanded, distinct) nodes:
        a changed child's own residual mass, else log q(node) + log q(v | node), built by one
        promoting pass over the model's rows and one masking pass."""
        below = self._below(depth, nodes)
        logits = below.log_probs + below.offset[:, None]
        if below.guide is not None:
            logits.add_(below.guide)
        fill_outside(logits, below.domain, -math.inf)
        at, token, log_m = below.changed
        logits[at.to(logits.device), token.to(logits.device)] = log_m.to(logits.device)
        return logits

    def _residual_masses(self, depth: int, nodes: Tensor) -> Tensor:
        """[n] CPU: log Σ exp of the distinct expanded nodes' `residual_logits` rows, without
        building them. The uncreated children hold q(node)·(1 − s), s being the changed
        children's share of the proposal's normaliser Z(node) (they were drawn, so they lie in
        the domain), gathered at those children only: no pass over the rows, which over
        GPT-2's vocabulary was a fifth of a WOR estimate. The changed children's residuals are
        added to it. Where s > ½ the difference would lose digits, and an exhausted node must
        come out exactly 0: those nodes are summed over their rows (`_summed_residual_masses`)."""
        level, device = self.levels[depth], self.batch.device
        at, token, log_m = self._changed_children(depth, nodes)
        rows = level.row[nodes[at]]
        dev_token = token.to(device)
        log_weight = level.log_probs.pick(rows, dev_token).double()
        guide = self._guide(depth, nodes)
        if guide is not None:
            log_weight += guide[at.to(device), dev_token]
        log_mass = level.log_mass[rows.to(device)].double()  # finite: a leaf was drawn below
        share_of = (log_weight - log_mass).exp().cpu()
        share = torch.zeros(len(nodes), dtype=torch.float64).index_add_(0, at, share_of)
        uncreated = level.log_q[nodes] + torch.log1p(-share.clamp_max(1.0))
        masses = torch.logaddexp(uncreated, group_logsumexp(log_m, at, len(nodes)))
        dense = (share > 0.5).nonzero().flatten()
        if len(dense):
            masses[dense] = self._summed_residual_masses(depth, nodes[dense])
        return masses

    def _summed_residual_masses(self, depth: int, nodes: Tensor) -> Tensor:
        """`_residual_masses` by sums only, never differences, so an exhausted node's mass is
        exactly 0: the uncreated children's mass is exp(offset)·Σ exp(log p (+ log ψ)) over
        them, summed in float64 with no shift (a model's log-probabilities need none; nodes
        whose proposal normaliser Z is outside `unshifted_rows`' range, or whose sum
        overflows, are redone from `residual_logits`), plus the changed children's residuals."""
        below = self._below(depth, nodes)
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
            masses[redo] = logsumexp_(self.residual_logits(depth, nodes[redo])).cpu()
        return masses

    def _below(self, depth: int, nodes: Tensor) -> _Below:
        level = self.levels[depth]
        rows = level.row[nodes]
        log_probs = level.log_probs.index_select(rows)
        device = log_probs.device
        log_mass = level.log_mass[rows.to(device)]
        offset = level.log_q[nodes].to(device) - torch.where(
            torch.isneginf(log_mass), 0.0, log_mass).double()  # log q(node) − log Z(node)
        return _Below(log_probs, log_mass, offset, self._guide(depth, nodes),
                      self.batch.domain(level.lattice_node[nodes], sparse=True),
                      self._changed_children(depth, nodes))

    def _changed_children(self, depth: int, nodes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The children of distinct nodes whose residual is no longer their q-mass (a leaf
        removed at or below them), as (index into `nodes`, symbol, log residual) on the CPU.
        Every other child's residual is log q(node) + log q(v | node)."""
        changed = self.removed_below.get(depth + 1, nodes[:0])
        if not len(changed):
            return nodes[:0], nodes[:0], torch.zeros(0, dtype=torch.float64)
        child = self.levels[depth + 1]
        position = torch.full((self.levels[depth].size,), -1)
        position[nodes] = torch.arange(len(nodes))
        at = position[child.parent[changed]]
        changed = changed[at >= 0]
        return at[at >= 0], child.token[changed], child.log_m[changed]

    def remove(self, depth_nodes: list[tuple[int, Tensor]]) -> None:
        """Take leaves out of the residual (set their mass to zero) and recompute their
        ancestors' masses bottom-up as sums over children."""
        touched: dict[int, Tensor] = {}
        for depth, nodes in depth_nodes:
            if len(nodes):
                self.levels[depth].log_m[nodes] = -math.inf
                touched[depth] = torch.cat([touched.get(depth, nodes[:0]), nodes])
        for depth in range(max(touched, default=0), -1, -1):
            if depth not in touched:
                continue
            known = self.removed_below.get(depth, touched[depth][:0])
            self.removed_below[depth] = torch.unique(torch.cat([known, touched[depth]]))
            if depth:  # the parents' masses read their children's from `removed_below`
                parents = torch.unique(self.levels[depth].parent[touched[depth]])
                self.levels[depth - 1].log_m[parents] = self._residual_masses(depth - 1,
                                                                              parents)
                touched[depth - 1] = torch.cat([touched.get(depth - 1, parents[:0]), parents])

    def root_residual(self) -> Tensor:
        """log of the unsampled q-mass per branch (0 before anything is removed)."""
        return self.levels[0].log_m.clone()

    # --- i.i.d. walks ---------------------------------------------------------------------
    def walk(self, row_branch: Tensor, policy: Policy = "proposal",
             charge: Charge | None = None) -> tuple[Tensor, Tensor]:
        """One i.i.d. path per row from its branch's root: from q, or from the residual
        q(· | not removed). Returns (depth, node) of each row's leaf; rows stop at their
        lattice node is free, or early (node −1) where their prefix has no mass in the domain.
        With a `charge`, new prefixes are paid in draw order and rows past their task's cut
        stop (node −1; `charge.kept()` says which rows to keep)."""
        rows = torch.arange(len(row_branch))
        node = row_branch.clone()
        leaf_depth = torch.zeros(len(rows), dtype=torch.long)
        leaf = torch.full((len(rows),), -1)
        depth = 0
        while len(rows):
            if depth and charge is not None:
                rows, node = self._pay(depth, rows, node, charge)
            nodes, inverse = distinct(node, self.levels[depth].size)
            if depth:
                self.expand(depth, nodes)
            if policy == "proposal":  # each distinct node's proposal once, drawn by its rows
                alive, drawn = self._draw(*self._proposal(depth, nodes), inverse)
            else:
                alive, drawn = self._draw_residual(depth, nodes, inverse)
            if not bool(alive.all()):
                rows, node, drawn = rows[alive], node[alive], drawn[alive]
            node = self.child_nodes(depth, node, drawn)
            done = self.finished(depth + 1, node)
            if bool(done.any()):
                leaf_depth[rows[done]], leaf[rows[done]] = depth + 1, node[done]
                rows, node = rows[~done], node[~done]
            depth += 1
        return leaf_depth, leaf

    def _draw(self, choice: Categorical, rows_of_nodes: Tensor | None, inverse: Tensor
              ) -> tuple[Tensor, Tensor]:
        """(alive, symbol) of walking rows, each drawn from its node's row of `choice`:
        node `inverse[i]`, at row `rows_of_nodes[node]` of `choice` (None: row = node)."""
        if rows_of_nodes is None and len(inverse) == len(choice.weights):
            # one walking row per node (deep in a walk): a draw per row of `choice`, permuted
            alive = torch.isfinite(choice.log_total()).cpu()
            return alive[inverse], choice.sample(self.batch.generator).cpu()[inverse]
        at = inverse.to(self.batch.device)
        if rows_of_nodes is not None:
            at = rows_of_nodes[at]
        alive = torch.isfinite(choice.log_total())[at].cpu()
        return alive, choice.sample(self.batch.generator, at).cpu()

    def _draw_residual(self, depth: int, nodes: Tensor, inverse: Tensor
                       ) -> tuple[Tensor, Tensor]:
        """`_draw` from the residual q(· | node, not removed) (`_residual`)."""
        residual = self._residual(depth, nodes)
        if residual is None:
            residual = Categorical.from_logits(self.residual_logits(depth, nodes)), None
        return self._draw(*residual, inverse)

    def _pay(self, depth: int, rows: Tensor, node: Tensor, charge: Charge
             ) -> tuple[Tensor, Tensor]:
        """Pay for the new prefixes among the rows' nodes, each charged to the first draw that
        reaches it, and keep the rows before their task's cut."""
        level = self.levels[depth]
        new = level.row[node] < 0
        if new.any():
            nodes, inverse = distinct(node[new], level.size)
            first = torch.full((len(nodes),), NO_CUT).scatter_reduce(
                0, inverse, charge.draw[rows[new]], reduce="amin")
            charge.allowance.pay(self.batch.branch_task[level.branch[nodes]], first)
        keep = charge.allowance.keeps(charge.task[rows], charge.draw[rows])
        return rows[keep], node[keep]

    # --- sampling without replacement -------------------------------------------------------
    def sample_without_replacement(self, draws: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """`draws[b]` distinct leaves per branch from the residual, by stochastic beam search
        (top-down Gumbel-top-k over the trie's residual masses). Returns (depth, leaf, branch)
        grouped by branch, each branch's leaves in sampling order (decreasing Gumbel).

        Paths of one query may end at different depths (a free lattice node ends a path), so
        the leaves found so far stay in the running: at each depth the top `draws[b]` of
        (leaves found, children of open nodes) are kept, and a leaf can be pushed out by
        deeper paths with larger keys. The result is exactly the top-k of the perturbed leaves.
        """
        log_m = self.levels[0].log_m
        start = ((draws > 0) & torch.isfinite(log_m)).nonzero().flatten()
        node, gumbel = start, torch.zeros(len(start), dtype=torch.float64)
        empty = torch.zeros(0, dtype=torch.long)
        leaf_depth, leaf, leaf_key, leaf_branch = empty, empty, empty.double(), empty
        depth = 0
        while len(node):
            if depth:
                self.expand(depth, node)
            branch = self.levels[depth].branch[node]
            # a node adds at most `draws` of its branch to the top: only its own top ones compete
            width = min(self.V, int(draws[branch].max()))
            top, top_token = self._top_children(depth, node, gumbel, width)
            width = top.shape[1]
            flat = torch.cat([leaf_key, top.flatten().cpu()])
            group = torch.cat([leaf_branch, branch.repeat_interleave(width)])
            keep = _top_per_group(flat, group, draws)
            found = len(leaf_key)
            old, new = keep[keep < found], keep[keep >= found] - found
            leaf_depth, leaf, leaf_key, leaf_branch = (x[old] for x in (leaf_depth, leaf,
                                                                        leaf_key, leaf_branch))
            symbol = new % width if top_token is None else top_token.flatten().cpu()[new]
            child = self.child_nodes(depth, node[new // width], symbol)
            done = self.finished(depth + 1, child)
            keys = top.flatten().cpu()[new]
            leaf_depth = torch.cat([leaf_depth, torch.full((int(done.sum()),), depth + 1)])
            leaf = torch.cat([leaf, child[done]])
            leaf_key = torch.cat([leaf_key, keys[done]])
            leaf_branch = torch.cat([leaf_branch, self.levels[depth + 1].branch[child[done]]])
            node, gumbel = child[~done], keys[~done]
            depth += 1
        order = torch.sort(leaf_key, descending=True, stable=True).indices
        order = order[torch.sort(leaf_branch[order], stable=True).indices]
        return leaf_depth[order], leaf[order], leaf_branch[order]

    def _top_children(self, depth: int, nodes: Tensor, bound: Tensor, k: int
                      ) -> tuple[Tensor, Tensor | None]:
        """`_top_truncated_gumbel` over the residual children of distinct expanded nodes.
        Below half the vocabulary (a language model's) no float64 residual row is built: the
        residual's float32 weights (`_residual`) give the block masses, and only the opened
        blocks' logits are computed (`_residual_blocks`)."""
        generator, device = self.batch.generator, self.batch.device
        blocks = None if 2 * k > self.V else self._residual_blocks(depth, nodes,
                                                                     _block_width(self.V, k))
        if blocks is None:
            return _top_truncated_gumbel(self.residual_logits(depth, nodes), bound.to(device),
                                         generator, k)
        return _top_conditioned(blocks, bound.to(device), generator, k)

    def _residual(self, depth: int, nodes: Tensor,
                  proposal: tuple[Categorical, Tensor | None] | None = None,
                  changed: tuple[Tensor, Tensor, Tensor] | None = None
                  ) -> tuple[Categorical, Tensor | None] | None:
        """q(· | node, not removed) of distinct expanded nodes, as `_proposal` gives q(· | node):
        the proposal's float32 weights with each changed child's weight set to its residual
        (rounded like every proposal draw). A node with nothing removed below it draws from
        its proposal itself, which its expansion has usually just built. None if some node's
        residual weights underflow float32 (below RESIDUAL_FLOOR while its residual is not
        0): such nodes need the float64 `residual_logits`. `proposal` and `changed`: the
        nodes' `_proposal` and `_changed_children`, when the caller has them."""
        proposal, rows = proposal or self._proposal(depth, nodes)
        at, token, log_m = changed or self._changed_children(depth, nodes)
        if not len(at):
            return proposal, rows
        weights = proposal.weights.clone() if rows is None else proposal.weights[rows]
        shift = proposal.shift if rows is None else proposal.shift[rows]
        log_total = proposal.log_total() if rows is None else proposal.log_total()[rows]
        device = weights.device
        log_q = self.levels[depth].log_q[nodes].to(device)
        scale = log_q - log_total + shift.double()  # log of (residual mass / weight)
        dev_at = at.to(device)
        weights[dev_at, token.to(device)] = (log_m.to(device) - scale[dev_at]).exp().to(
            weights.dtype)
        residual = Categorical.from_weights(weights, shift, proposal.width)
        alive = torch.isfinite(self.levels[depth].log_m[nodes]).to(device)
        if bool((alive & (residual.block_cdf[:, -1] < RESIDUAL_FLOOR)).any()):
            return None
        return residual, None

    def _residual_blocks(self, depth: int, nodes: Tensor, width: int) -> BlockLogits | None:
        """The residual logits of distinct expanded nodes (`residual_logits`), seen in blocks
        of `width` symbols: block masses from the residual's float32 weights (one pass); the
        opened blocks' logits from the model's rows at those symbols only, each changed child
        its own residual. None where `_residual` is."""
        proposal, rows = self._proposal(depth, nodes)
        at, token, log_m = changed = self._changed_children(depth, nodes)
        residual = self._residual(depth, nodes, (proposal, rows), changed)
        if residual is None:
            return None
        level = self.levels[depth]
        masses = block_sums(residual[0].weights, width)
        total, log_total = proposal.block_cdf[:, -1], proposal.log_total()
        if residual[1] is not None:
            masses = masses[residual[1]]
        if rows is not None:
            total, log_total = total[rows], log_total[rows]
        device = masses.device
        log_q = level.log_q[nodes].to(device)
        log_share = masses.double().log_() - torch.where(total > 0, total.log(), 0.0)[:, None]
        offset = log_q - torch.where(torch.isneginf(log_total), 0.0, log_total)
        guide = self._guide(depth, nodes)
        model_rows = level.row[nodes]
        lattice_nodes = level.lattice_node[nodes].to(device)
        allowed = self.batch.lattice.on(device).allowed
        changed_key, order = torch.sort(at * self.V + token)
        changed_key, changed_log_m = changed_key.to(device), log_m[order].to(device)

        def logits_at(symbols: Tensor) -> Tensor:
            picked = level.log_probs.pick(model_rows.repeat_interleave(symbols.shape[1]),
                                          symbols.flatten()).view_as(symbols)
            logits = picked + offset[:, None]
            if guide is not None:
                logits.add_(guide.gather(1, symbols))
            logits.masked_fill_(~allowed[lattice_nodes[:, None], symbols], -math.inf)
            if len(changed_key):
                key = torch.arange(len(symbols), device=device)[:, None] * self.V + symbols
                found = torch.searchsorted(changed_key, key).clamp_max_(len(changed_key) - 1)
                logits = torch.where(changed_key[found] == key, changed_log_m[found], logits)
            return logits

        return BlockLogits(log_share + log_q[:, None], width, self.V, logits_at)

    def node_values(self, depths: Tensor, nodes: Tensor, name: str) -> Tensor:
        """A per-node field (log_p, log_q, log_w) for nodes given with their depths."""
        out = torch.zeros(len(nodes), dtype=torch.float64)
        for d in torch.unique(depths).tolist():
            at = depths == d
            out[at] = getattr(self.levels[d], name)[nodes[at]]
        return out


@dataclass
class _Below:
    """What the residual masses below expanded nodes are made of (`Trie._below`)."""

    log_probs: Tensor  # [n, V] the model's rows at the nodes
    log_mass: Tensor  # [n] log Z(node): the proposal's normaliser, log Σ p(v)·ψ(v) over the domain
    offset: Tensor  # [n] float64 log q(node) − log Z(node)
    guide: Tensor | None  # [n, V] log ψ of a twist
    domain: Domain  # the symbols allowed at each node
    changed: tuple[Tensor, Tensor, Tensor]  # `Trie._changed_children`


@dataclass
class BlockLogits:
    """Rows of logits seen through blocks of `width` symbols: each block's logsumexp, and the
    logits at given symbols on demand. A top-k draw opens only a few blocks, so a caller that
    knows the block masses need not build whole rows (`Trie._residual_blocks`)."""
    log_mass: Tensor  # [n, B] float64 logsumexp of each block (−inf where it has no mass)
    width: int
    vocab_size: int
    logits_at: Callable[[Tensor], Tensor]  # [n, c] symbols → a fresh [n, c] float64 tensor

    @classmethod
    def of(cls, logits: Tensor, width: int) -> BlockLogits:
        """Blocks of a whole float64 [n, V] row (the last block may be shorter)."""
        n, V = logits.shape
        full = V // width * width
        log_mass = [_logsumexp_blocks(logits[:, :full].view(n, full // width, width))]
        if full < V:  # a shorter last block, padded with −inf
            last = logits.new_full((n, 1, width), -math.inf)
            last[:, 0, :V - full] = logits[:, full:]
            log_mass.append(_logsumexp_blocks(last))
        return cls(torch.cat(log_mass, 1), width, V, lambda symbols: logits.gather(1, symbols))


def _top_truncated_gumbel(logits: Tensor, bound: Tensor, generator: torch.Generator, k: int
                          ) -> tuple[Tensor, Tensor | None]:
    """The k largest Gumbel(logits) perturbations of each row, conditioned on the row's maximum
    being `bound`, and their symbols; −inf stays −inf. The conditioning is increasing in each
    perturbed value, so it is applied to the top k only. Where k is over half the row, sorting
    would cost more than conditioning all V: then every value is returned, in symbol order
    (symbols None)."""
    if 2 * k > logits.shape[1]:
        g = _perturb(logits, generator)
        return _condition_on_max(g, g.amax(-1, keepdim=True), bound[:, None]), None
    return _top_conditioned(BlockLogits.of(logits, _block_width(logits.shape[1], k)), bound,
                            generator, k)


def _top_conditioned(blocks: BlockLogits, bound: Tensor, generator: torch.Generator, k: int
                     ) -> tuple[Tensor, Tensor]:
    """The k largest perturbed values of each row of `blocks` and their symbols, conditioned
    on the row's maximum being `bound`."""
    g, token = _top_perturbed(blocks, generator, k)
    return _condition_on_max(g, g[:, :1], bound[:, None]), token


def _perturb(logits: Tensor, generator: torch.Generator) -> Tensor:
    """logits + independent Gumbel noise, from float64 uniforms; −inf stays −inf."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=torch.float64)
    return logits - u.clamp_min_(1e-300).log_().neg_().log_()


def _condition_on_max(g: Tensor, top: Tensor, bound: Tensor) -> Tensor:
    """Perturbed values `g` whose maximum along the last dim is `top`, turned into values
    conditioned on that maximum being `bound`, in the numerically stable form of Kool et al.
    (2019, App. B); −inf stays −inf, and the maximum becomes exactly `bound`."""
    gap = torch.sub(g, top).clamp_max_(0).expm1_().neg_().log_()  # log(1 − e^(g − max))
    v = torch.sub(bound, g).add_(gap)  # −inf at the max
    softplus = v.abs().neg_().exp_().log1p_()
    out = torch.sub(bound, v.clamp_min_(0)).sub_(softplus)
    return torch.where(torch.isneginf(g), -math.inf, out)


def _top_perturbed(blocks: BlockLogits, generator: torch.Generator, k: int
                   ) -> tuple[Tensor, Tensor]:
    """The k largest logits + Gumbel noise of each row (float64, decreasing) and their symbols,
    distributed exactly as with independent noise on every symbol, but drawn top-down: a
    stochastic beam search (Kool et al. 2019) over a two-level tree of blocks and symbols.

    The largest perturbed value of a block is Gumbel(logsumexp of the block), so one draw per
    block gives every block's maximum. A block whose maximum is not among the row's k largest
    holds no value of the top k, so only the k best blocks are opened: their symbols are
    perturbed and conditioned on the block's maximum. Over GPT-2's vocabulary with k = 100
    that is about a tenth as many draws as symbols (docs/decisions.md §28)."""
    W, V = blocks.width, blocks.vocab_size
    block_max = _perturb(blocks.log_mass, generator)
    n, top_blocks = len(block_max), min(k, block_max.shape[1])
    block_key, block = block_max.topk(top_blocks, dim=-1)  # [n, b]
    columns = (block[..., None] * W + torch.arange(W, device=block.device)).flatten(1)
    inner = blocks.logits_at(columns.clamp_max(V - 1)).masked_fill_(columns >= V, -math.inf)
    inner = _perturb(inner.view(n, top_blocks, W), generator)
    inner = _condition_on_max(inner, inner.amax(-1, keepdim=True), block_key[..., None])
    top, position = inner.flatten(1).topk(k, dim=-1)
    return top, columns.gather(1, position).clamp_max_(V - 1)


def _block_width(V: int, k: int) -> int:
    """A power of two near √(V/k): the row's blocks (V/W draws) and the opened blocks' symbols
    (k·W draws) then cost about the same."""
    return 2 ** min(8, max(1, round(math.log2(V / k) / 2)))


def _logsumexp_blocks(blocks: Tensor) -> Tensor:
    """log Σ exp over the last dim of [n, B, W] (−inf for blocks without mass)."""
    top = blocks.amax(-1, keepdim=True)
    top = torch.where(torch.isneginf(top), 0.0, top)
    return torch.sub(blocks, top).exp_().sum(-1).log_().add_(top[..., 0])


def _top_per_group(values: Tensor, group: Tensor, count: Tensor) -> Tensor:
    """Indices of the `count[g]` largest finite values of each group g, grouped by g
    (ascending), each group's in decreasing order of value. One top-k over the candidates laid
    out one group per row, not a full sort of every value."""
    candidates = torch.isfinite(values).nonzero().flatten()
    g = group[candidates]
    if len(g) > 1 and not bool((g[1:] >= g[:-1]).all()):
        g, by_group = torch.sort(g, stable=True)
        candidates = candidates[by_group]
    ids, sizes = torch.unique_consecutive(g, return_counts=True)
    if not len(ids):
        return candidates
    start = torch.cumsum(sizes, 0) - sizes
    if len(ids) == 1:
        padded = values[candidates][None]
    else:
        row = torch.repeat_interleave(torch.arange(len(ids)), sizes)
        padded = torch.full((len(ids), int(sizes.max())), -math.inf, dtype=values.dtype)
        padded[row, torch.arange(len(g)) - start[row]] = values[candidates]
    wanted = count[ids]
    top, position = top_k(padded, min(int(wanted.max()), padded.shape[1]))
    keep = (torch.arange(top.shape[1]) < wanted[:, None]) & torch.isfinite(top)
    r, c = keep.nonzero(as_tuple=True)
    return candidates[start[r] + position[r, c]]
