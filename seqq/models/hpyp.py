"""Hierarchical Pitman–Yor n-gram models: the depth-limited sequence memoizer (Wood et al.,
ICML 2009), a fast baseline whose every query is exact at any horizon.

Restaurant u (a context of at most n−1 symbols) draws G_u ~ PY(d_|u|, 0, G_π(u)), π(u) dropping
the oldest symbol, with G_[] ~ PY(d_0, 0, uniform). Seating starts at one table per type per
context, which is interpolated Kneser–Ney; optional Gibbs sweeps reseat customers and resample
the discounts. Predictions depend only on the longest suffix of the history that is a training
context, and that suffix updates deterministically with each symbol, so the model is a finite
automaton (`ContextAutomaton`) and `seqq.exact` answers its queries by forward DP.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from seqq.errors import CheckpointError, QueryError
from seqq.models.automaton import ContextAutomaton
from seqq.models.payload import load_payload, save_payload

FORMAT = "seqq-hpyp"
VERSION = 1
# 002's initial discounts d_0..d_3 and the one shared below depth 4 (Wood et al. 2009, §6)
PAPER_DISCOUNTS = (0.62, 0.69, 0.74, 0.80, 0.95)
SHARED_FROM_DEPTH = len(PAPER_DISCOUNTS) - 1
PAD = -1


class HPYPModel(ContextAutomaton):
    """An order-n HPYP from its seating summary: per training context (rows of `contexts`,
    left-padded with -1, sorted by depth) the customers and tables of every symbol it saw."""

    def __init__(self, vocab: Sequence[str], order: int, contexts: Tensor, pair_context: Tensor,
                 pair_symbol: Tensor, customers: Tensor, tables: Tensor, discounts: Tensor,
                 info: dict | None = None):
        self.vocab, self.order, self.vocab_size = list(vocab), int(order), len(vocab)
        _check_size(self.vocab_size, self.order)
        self.contexts = contexts.long()
        self.num_contexts = len(self.contexts)
        self.pair_context, self.pair_symbol = pair_context.long(), pair_symbol.long()
        self.customers, self.tables = customers.long(), tables.long()
        self.discounts = discounts.double()
        self.info = dict(info or {})
        self.depth, self.parent, self.prefix_parent = _tree(self.contexts, self.vocab_size)
        self.log_table = self._predictive().log()
        self.next_context = self._transitions()

    # --- fitting ----------------------------------------------------------------------------
    @classmethod
    def fit(cls, sequences: Sequence[Sequence[int]], vocab: Sequence[str], order: int = 5,
            skip_first: bool = True, discounts: Sequence[float] = PAPER_DISCOUNTS,
            sweeps: int = 0, seed: int = 0, resample_discounts: bool = True) -> HPYPModel:
        """Count every training context, seat one table per type (interpolated Kneser–Ney),
        then run `sweeps` Gibbs sweeps (reseating, then discount resampling unless
        `resample_discounts=False`), seeded.

        `skip_first`: the first symbol of each sequence is a `<BOS>` the model conditions on but
        never predicts (as the LSTMs are trained)."""
        V = len(vocab)
        _check_size(V, order)
        if order < 2:
            raise ValueError(f"an HPYP n-gram model needs order n >= 2, got {order}")
        windows, targets = _observations(sequences, order, int(skip_first), V)
        if not len(targets):
            raise ValueError("no training symbols to fit an HPYP model on")
        contexts = _all_contexts(windows, order, V)
        keys = _global_keys(contexts, V)
        leaf = torch.as_tensor(np.searchsorted(keys, _global_keys(windows, V)))
        depth, parent, _ = _tree(torch.as_tensor(contexts), V)
        pair_context, pair_symbol, customers, tables = _kneser_ney_seating(
            leaf, torch.as_tensor(targets), depth, parent, V)
        d = torch.tensor([discounts[min(L, len(discounts) - 1)] for L in range(order)],
                         dtype=torch.float64)
        info = dict(train_symbols=int(len(targets)), sweeps=int(sweeps), seed=int(seed))
        if sweeps:
            sampler = _GibbsSampler(leaf, torch.as_tensor(targets), parent, depth, pair_context,
                                    pair_symbol, customers, tables, d, V, seed)
            for _ in range(sweeps):
                sampler.sweep(resample_discounts)
            customers, tables, d = sampler.state()
        return cls(vocab, order, torch.as_tensor(contexts), pair_context, pair_symbol,
                   customers, tables, d, info)

    def _predictive(self) -> Tensor:
        """P(v|u) = (c_uv − d·t_uv)/c_u· + (d·t_u·/c_u·)·P(v|π(u)), top down (Teh 2006, c = 0)."""
        C, V = self.num_contexts, self.vocab_size
        total = torch.zeros(C, dtype=torch.float64).index_add_(0, self.pair_context,
                                                                 self.customers.double())
        tabs = torch.zeros(C, dtype=torch.float64).index_add_(0, self.pair_context,
                                                                self.tables.double())
        d = self.discounts[self.depth]
        own = (self.customers - d[self.pair_context] * self.tables) / total[self.pair_context]
        back_off = d * tabs / total
        probs = torch.empty(C, V, dtype=torch.float64)
        pair_depth = self.depth[self.pair_context]
        for L in range(self.order):
            rows = (self.depth == L).nonzero().flatten()
            base = torch.full((len(rows), V), 1.0 / V, dtype=torch.float64) if L == 0 else (
                probs[self.parent[rows]])
            probs[rows] = back_off[rows, None] * base
            at = pair_depth == L
            probs.index_put_((self.pair_context[at], self.pair_symbol[at]), own[at], accumulate=True)
        return probs

    def _transitions(self) -> Tensor:
        """next(u, v) = u·v when that is a context, else next(π(u), v) (the longest context
        suffix of u·v), filled depth by depth so every parent row is final before it is copied."""
        C, V = self.num_contexts, self.vocab_size
        nxt = torch.zeros(C, V, dtype=torch.long)
        last = self.contexts[:, -1]
        for L in range(self.order):
            rows = (self.depth == L).nonzero().flatten()
            if L:
                nxt[rows] = nxt[self.parent[rows]]
            longer = (self.depth == L + 1).nonzero().flatten()
            nxt[self.prefix_parent[longer], last[longer]] = longer
        return nxt

    def __repr__(self) -> str:  # names a surrogate in the sweep's `options` column
        source = ("" if "distilled_symbols" not in self.info else
                  f", distilled from {self.info['distilled_symbols']:,} model samples")
        return (f"HPYPModel(order={self.order}, vocab_size={self.vocab_size}, "
                f"contexts={self.num_contexts}{source})")

    # --- states -------------------------------------------------------------------------------
    def _context(self, history: Sequence[int]) -> int:
        """The longest training context that is a suffix of the history (only the last n−1
        symbols matter), found by walking the automaton from the empty context."""
        state = 0
        for s in list(history)[max(len(history) - self.order + 1, 0):]:
            if not 0 <= int(s) < self.vocab_size:
                raise QueryError(f"history symbol {s} is outside the vocabulary "
                                 f"0..{self.vocab_size - 1}")
            state = int(self.next_context[state, int(s)])
        return state

    def tempered(self, temperature: float) -> HPYPModel:
        """The same automaton with every conditional ∝ p^{1/T} (docs/decisions.md §10)."""
        model = copy.copy(self)
        model.log_table = torch.log_softmax(self.log_table / temperature, -1)
        return model

    def direct_customers(self) -> Tensor:
        """Per (context, symbol) pair, the training observations seated there (its customers
        minus the tables its child restaurants send up); fixed by the data, whatever the seating."""
        child = self.depth[self.pair_context] > 0
        up = _pair_index(self.parent[self.pair_context[child]], self.pair_symbol[child],
                         self.pair_context, self.pair_symbol, self.vocab_size)
        return self.customers - torch.zeros_like(self.customers).index_add_(0, up,
                                                                            self.tables[child])

    def prefix_tree_nodes(self) -> int:
        """Nodes left when non-branching contexts without observations of their own are
        collapsed (002's prefix tree, Theorem 1); `num_contexts` counts the prefix trie."""
        children = torch.bincount(self.parent[1:], minlength=self.num_contexts)
        direct = torch.zeros(self.num_contexts, dtype=torch.long).index_add_(
            0, self.pair_context, self.direct_customers())
        kept = (children >= 2) | (direct > 0)
        kept[0] = True
        return int(kept.sum())

    # --- checkpoint ---------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        save_payload(path, dict(format=FORMAT, version=VERSION, vocab=self.vocab, order=self.order,
                                contexts=self.contexts.int(), pair_context=self.pair_context.int(),
                                pair_symbol=self.pair_symbol.int(), customers=self.customers.int(),
                                tables=self.tables.int(), discounts=self.discounts, info=self.info))

    @classmethod
    def load(cls, path: str | Path) -> HPYPModel:
        fields = ("vocab", "order", "contexts", "pair_context", "pair_symbol", "customers",
                  "tables", "discounts")
        payload = load_payload(path, kind="HPYP", format=FORMAT, version=VERSION, fields=fields,
                               remake="seqq train model=hpyp dataset=<name>")
        return cls(*(payload[f] for f in fields), info=payload.get("info"))


