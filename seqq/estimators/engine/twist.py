"""Twisted importance sampling: the restricted proposal steered by a cheap surrogate's chance of
completing the query (seed-notes §3, F5).

The restricted proposal q (Eq. 5) looks one step ahead only: for p(τ(a) = K) it walks happily
into prefixes from which `a` at step K is unlikely. The optimal proposal is
p(x_k | x_<k)·P(X_{k+1:L} ∈ V_{k+1} × … × V_L | x_≤k). The twist replaces the second factor by
β_{k+1}, the same probability under a surrogate whose future can be summed exactly: any
`ContextAutomaton` (an HPYP / interpolated Kneser–Ney n-gram from `fit_surrogate`, a
`MarkovModel`). One backward DP per query lattice over the surrogate's C context states gives it for
every state, with no model calls:

    β_{L+1} = 1,    β_k(c) = Σ_{x ∈ V_k} p_s(x | c) · β_{k+1}(next(c, x)).

Samples come from q̃(x_k | x_<k) ∝ p(x_k | x_<k)·1[x_k ∈ V_k]·β_{k+1}(next(c_k, x_k)) and carry
the exact weight p/q̃ = Π_k Z_k / β_{k+1}(next(c_k, x_k)), Z_k = Σ_{x ∈ V_k} p(x | x_<k)
β_{k+1}(next(c_k, x)): unbiased for any surrogate, zero variance when the surrogate is the model.
On a query lattice β is per lattice node (the automaton's state says what is left to satisfy).

The twist is a property of the proposal: the driver builds the messages once per task group and
hands them to every method that takes a surrogate (`twisted`, `hybrid`, `wor`, `smc`,
`randomized_beam`); the prefix trie, SMC's particles and the beams read them through
`Messages.log_values` / `SurrogateTwist`.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from seqq.errors import QueryError
from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.memory import values_within
from seqq.models.automaton import ContextAutomaton
from seqq.models.markov import MarkovModel
from seqq.queries import Query
from seqq.queries.lattice import Lattice

FLOAT64_BYTES = 8
CACHE_ELEMENTS = 2**27  # message values kept between calls (`MessageCache`, 1 GB): a sweep chunk's
# queries (64 at K ≤ 11 with the distilled Shakespeare or MOOCs surrogate) all fit
LOG_FLOOR = -69.0  # log twists are clipped at 1e-30 of a step's largest: a surrogate that rules a
# path out must not stop the proposal from drawing it, or the estimate would lose that path's mass


def check_surrogate(batch: Batch, surrogate: object) -> None:
    """A surrogate must be an exact context model over the model's symbols."""
    if not isinstance(surrogate, ContextAutomaton):
        raise QueryError(f"the surrogate must be a ContextAutomaton (HPYPModel, MarkovModel), "
                         f"got {type(surrogate).__name__}")
    if surrogate.vocab_size != batch.vocab_size:
        raise QueryError(f"the surrogate has {surrogate.vocab_size} symbols but the model has "
                         f"{batch.vocab_size}; fit it on sequences of the model's vocabulary")


def message_loads(batch: Batch, surrogate: ContextAutomaton) -> Tensor:
    """[T] message values (lattice nodes × C) each task adds to a group: a query's messages
    count once, at the first task asking it (tasks asking one query share its nodes)."""
    lattice = batch.lattice
    nodes_per_query = torch.bincount(lattice.query, minlength=len(lattice.roots))
    query_of_task = torch.zeros(batch.num_tasks, dtype=torch.long)
    query_of_task[batch.branch_task] = lattice.query[batch.branch_root]
    first_task = torch.full((len(lattice.roots),), batch.num_tasks).scatter_reduce(
        0, query_of_task, torch.arange(batch.num_tasks), reduce="amin")
    loads = torch.zeros(batch.num_tasks, dtype=torch.long)
    asked = first_task < batch.num_tasks
    loads[first_task[asked]] = nodes_per_query[asked] * surrogate.num_contexts
    return loads


MESSAGE_VALUES = values_within(FLOAT64_BYTES)  # message values one task group may hold


def twist_rows(values: Tensor, rows: Tensor) -> Tensor:
    """Rows of a twist table from `Messages.log_values`, an expanded one (one value per row)
    kept expanded rather than copied out to [n, V]."""
    if values.shape[1] > 1 and values.stride(1) == 0:
        return values[rows, :1].expand(-1, values.shape[1])
    return values[rows]


@dataclass(frozen=True)
class SurrogateTwist:
    """The twist of some rows (SMC particles, beam nodes): each row's surrogate state. With a
    row's lattice node n and the next symbol x it names the twist log β(child(n, x), next(c, x))."""

    messages: Messages
    context: Tensor  # [R] on the model's device

    def log_values(self, nodes: Tensor) -> Tensor:
        return self.messages.log_values(nodes, self.context)

    def select(self, index: Tensor) -> SurrogateTwist:
        return replace(self, context=self.context[index.to(self.context.device)])

    def advance(self, drawn: Tensor) -> SurrogateTwist:
        return replace(self, context=self.messages.next_context[
            self.context, drawn.to(self.context.device)])


