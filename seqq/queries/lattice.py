"""A query's automaton unrolled over its horizon: what every estimator walks.

Node (k, s) is "k symbols read, automaton in state s", kept only if acceptance at step K is still
reachable from it (backward reachability, computed once per query). So the restricted domain at
a prefix is simply `allowed[node]`: the symbols after which the query can still be satisfied.
The restricted proposal q ∝ p·1[allowed], the importance weight Π_k p(allowed_k | x_<k), beams,
exact enumeration and every other estimator only ever ask three things of a node: its allowed
symbols, the node a symbol leads to, and whether it is `free` (every continuation is in Q, so a
walk can stop there without another model call).

A product of domains unrolls to a chain (one node per position): every allowed symbol leads to
the same next node, kept as `successor`, and no [V]-sized table of children is stored. Nodes
whose children differ by symbol keep a row of `children`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import torch
from torch import Tensor

from seqq.errors import QueryError
from seqq.queries.automaton import Automaton

LATTICE_BYTES = 2**31  # the most a query's lattice may take while it is built (2 GiB): a node
# holds a row of V symbols (allowed, child: ~32 bytes per symbol with the build's temporaries;
# `tau(".") <= 3000` over SmolLM2's 49,152 symbols grew to 8.9 GB before this check)
BUILD_BYTES_PER_ENTRY = 32
TABLE_BYTES_PER_ENTRY = 8  # the automaton's transition table: a long per (state, symbol)
EXCLUDED_SHARE = 256  # nodes disallowing at most V/256 symbols also list them (`excluded`)
UNLISTED = -2  # `_excluded_lists`' mark of a node whose disallowed symbols are not listed


@dataclass
class Lattice:
    depth: Tensor  # [N] long: symbols read at the node
    allowed: Tensor  # [N, V] bool: symbols after which acceptance is still reachable
    successor: Tensor  # [N] long: the child of every allowed symbol, −1 where they differ
    branching: Tensor  # [N] long: row of `children` of nodes with successor −1, else −1
    children: Tensor  # [M, V] long: child per symbol, −1 where not allowed
    free: Tensor  # [N] bool: every continuation is accepted (nothing left to decide)
    horizon: Tensor  # [N] long: the horizon K of the node's query
    query: Tensor  # [N] long: which query of a batch the node belongs to
    roots: Tensor  # [T] long: each query's start node, −1 if the query holds no path
    copies: dict[torch.device | str, Lattice] = field(  # `on`'s copies, by the device asked
        default_factory=dict, init=False, repr=False, compare=False)
    home: set[torch.device | str] = field(  # devices asked for that hold the tables already
        default_factory=set, init=False, repr=False, compare=False)
    excluded_table: Tensor | None = field(  # `excluded`'s lists, built on first use
        default=None, init=False, repr=False, compare=False)
    deciding_table: Tensor | None = field(  # `deciding` per node, built on first use
        default=None, init=False, repr=False, compare=False)

    @property
    def vocab_size(self) -> int:
        return self.allowed.shape[1]

    @property
    def num_nodes(self) -> int:
        return len(self.depth)

    def advance(self, nodes: Tensor, symbols: Tensor) -> Tensor:
        """The node after appending `symbols` (one per node); −1 where not allowed. Computed
        on the nodes' device, from this lattice's tables there (`on`), with no sync."""
        tables, symbols = self.on(nodes.device), symbols.to(nodes.device)
        out = tables.successor[nodes]
        if len(tables.children):  # nodes whose children differ by symbol look theirs up
            row = tables.branching[nodes]
            out = torch.where(row >= 0, tables.children[row.clamp_min(0), symbols], out)
        return torch.where(tables.allowed[nodes, symbols], out, -1)

    def deciding(self, nodes: Tensor) -> Tensor:
        """[n] bool on the nodes' device: some allowed symbol decides the query (its child is
        free), so `ending` has a symbol at the node. Most nodes of a walk decide nothing (a
        hitting time decides only at its last step), and need no [n, V] `ending` mask."""
        tables = self.on(nodes.device)
        if tables.deciding_table is None:
            successor = tables.successor
            table = (successor >= 0) & tables.free[successor.clamp_min(0)] & tables.allowed.any(-1)
            split = (tables.branching >= 0).nonzero().flatten()
            kids = tables.children[tables.branching[split]]
            table[split] = ((kids >= 0) & tables.free[kids.clamp_min(0)]).any(-1)
            tables.deciding_table = table
        return tables.deciding_table[nodes]

    def excluded(self, nodes: Tensor) -> Tensor | None:
        """[n, E] long: the symbols each node disallows, padded with −1, on the nodes' device;
        None if some node disallows more than 1/EXCLUDED_SHARE of the vocabulary. A walk over
        a large vocabulary then masks its [n, V] rows with one scatter instead of a pass over
        an [n, V] mask (`seqq.estimators.categorical.Excluded`)."""
        tables = self.on(nodes.device)
        if tables.excluded_table is None:
            tables.excluded_table = _excluded_lists(tables.allowed)
        listed = tables.excluded_table[nodes]
        if bool((listed[:, -1] == UNLISTED).any()):
            return None
        return listed[:, :-1]

    def child_table(self, nodes: Tensor) -> Tensor:
        """[n, V] long: the child of every symbol at each node (−1 where not allowed), on the
        nodes' device: a step loop on a GPU builds it there instead of moving it across."""
        tables = self.on(nodes.device)
        out = torch.where(tables.allowed[nodes], tables.successor[nodes, None], -1)
        if len(tables.children):
            row = tables.branching[nodes]
            out = torch.where(row[:, None] >= 0, tables.children[row.clamp_min(0)], out)
        return out

    def ending(self, nodes: Tensor) -> Tensor:
        """[n, V] bool: the allowed symbols whose child is free (they decide the query), on the
        nodes' device. A node whose children all share one successor needs no [n, V] table of
        children for it: only its allowed row and one lookup."""
        tables = self.on(nodes.device)
        successor = tables.successor[nodes]
        free = (successor >= 0) & tables.free[successor.clamp_min(0)]
        out = tables.allowed[nodes] & free[:, None]
        if len(tables.children):  # nodes whose children differ by symbol look theirs up
            row = tables.branching[nodes]
            kids = tables.children[row.clamp_min(0)]
            out = torch.where(row[:, None] >= 0, (kids >= 0) & tables.free[kids.clamp_min(0)],
                              out)
        return out

    def on(self, device: torch.device | str) -> Lattice:
        """This lattice with every table on `device`: copied once per device and kept, so
        walks on a GPU index it there without moving tables every step."""
        if device in self.home:  # every walk step asks: one set or dict lookup, no table scan
            return self
        if (copy := self.copies.get(device)) is not None:
            return copy
        resolved = torch.empty(0, device=device).device  # "cuda" → "cuda:0", as tensors say
        stable = torch.device(device) == resolved  # a bare "cuda" follows the current device
        if all(t.device == resolved for t in self.tables()):
            if stable:
                self.home.add(device)
            return self
        if resolved not in self.copies:
            self.copies[resolved] = Lattice(*(t.to(resolved) for t in self.tables()))
        if stable:
            self.copies[device] = self.copies[resolved]
        return self.copies[resolved]

    def tables(self) -> list[Tensor]:
        return [getattr(self, f.name) for f in fields(self) if f.init]

    def log_counts(self) -> Tensor:
        """[N] float64 log of the number of decided completions below each node: paths cut
        where they reach a free node (a free node counts once). Uniform sampling over these
        and weighting by their number is Eq. 7 on the query's own support."""
        log_count = torch.zeros(self.num_nodes, dtype=torch.float64)
        for d in torch.unique(self.depth[~self.free]).flip(0).tolist():
            nodes = ((self.depth == d) & ~self.free).nonzero().flatten()
            table = self.child_table(nodes)
            below = torch.where(table >= 0, log_count[table.clamp_min(0)], -math.inf)
            log_count[nodes] = torch.logsumexp(below, -1)
        return log_count

    def prefix_counts(self) -> Tensor:
        """[N] float64: how many distinct prefixes lead from the node's root to the node."""
        count = torch.zeros(self.num_nodes, dtype=torch.float64)
        count[self.roots[self.roots >= 0]] = 1.0
        for d in torch.unique(self.depth[~self.free]).tolist():
            nodes = ((self.depth == d) & ~self.free).nonzero().flatten()
            table = self.child_table(nodes)
            ok = table >= 0
            count.index_add_(0, table[ok], count[nodes][:, None].expand_as(table)[ok])
        return count

    def effective_lengths(self) -> Tensor:
        """[T] per query: 1 + the deepest node that still restricts anything (≥ 1); a walk
        never needs to go further."""
        T = len(self.roots)
        open_nodes = ~self.free
        return torch.ones(T, dtype=torch.long).scatter_reduce(
            0, self.query[open_nodes], self.depth[open_nodes] + 1, reduce="amax")

    def count(self, root: int) -> int:
        """|Q| below one root as an exact integer (may be astronomically large)."""
        if root < 0:
            return 0
        V, counts = self.vocab_size, {}
        order, seen = [root], {root}
        for node in order:  # every node below the root, layer by layer
            if not self.free[node]:
                kids = torch.unique(self.child_table(torch.tensor([node]))[0]).tolist()
                order += [k for k in kids if k >= 0 and k not in seen]
                seen.update(kids)
        for node in reversed(order):  # deeper layers first
            if self.free[node]:
                counts[node] = V ** int(self.horizon[node] - self.depth[node])
            else:
                kids, times = torch.unique(self.child_table(torch.tensor([node]))[0],
                                           return_counts=True)
                counts[node] = sum(n * counts[k] for k, n in
                                   zip(kids.tolist(), times.tolist(), strict=True) if k >= 0)
        return counts[root]