# --- construction helpers ---------------------------------------------------------------------
def indexable(V: int, order: int) -> bool:
    """Whether an order-n HPYP over V symbols can key its contexts by one int64."""
    return order * float(V) ** (order - 1) < 2.0**62


def _check_size(V: int, order: int) -> None:
    if not indexable(V, order):
        raise ValueError(f"an order-{order} HPYP over {V} symbols has too many possible "
                         f"contexts to index; lower model.order")


def _global_keys(rows: np.ndarray, V: int) -> np.ndarray:
    """One sortable int64 per left-padded context row: depth first, then the base-V number of
    its symbols (so sorting by key sorts contexts by depth)."""
    rows = np.asarray(rows, dtype=np.int64)
    width = rows.shape[1]
    depth = (rows >= 0).sum(1)
    powers = V ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return depth * V**width + (np.maximum(rows, 0) * powers).sum(1)


def _tree(contexts: Tensor, V: int) -> tuple[Tensor, Tensor, Tensor]:
    """Depth, suffix parent (oldest symbol dropped) and prefix parent (newest dropped) of every
    context row; both parents are contexts too, because the set is suffix- and prefix-closed."""
    rows = contexts.numpy().astype(np.int64)
    keys = _global_keys(rows, V)
    if len(keys) > 1 and not (np.diff(keys) > 0).all():
        raise CheckpointError("HPYP contexts must be distinct and sorted by depth")
    depth = (rows >= 0).sum(1)
    oldest = rows.shape[1] - depth
    suffix = rows.copy()
    suffix[np.arange(len(rows)), np.minimum(oldest, rows.shape[1] - 1)] = PAD
    prefix = np.concatenate([np.full((len(rows), 1), PAD), rows[:, :-1]], 1)
    parents = []
    for parent_rows in (suffix, prefix):
        ids = np.searchsorted(keys, _global_keys(parent_rows, V)).clip(max=len(keys) - 1)
        ids[depth == 0] = 0
        if not (keys[ids] == _global_keys(parent_rows, V))[depth > 0].all():
            raise CheckpointError("HPYP contexts are not closed under taking suffixes")
        parents.append(torch.as_tensor(ids))
    return torch.as_tensor(depth), parents[0], parents[1]