@dataclass(frozen=True)
class Messages:
    """Backward messages β(n, c): the surrogate's probability of completing the query from
    lattice node n in surrogate state c (1 at free nodes), for the nodes of a batch's queries.

    Kept as log β = log_scale[n] + log_beta[n, c] with max_c log_beta[n, ·] = 0, so long
    horizons do not underflow and free nodes stay exactly 1, which SMC's and IS's weights rely
    on. The log is taken once per query and cached with the messages: a twist reads it for
    every row and next symbol, and the table has a column per surrogate context."""

    lattice: Lattice
    local: Tensor  # [lattice nodes] row of each node in `log_beta` (CPU; 0 if not held)
    log_scale: Tensor  # [n] float64, on the model's device
    log_beta: Tensor  # [n, C] float64, on the model's device
    next_context: Tensor  # [C, V] long, on the model's device
    next_context_cpu: Tensor  # the same on the CPU, for the trie's bookkeeping
    context: Tensor  # [N] surrogate state after each branch's history
    # twists are floored this far (log) below a row's largest; a defensive floor (e.g. log 0.05,
    # the ground-truth judge's) bounds each step's p/q̃ where the surrogate underrates a symbol
    log_floor: float = LOG_FLOOR

    @classmethod
    def of(cls, batch: Batch, surrogate: ContextAutomaton) -> Messages:
        """The messages of the batch's queries: from `MESSAGE_CACHE` where an earlier call
        computed them with this surrogate, the rest by `backward_messages`."""
        device, lattice = batch.device, batch.lattice
        queries = torch.unique(lattice.query[batch.branch_root])
        held = torch.isin(lattice.query, queries).nonzero().flatten()  # grouped by query
        local = torch.zeros(lattice.num_nodes, dtype=torch.long)
        local[held] = torch.arange(len(held))
        next_context = surrogate.next_context.to(device)
        blocks = {q: MESSAGE_CACHE.get(surrogate, batch.queries[q], device)
                  for q in queries.tolist()}
        missing = torch.tensor([q for q, block in blocks.items() if block is None],
                               dtype=torch.long)
        if len(missing):
            computed = torch.isin(lattice.query, missing).nonzero().flatten()
            position = torch.zeros(lattice.num_nodes, dtype=torch.long)
            position[computed] = torch.arange(len(computed))
            log_scale, beta = backward_messages(surrogate.log_table.exp().to(device),
                                                next_context, lattice, computed, position)
            for q in missing.tolist():
                rows = position[computed[lattice.query[computed] == q]].to(device)
                blocks[q] = (log_scale[rows], beta[rows].log())
                MESSAGE_CACHE.put(surrogate, batch.queries[q], device, blocks[q])
        context = start_contexts(surrogate, batch.histories).to(device)
        none = (torch.zeros(0, dtype=torch.float64, device=device),
                torch.zeros(0, surrogate.num_contexts, dtype=torch.float64, device=device))
        return cls(lattice, local, torch.cat([none[0], *(b[0] for b in blocks.values())]),
                   torch.cat([none[1], *(b[1] for b in blocks.values())]), next_context,
                   surrogate.next_context.cpu(), context[batch.branch_task.to(device)])

    def rows(self, branch: Tensor) -> SurrogateTwist:
        return SurrogateTwist(self, self.context[branch.to(self.context.device)])

    def log_values(self, nodes: Tensor, context: Tensor) -> Tensor:
        """[R, V] log ψ of every next symbol for rows at lattice `nodes` (CPU) in surrogate
        states `context` (device): log β(child(n, x), next(c, x)). Symbols that are not
        allowed get 0 (the domain masks them); the rest are floored at `log_floor` below the
        row's largest, so a surrogate that rules a path out cannot hide it from the proposal.
        Where each row's twist is one value (an i.i.d. surrogate, the only one that fits
        GPT-2's vocabulary, on a chain of lattice nodes) that value comes back expanded over
        the row, without [R, V] work; not-allowed symbols then carry it too."""
        device = context.device
        successor = self.lattice.successor[nodes]
        if bool((successor >= 0).all()):  # every allowed symbol leads to one child: no [n, V]
            rows = self.local[successor].to(device)[:, None]
            if self.log_beta.shape[1] == 1:  # one surrogate state: one twist value per row
                flat = self.log_scale[rows] + self.log_beta[rows, 0]
                return flat.expand(-1, self.next_context.shape[1])
        else:
            rows = self.local[self.lattice.child_table(nodes).clamp_min(0)].to(device)
        values = self.log_scale[rows] + self.log_beta[rows, self.next_context[context]]
        allowed = self.lattice.allowed[nodes].to(device)
        values = torch.where(allowed, values, -torch.inf)
        values = torch.maximum(values, values.amax(-1, keepdim=True) + self.log_floor)
        return torch.where(allowed, values, 0.0)