def _excluded_lists(allowed: Tensor) -> Tensor:
    """[N, E + 1] long: each node's disallowed symbols, padded with −1 and then a last column
    of −1; UNLISTED in that column marks a node that disallows more than V / EXCLUDED_SHARE."""
    N, V = allowed.shape
    count = V - allowed.sum(-1, dtype=torch.int32).long()
    listed = (count <= V // EXCLUDED_SHARE).nonzero().flatten()
    width = int(count[listed].max()) if len(listed) else 0
    table = torch.full((N, width + 1), -1, dtype=torch.long, device=allowed.device)
    table[count > V // EXCLUDED_SHARE, -1] = UNLISTED
    node, symbol = (~allowed[listed]).nonzero(as_tuple=True)
    start = torch.cumsum(count[listed], 0) - count[listed]
    table[listed[node], torch.arange(len(node), device=allowed.device) - start[node]] = symbol
    return table


def unroll(automaton: Automaton, horizon: int, vocab_size: int) -> Lattice:
    """The lattice of one query: nodes (k, s) reachable from the start and still able to
    accept at step K, with their allowed symbols and children. One too large to build is
    refused first (`_check_size`)."""
    check_fits(horizon, vocab_size)
    _check_size([automaton.num_states], vocab_size, horizon, "its automaton's transitions",
                TABLE_BYTES_PER_ENTRY)
    table = automaton.transition_table(vocab_size)  # [S, V]
    S, K = automaton.num_states, horizon
    accepting = torch.zeros(S, dtype=torch.bool)
    accepting[list(automaton.accepting)] = True
    edges = torch.unique((table >= 0).nonzero()[:, 0] * S + table[table >= 0])  # state → state
    source, target = edges // S, edges % S
    live = [torch.zeros(S, dtype=torch.bool) for _ in range(K + 1)]  # can accept at K from (k, s)
    live[K] = accepting
    for k in range(K - 1, -1, -1):
        live[k] = torch.zeros(S, dtype=torch.bool).index_fill_(0, source[live[k + 1][target]], True)
    if not live[0][automaton.start]:
        return _empty(vocab_size)
    _check_size([int(layer.sum()) for layer in live], vocab_size, horizon, "a query lattice",
                BUILD_BYTES_PER_ENTRY)

    # Forward, layer by layer: each node's allowed symbols, and its children as node ids
    # (layer k+1's states sorted, numbered after every earlier layer's nodes).
    layer_states, allowed_rows, child_rows = [torch.tensor([automaton.start])], [], []
    offset = 0
    for k in range(K):
        nxt = table[layer_states[k]]
        ok = (nxt >= 0) & live[k + 1][nxt.clamp_min(0)]
        layer_states.append(torch.unique(nxt[ok]))
        offset += len(layer_states[k])
        index = torch.searchsorted(layer_states[k + 1], nxt.clamp_min(0)) + offset
        allowed_rows.append(ok)
        child_rows.append(torch.where(ok, index, -1))
    last = len(layer_states[K])
    allowed = torch.cat(allowed_rows + [torch.zeros(last, vocab_size, dtype=torch.bool)])
    child = torch.cat(child_rows + [torch.full((last, vocab_size), -1, dtype=torch.long)])
    depth = torch.cat([torch.full((len(s),), k) for k, s in enumerate(layer_states)])
    offsets = [0, *torch.cumsum(torch.tensor([len(s) for s in layer_states]), 0).tolist()]

    # Free nodes: the last layer, and nodes allowing everything into free children.
    free = torch.zeros(len(depth), dtype=torch.bool)
    free[offsets[K]:] = True
    for k in range(K - 1, -1, -1):
        rows = slice(offsets[k], offsets[k + 1])
        free[rows] = allowed[rows].all(-1) & free[child[rows].clamp_min(0)].all(-1)
    return _pack(depth, allowed, child, free, horizon)


def check_fits(horizon: int, vocab_size: int) -> None:
    """Refuse a horizon whose lattice cannot fit LATTICE_BYTES whatever the query (a node per
    step at least): callers that know K and V before loading a model ask this first."""
    _check_size([horizon + 1], vocab_size, horizon, "a query lattice", BUILD_BYTES_PER_ENTRY)


def _check_size(rows: Sequence[int], vocab_size: int, horizon: int, what: str,
                per_entry: int) -> None:
    """Refuse, before it is built, a table of rows × V entries that cannot fit LATTICE_BYTES:
    the lattice (a node per step at least), the automaton's transitions (a row per state), then
    the lattice again (at most the automaton states live at each step). Rows grow with the
    horizon, so the error names the largest K that fits."""
    count = sum(rows)
    need = count * vocab_size * per_entry
    if need <= LATTICE_BYTES:
        return
    per_step = max(1.0, count / (horizon + 1))
    fits = max(1, int(LATTICE_BYTES / (per_step * vocab_size * per_entry)) - 1)
    raise QueryError(f"K = {horizon:,} over {vocab_size:,} symbols needs {what} of {count:,} "
                     f"rows (about {need / 1e9:.1f} GB, over seqq's {LATTICE_BYTES / 2**30:.0f} "
                     f"GiB cap); use K ≤ {fits:,} for this query"
                     + (" at most (fewer where it has several states a step)"
                        if len(rows) == 1 and what == "a query lattice" else ""))


def _pack(depth: Tensor, allowed: Tensor, child: Tensor, free: Tensor, horizon: int) -> Lattice:
    """Store chains compactly: one successor where every allowed symbol leads to one node."""
    first = torch.where(allowed, child, child.amax(-1, keepdim=True)).amin(-1)
    same = (torch.where(allowed, child, first[:, None]) == first[:, None]).all(-1)
    successor = torch.where(same, first, -1)
    split = (~same).nonzero().flatten()
    branching = torch.full((len(depth),), -1, dtype=torch.long)
    branching[split] = torch.arange(len(split))
    return Lattice(depth, allowed, successor, branching, child[split], free,
                   torch.full_like(depth, horizon), torch.zeros_like(depth), torch.tensor([0]))


def _empty(vocab_size: int) -> Lattice:
    none = torch.zeros(0, dtype=torch.long)
    return Lattice(none, torch.zeros(0, vocab_size, dtype=torch.bool), none, none,
                   torch.zeros(0, vocab_size, dtype=torch.long), torch.zeros(0, dtype=torch.bool),
                   none, none, torch.tensor([-1]))


def concat(lattices: Sequence[Lattice]) -> Lattice:
    """One lattice for a batch of queries: node ids offset, `roots[t]` the t-th query's root."""
    nodes = rows = 0
    parts = []
    for i, lat in enumerate(lattices):
        parts.append(Lattice(lat.depth, lat.allowed, _shift(lat.successor, nodes),
                             _shift(lat.branching, rows), _shift(lat.children, nodes), lat.free,
                             lat.horizon, torch.full_like(lat.query, i), _shift(lat.roots, nodes)))
        nodes += lat.num_nodes
        rows += len(lat.children)
    return Lattice(*(torch.cat(tables) for tables in zip(*(p.tables() for p in parts),
                                                         strict=True)))


def _shift(index: Tensor, offset: int) -> Tensor:
    return torch.where(index >= 0, index + offset, -1)
