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

The twist is used by: `twisted` (importance sampling from q̃ through the prefix trie, so shared
prefixes cost nothing), `wor` and `hindsight_gumbel` with `surrogate=` (their trie draws from
q̃), and `smc` / `randomized_beam` with `surrogate=` (their particles and beams).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from seqq.errors import QueryError
from seqq.estimators.batch import Batch, subset
from seqq.estimators.estimate import Estimate
from seqq.models.automaton import ContextAutomaton
from seqq.models.hpyp import HPYPModel, indexable
from seqq.models.markov import MarkovModel
from seqq.models.protocol import SequenceModel
from seqq.models.sampling import sample_continuations
from seqq.queries import Query
from seqq.queries.lattice import Lattice

MESSAGE_ELEMENTS = 2**25  # float64 message values held at once (256 MB); more run in task groups
CACHE_ELEMENTS = 2**27  # message values kept between calls (`MessageCache`, 1 GB): a sweep chunk's
# queries (64 at K ≤ 11 with the 154k contexts of a distilled Shakespeare surrogate) all fit
STEP_ELEMENTS = 2**24  # nodes × C × V gathered at once by one DP step
LOG_FLOOR = -69.0  # log twists are clipped at 1e-30 of a step's largest: a surrogate that rules a
# path out must not stop the proposal from drawing it, or the estimate would lose that path's mass
DEFAULT_ORDER = 5  # HPYP order of `fit_surrogate`: 4 symbols of context
SURROGATE_TABLE = 2**27  # largest C × V table `fit_surrogate` picks an order for (C counted)
DISTILL_SYMBOLS = 4_000_000  # symbols `distill_surrogate` samples (4× tiny Shakespeare)
DISTILL_ROWS = 2_000  # sequences it samples side by side (DISTILL_SYMBOLS / rows steps each)


def fit_surrogate(sequences: Sequence[Sequence[int]], vocab: Sequence[str],
                  order: int | None = None, skip_first: bool = True) -> ContextAutomaton:
    """The twist's surrogate, fitted in seconds: an HPYP model with Kneser–Ney seating (an
    interpolated-KN n-gram) of `order` n ≥ 2. `order=None` takes the largest n ≤ DEFAULT_ORDER
    whose table C × V stays within SURROGATE_TABLE entries (C = 1 + the distinct runs of
    fewer than n symbols in `sequences`); when not even a bigram fits (GPT-2's vocabulary) it
    is i.i.d., whose flat twist makes `twisted` plain importance sampling. `skip_first`: each
    sequence starts with a `<BOS>` that is conditioned on, never predicted."""
    V = len(vocab)
    if order is not None:
        return HPYPModel.fit(sequences, vocab, order, skip_first=skip_first)
    for n in range(DEFAULT_ORDER, 1, -1):
        if indexable(V, n) and (1 + sum(_distinct_ngrams(sequences, L, V)
                                        for L in range(1, n))) * V <= SURROGATE_TABLE:
            return HPYPModel.fit(sequences, vocab, n, skip_first=skip_first)
    return MarkovModel.iid(torch.ones(V))


def _distinct_ngrams(sequences: Sequence[Sequence[int]], length: int, V: int) -> int:
    """How many distinct runs of `length` symbols `sequences` hold (an order-n HPYP keeps one
    context per run of length < n), or the bound min(V^length, tokens) where counting them
    exactly would overflow an int64 key."""
    tokens = sum(len(s) for s in sequences)
    if (V + 1) ** length >= 2**62:
        return min(V**length, tokens)
    flat = np.concatenate([np.append(np.asarray(s, dtype=np.int64), V) for s in sequences])
    keys = np.zeros(max(len(flat) - length + 1, 0), dtype=np.int64)
    for offset in range(length):  # base-(V+1) numbers; V separates sequences
        keys = keys * (V + 1) + flat[offset:offset + len(keys)]
    return int(np.unique(keys).size)