class MessageCache:
    """Messages per (surrogate, query), kept between calls: a sweep asks the same queries of
    several twisted methods and budgets, and the messages depend on neither. The least
    recently used are dropped past `max_elements` values; an entry is used only while its
    surrogate object is alive (it holds a weak reference)."""

    def __init__(self, max_elements: int):
        self.max_elements = max_elements
        self.entries: OrderedDict[tuple, tuple] = OrderedDict()
        self.size = 0

    def get(self, surrogate: ContextAutomaton, query: Query, device: torch.device
            ) -> tuple[Tensor, Tensor] | None:
        key = (id(surrogate), query, str(device))
        entry = self.entries.get(key)
        if entry is None or entry[0]() is not surrogate:
            return None
        self.entries.move_to_end(key)
        return entry[1]

    def put(self, surrogate: ContextAutomaton, query: Query, device: torch.device,
            block: tuple[Tensor, Tensor]) -> None:
        key = (id(surrogate), query, str(device))
        if key in self.entries:
            self.size -= self.entries.pop(key)[1][1].numel()
        self.entries[key] = (weakref.ref(surrogate), block)
        self.size += block[1].numel()
        while self.size > self.max_elements and self.entries:
            self.size -= self.entries.popitem(last=False)[1][1][1].numel()


MESSAGE_CACHE = MessageCache(CACHE_ELEMENTS)


def backward_messages(probs: Tensor, next_context: Tensor, lattice: Lattice, held: Tensor,
                      local: Tensor) -> tuple[Tensor, Tensor]:
    """(log_scale, beta) of the `held` lattice nodes (see `Messages`), by the backward DP over
    the surrogate's states, deepest nodes first (`probs` p_s(x | c) [C, V], `next_context`
    [C, V]):  β(n, c) = Σ_{x allowed at n} p_s(x | c)·β(child(n, x), next(c, x)); β = 1 at free
    nodes. A chain node (one child) is one gather and one batched mat-vec."""
    C, device = len(probs), probs.device
    log_scale = torch.zeros(len(held), dtype=torch.float64, device=device)
    beta = torch.ones(len(held), C, dtype=torch.float64, device=device)
    open_nodes = held[~lattice.free[held]]
    depths = lattice.depth[open_nodes]
    chunk = max(1, values_within(FLOAT64_BYTES) // (C * lattice.vocab_size))
    for d in torch.unique(depths).flip(0).tolist():
        for nodes in open_nodes[depths == d].split(chunk):
            children = local[lattice.child_table(nodes).clamp_min(0)].to(device)  # [n, V]
            allowed = lattice.allowed[nodes.to(lattice.allowed.device)].to(device)
            child_scale = torch.where(allowed, log_scale[children], -torch.inf)
            top = child_scale.amax(-1, keepdim=True)
            weight = (child_scale - top).exp()  # [n, V]: child scales relative to the largest
            gathered = _child_messages(beta, children, local[lattice.successor[nodes]
                                                             .clamp_min(0)].to(device),
                                       lattice.successor[nodes] >= 0, next_context)
            total = torch.bmm(gathered.mul_(probs), weight[:, :, None])[..., 0]  # [n, C]
            peak = total.amax(-1, keepdim=True).clamp_min(torch.finfo(total.dtype).tiny)
            rows = local[nodes].to(device)
            beta[rows] = total / peak
            log_scale[rows] = top[:, 0] + peak[:, 0].log()
    return log_scale, beta


def _child_messages(beta: Tensor, children: Tensor, successor: Tensor, chain: Tensor,
                    next_context: Tensor) -> Tensor:
    """[n, C, V] β(child(n, x), next(c, x)). A chain node's children are one row of β, read
    with one contiguous `index_select`, cheaper than the general [n, C, V] gather, which
    indexes β by child and context for every entry (docs/performance.md)."""
    n, (C, V) = len(children), next_context.shape
    if bool(chain.all()):
        return beta[successor].index_select(1, next_context.flatten()).view(n, C, V)
    return beta[children[:, None, :], next_context[None]]


def start_contexts(surrogate: ContextAutomaton, histories: Sequence[Sequence[int]]) -> Tensor:
    """The surrogate's state after each history. An order-n `MarkovModel` needs n symbols, so
    shorter histories are left-padded with symbol 0 (`<BOS>` where the vocabulary has one): any
    choice keeps the estimate exact, the twist only guides."""
    width = surrogate.order if isinstance(surrogate, MarkovModel) else 0
    padded = [[0] * (width - len(h)) + list(h) for h in histories]
    return surrogate.initial_state(padded)[1]