def _observations(sequences: Sequence[Sequence[int]], order: int, start: int, V: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """For every predicted symbol, its context window (the last n−1 symbols, left-padded)."""
    width = order - 1
    arrays = [np.asarray(s, dtype=np.int64) for s in sequences if len(s) > start]
    if not arrays:
        return np.zeros((0, width), dtype=np.int64), np.zeros(0, dtype=np.int64)
    flat = np.concatenate([np.concatenate([np.full(width, PAD), a]) for a in arrays])
    if ((flat < PAD) | (flat >= V)).any():
        raise ValueError(f"training symbols must lie in 0..{V - 1}")
    lengths = np.array([len(a) for a in arrays])
    starts = np.concatenate([[0], np.cumsum(lengths + width)[:-1]])
    positions = np.concatenate([s + np.arange(start, n) for s, n in zip(starts, lengths,
                                                                           strict=True)])
    windows = np.lib.stride_tricks.sliding_window_view(flat, width)[positions]
    return windows, flat[positions + width]


def _all_contexts(windows: np.ndarray, order: int, V: int) -> np.ndarray:
    """Every suffix of every observation's context, once each, sorted by depth then symbols."""
    width = order - 1
    depth = (windows >= 0).sum(1)
    rows = []
    for L in range(order):
        cut = windows[depth >= L].copy()
        cut[:, :width - L] = PAD
        _, first = np.unique(_global_keys(cut, V), return_index=True)
        rows.append(cut[first])
    return np.concatenate(rows)


def _pair_index(context: Tensor, symbol: Tensor, pair_context: Tensor, pair_symbol: Tensor,
                V: int) -> Tensor:
    """Positions of the (context, symbol) pairs among the sorted pairs."""
    return torch.searchsorted(pair_context * V + pair_symbol, context * V + symbol)


def _kneser_ney_seating(leaf: Tensor, targets: Tensor, depth: Tensor, parent: Tensor, V: int
                        ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Customers and tables per (context, symbol) with one table per type: a restaurant's
    customers are its own observations plus one per child restaurant that saw the symbol."""
    keys, weights = leaf * V + targets, torch.ones_like(targets)
    found_keys, found_counts = [], []
    for L in range(int(depth.max()), -1, -1):
        at = depth[keys // V] == L
        level, counts = keys[at], weights[at]
        unique, inverse = torch.unique(level, return_inverse=True)
        total = torch.zeros(len(unique), dtype=torch.long).index_add_(0, inverse, counts)
        found_keys.append(unique)
        found_counts.append(total)
        if L:  # one table per type sends one customer to the parent
            keys = torch.cat([keys[~at], parent[unique // V] * V + unique % V])
            weights = torch.cat([weights[~at], torch.ones_like(unique)])
    keys, customers = torch.cat(found_keys), torch.cat(found_counts)
    order = torch.argsort(keys)
    keys, customers = keys[order], customers[order]
    return keys // V, keys % V, customers, torch.ones_like(customers)


class _GibbsSampler:
    """Chinese-restaurant-franchise Gibbs (Teh 2006): remove each observation and seat it again,
    opening tables in parents as needed; then resample the discounts on a grid given the seating
    (uniform prior, depths ≥ 4 sharing one discount as in 002)."""

    def __init__(self, leaf: Tensor, targets: Tensor, parent: Tensor, depth: Tensor,
                 pair_context: Tensor, pair_symbol: Tensor, customers: Tensor, tables: Tensor,
                 discounts: Tensor, V: int, seed: int):
        self.rng, self.V = random.Random(seed), V
        self.pair_context, self.depth = pair_context, depth
        pair_parent = _pair_index(parent[pair_context], pair_symbol, pair_context, pair_symbol, V)
        pair_parent[depth[pair_context] == 0] = -1
        self.pair_parent = pair_parent.tolist()
        self.ctx = pair_context.tolist()
        self.pair_depth = depth[pair_context].tolist()
        self.leaf_pairs = _pair_index(leaf, targets, pair_context, pair_symbol, V).tolist()
        self.sizes = [[c] for c in customers.tolist()]  # one table per type to start
        self.cust = customers.tolist()
        C = len(depth)
        self.cust_total = torch.zeros(C, dtype=torch.long).index_add_(0, pair_context,
                                                                       customers).tolist()
        self.tab_total = torch.zeros(C, dtype=torch.long).index_add_(0, pair_context,
                                                                      tables).tolist()
        self.d = discounts.tolist()

    def _parent_probs(self, pair: int) -> list[float]:
        """P(v | parent restaurant) for every pair on the path from `pair` up to the root."""
        chain = []
        while pair >= 0:
            chain.append(pair)
            pair = self.pair_parent[pair]
        p, above = 1.0 / self.V, [0.0] * len(chain)
        for i in range(len(chain) - 1, -1, -1):
            w = chain[i]
            above[i] = p
            u, d = self.ctx[w], self.d[self.pair_depth[w]]
            if self.cust_total[u]:
                p = (self.cust[w] - d * len(self.sizes[w]) + d * self.tab_total[u] * p) / (
                    self.cust_total[u])
        return above

    def _remove(self, pair: int) -> None:
        while pair >= 0:
            sizes, r = self.sizes[pair], self.rng.random() * self.cust[pair]
            k = 0
            while r >= sizes[k]:
                r -= sizes[k]
                k += 1
            sizes[k] -= 1
            self.cust[pair] -= 1
            self.cust_total[self.ctx[pair]] -= 1
            if sizes[k]:
                return
            sizes.pop(k)
            self.tab_total[self.ctx[pair]] -= 1
            pair = self.pair_parent[pair]

    def _add(self, pair: int) -> None:
        above = self._parent_probs(pair)
        for p_parent in above:
            u, d, sizes = self.ctx[pair], self.d[self.pair_depth[pair]], self.sizes[pair]
            self.cust[pair] += 1
            self.cust_total[u] += 1
            old = self.cust[pair] - 1 - d * len(sizes)
            new = d * self.tab_total[u] * p_parent if self.tab_total[u] else 1.0
            r = self.rng.random() * (old + new)
            if r < old:
                k = 0
                while r >= sizes[k] - d and k + 1 < len(sizes):
                    r -= sizes[k] - d
                    k += 1
                sizes[k] += 1
                return
            sizes.append(1)
            self.tab_total[u] += 1
            pair = self.pair_parent[pair]

    def sweep(self, resample_discounts: bool) -> None:
        order = list(range(len(self.leaf_pairs)))
        self.rng.shuffle(order)
        for i in order:
            self._remove(self.leaf_pairs[i])
            self._add(self.leaf_pairs[i])
        if resample_discounts:
            self._resample_discounts()

    def _resample_discounts(self, grid: int = 99) -> None:
        """log p(seating | d) = Σ_u (t_u − 1)·log d + Σ_tables log Γ(n − d) − log Γ(1 − d)."""
        d = torch.arange(1, grid + 1, dtype=torch.float64) / (grid + 1)
        group = [min(L, SHARED_FROM_DEPTH) for L in self.pair_depth]
        for g in sorted(set(group)):
            pairs = [w for w, gw in enumerate(group) if gw == g]
            sizes, counts = torch.tensor([n for w in pairs for n in self.sizes[w]],
                                         dtype=torch.float64).unique(return_counts=True)
            extra_tables = sum(self.tab_total[u] - 1 for u in {self.ctx[w] for w in pairs})
            log_post = (extra_tables * d.log()
                        + (counts * torch.lgamma(sizes[None] - d[:, None])).sum(1)
                        - counts.sum() * torch.lgamma(1 - d))
            pick = torch.multinomial(torch.softmax(log_post, 0), 1,
                                     generator=torch.Generator().manual_seed(
                                         self.rng.getrandbits(62))).item()
            for L in range(len(self.d)):
                if min(L, SHARED_FROM_DEPTH) == g:
                    self.d[L] = d[pick].item()

    def state(self) -> tuple[Tensor, Tensor, Tensor]:
        tables = torch.tensor([len(s) for s in self.sizes], dtype=torch.long)
        return torch.tensor(self.cust, dtype=torch.long), tables, torch.tensor(
            self.d, dtype=torch.float64)