def distill_surrogate(model: SequenceModel, vocab: Sequence[str], bos: int | None,
                      order: int | None = None, symbols: int = DISTILL_SYMBOLS,
                      seed: int = 0) -> ContextAutomaton:
    """The twist's surrogate fitted on `symbols` symbols sampled from the model itself (from
    `<BOS>`, or the empty history without one) instead of on data: counting a model's samples
    estimates the n-gram closest to the *model* in KL, its own habits included, and needs no
    training data (a Hugging Face model's user rarely has it). It costs `symbols` model calls,
    once per model (`info["model_calls"]`); seeded. On the authors' Shakespeare LSTM it cut
    `twisted`'s median RAE at K = 7 and 320 calls from 0.081 (fitted on data) to 0.051
    (docs/decisions.md §19)."""
    starts = [[bos] if bos is not None else [] for _ in range(DISTILL_ROWS)]
    steps = -(-symbols // DISTILL_ROWS)
    drawn = sample_continuations(model, starts, steps, torch.Generator().manual_seed(seed))
    first = torch.tensor(starts, dtype=torch.long).reshape(DISTILL_ROWS, int(bos is not None))
    surrogate = fit_surrogate(torch.cat([first, drawn], 1).tolist(), vocab, order,
                              skip_first=bos is not None)
    if isinstance(surrogate, HPYPModel):
        surrogate.info.update(distilled_symbols=DISTILL_ROWS * steps,
                              model_calls=DISTILL_ROWS * steps)
    return surrogate


def with_surrogate(batch: Batch, budgets: Sequence[int] | None, surrogate: ContextAutomaton,
                   method: str, run: Callable[[Batch, Sequence[int] | None, Messages],
                                              list[Estimate]]) -> list[Estimate]:
    """Run a twisted method on `batch` in task groups whose messages fit in memory:
    `run(part, its budgets, its messages)` per group, estimates in task order."""
    check_surrogate(batch, surrogate, method)
    estimates: list[Estimate] = []
    for tasks in task_groups(batch, surrogate):
        part = subset(batch, tasks)
        part_budgets = None if budgets is None else [budgets[t] for t in tasks.tolist()]
        estimates += run(part, part_budgets, Messages.of(part, surrogate))
    return estimates


def check_surrogate(batch: Batch, surrogate: ContextAutomaton | None, method: str) -> None:
    if surrogate is None:
        raise QueryError(f"method {method!r} needs surrogate=<ContextAutomaton>; fit one on "
                         "training sequences with seqq.estimators.twisted.fit_surrogate("
                         "sequences, vocab)")
    if not isinstance(surrogate, ContextAutomaton):
        raise QueryError(f"{method}: the surrogate must be a ContextAutomaton (HPYPModel, "
                         f"MarkovModel), got {type(surrogate).__name__}")
    if surrogate.vocab_size != batch.vocab_size:
        raise QueryError(f"the surrogate has {surrogate.vocab_size} symbols but the model has "
                         f"{batch.vocab_size}; fit it on sequences of the model's vocabulary")


def message_cells(batch: Batch, surrogate: ContextAutomaton) -> int:
    """Message values the batch's lattice needs: nodes × C."""
    return batch.lattice.num_nodes * surrogate.num_contexts


def task_groups(batch: Batch, surrogate: ContextAutomaton) -> list[Tensor]:
    """Consecutive tasks whose lattices' messages (nodes × C values) take about
    `MESSAGE_ELEMENTS` at most; usually one group (tasks asking one query share its nodes)."""
    lattice = batch.lattice
    nodes_per_query = torch.bincount(lattice.query, minlength=len(lattice.roots))
    query_of_task = torch.zeros(batch.num_tasks, dtype=torch.long)
    query_of_task[batch.branch_task] = lattice.query[batch.branch_root]
    # a query's messages are counted at the first task asking it
    first_task = torch.full((len(lattice.roots),), batch.num_tasks).scatter_reduce(
        0, query_of_task, torch.arange(batch.num_tasks), reduce="amin")
    first_use = torch.zeros(batch.num_tasks, dtype=torch.long)
    asked = first_task < batch.num_tasks
    first_use[first_task[asked]] = nodes_per_query[asked] * surrogate.num_contexts
    bucket = (torch.cumsum(first_use, 0) - first_use) // MESSAGE_ELEMENTS
    sizes = torch.unique_consecutive(bucket, return_counts=True)[1]
    return list(torch.arange(batch.num_tasks).split(sizes.tolist()))


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
        allowed get 0 (the domain masks them); the rest are floored at LOG_FLOOR below the
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
        values = torch.maximum(values, values.amax(-1, keepdim=True) + LOG_FLOOR)
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
    chunk = max(1, STEP_ELEMENTS // (C * lattice.vocab_size))
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
