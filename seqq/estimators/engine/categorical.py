"""Draws from many unnormalised categorical rows over a vocabulary, without a cumsum over it.

Every sampler draws next symbols by inverse CDF. Over a language model's vocabulary (V ≈ 50k) a
float64 cumulative sum per row costs as much as the model step itself: it is sequential and
doubles the bytes. So each row is cut into blocks of `width` symbols. One vectorised sum per
block gives the block masses. A draw finds its block on the short CDF of those masses, then its
symbol on that block's own CDF, which is built only for the (row, block) pairs that draws land
in. This is still an exact inverse-CDF draw: the symbol a full cumsum would give, up to
rounding. A vocabulary of at most `width` symbols is one block: each row's CDF, built once with
its mass (its last entry), which draws search directly.

Masses are exp(logit): a model's log-probabilities need no shift. A row whose mass would
underflow or overflow float32 that way (a domain of tiny probability) takes exp(logit − its
largest logit) instead, so it keeps its precision. A row with no mass at all has log_total
−inf and draws an arbitrary symbol (callers drop such rows).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from seqq.estimators.engine.memory import FLOAT64_BYTES, rows_within

BLOCK_WIDTH = 256
UNSHIFTED_MASS = (2.0**-32, 2.0**64)  # row masses Σ exp(logit) that need no shift (see below)
SPARSE_SHARE = 16  # a mask with at most 1/16 of its entries set is read by gathering them
COPIED_ENTRIES = 2**20  # draws through shared rows copy their CDF rows up to this many entries


@dataclass(frozen=True)
class Excluded:
    """A domain that allows all but a few symbols of each row: those symbols, [n, E] long,
    padded with −1 (`Lattice.excluded`). Masking [n, V] rows with it is one scatter of n·E
    entries, not a pass over an [n, V] mask."""

    symbols: Tensor

    def __getitem__(self, rows: Tensor) -> Excluded:
        return Excluded(self.symbols[rows])

    def __len__(self) -> int:
        return len(self.symbols)

    @property
    def device(self) -> torch.device:
        return self.symbols.device

    def listed(self) -> tuple[Tensor, Tensor]:
        """(row, symbol) of every symbol listed."""
        row, slot = (self.symbols >= 0).nonzero(as_tuple=True)
        return row, self.symbols[row, slot]


def without(domain: Domain, rows: Tensor, symbols: Tensor) -> Domain:
    """`domain` with symbols[i] no longer allowed at row rows[i] (distinct allowed pairs): an
    `Excluded` domain lists them too, a mask is copied and cleared there."""
    if not isinstance(domain, Excluded):
        out = domain.clone()
        out[rows, symbols] = False
        return out
    counts = torch.bincount(rows, minlength=len(domain))
    extra = torch.full((len(domain), int(counts.max()) if len(rows) else 0), -1,
                       dtype=torch.long, device=rows.device)
    order, row, slot = _slots(rows, counts)
    extra[row, slot] = symbols[order]
    return Excluded(torch.cat([domain.symbols, extra], 1))


def _slots(rows: Tensor, counts: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Lay entries with row ids `rows` out in a grid of one row per id (`counts`: entries per
    id): entry order[i] goes to grid[row[i], slot[i]], slots counted from 0 in entry order."""
    order = torch.sort(rows, stable=True).indices
    row = rows[order]
    slot = torch.arange(len(row), device=rows.device) - (counts.cumsum(0) - counts)[row]
    return order, row, slot


Domain = Tensor | Excluded  # the allowed symbols of n rows: an [n, V] bool mask, or `Excluded`


def fill_outside(values: Tensor, domain: Domain, fill: float) -> Tensor:
    """`values` [n, V] with `fill` at every symbol outside the rows' domains, in place."""
    if not isinstance(domain, Excluded):
        return values.masked_fill_(~domain, fill)
    if domain.symbols.shape[1]:
        values.index_put_(domain.listed(), values.new_tensor(fill))
    return values


def few_allowed(mask: Tensor) -> bool:
    """At most 1/SPARSE_SHARE of the mask is set (a query's deciding step allows one symbol
    or a few): gathering its entries beats a pass over [n, V]."""
    return int(torch.count_nonzero(mask)) * SPARSE_SHARE <= mask.numel()


def outside_filled(values: Tensor, domain: Domain, fill: float) -> Tensor:
    """A copy of `values` [n, V] with `fill` at every symbol outside the rows' domains."""
    if isinstance(domain, Excluded):
        return fill_outside(values.clone(), domain, fill)
    return torch.where(domain, values, fill)


@dataclass
class Categorical:
    weights: Tensor  # [n, V] exp(logit − shift), zero off the domain
    block_mass: Tensor  # [n, B] float64 mass of each block (the last may be shorter)
    block_cdf: Tensor  # [n, B] float64 cumulative block masses
    shift: Tensor  # [n] the largest logit of each row (0 where the row has no mass)
    width: int
    row_cdf: Tensor | None = None  # [n, V] float64 cumulative weights, for rows of one block
    _log_total: Tensor | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def from_logits(cls, logits: Tensor, domain: Domain | None = None,
                    width: int = BLOCK_WIDTH) -> Categorical:
        """Rows ∝ exp(logits), restricted to `domain` when given; `logits` is left untouched.
        Log-probabilities need no shift (`unshifted_rows`), so most rows take three passes
        over [n, V] (mask, exp, block sums), or two with an `Excluded` domain. Rows whose
        mass would underflow or overflow are redone with their largest logit subtracted. A mask
        of few allowed symbols exps only them."""
        n, V = logits.shape
        W = min(V, width)
        if domain is None or isinstance(domain, Excluded):
            weights = logits.exp()
            if domain is not None:
                fill_outside(weights, domain, 0.0)
        elif few_allowed(domain):  # exp of the allowed entries only
            row, symbol = domain.nonzero(as_tuple=True)
            weights = torch.zeros_like(logits).index_put_((row, symbol),
                                                          logits[row, symbol].exp())
        else:
            weights = torch.where(domain, logits, -math.inf).exp_()
        block_mass, row_cdf = _block_masses(weights, W)
        shift = logits.new_zeros(n)
        redo = (~unshifted_rows(block_mass.sum(-1))).nonzero().flatten()
        if len(redo):
            masked = logits[redo]
            if domain is not None:
                fill_outside(masked, domain[redo], -math.inf)
            top = _finite_or_zero(masked.amax(-1, keepdim=True))
            redone = masked.sub_(top).exp_()
            weights[redo] = redone
            if row_cdf is None:
                block_mass[redo] = block_sums(redone, W).double()
            else:  # the block mass is the CDF's last column
                row_cdf[redo] = redone.cumsum(-1, dtype=torch.float64)
            shift[redo] = top[:, 0]
        return cls(weights, block_mass, block_mass.cumsum(-1), shift, W, row_cdf)

    @classmethod
    def from_weights(cls, weights: Tensor, shift: Tensor, width: int = BLOCK_WIDTH
                     ) -> Categorical:
        """Rows ∝ `weights` ([n, V], ≥ 0), which stand for exp(logit − shift)."""
        W = min(weights.shape[1], width)
        block_mass, row_cdf = _block_masses(weights, W)
        return cls(weights, block_mass, block_mass.cumsum(-1), shift, W, row_cdf)

    @property
    def vocab_size(self) -> int:
        return self.weights.shape[1]

    def log_total(self) -> Tensor:
        """[n] float64 log Σ exp(logits) over the domain; −inf for rows with no mass.
        Computed once and shared (a trie keeps it as its nodes' normalisers): read-only."""
        if self._log_total is None:
            self._log_total = self.shift.double() + self.block_cdf[:, -1].log()
        return self._log_total

    def sample(self, generator: torch.Generator, rows: Tensor | None = None) -> Tensor:
        """One draw per row, or with `rows` one draw from row rows[i] per entry (many entries
        may share a row: a trie node's children). One float64 uniform per draw."""
        count = len(self.weights) if rows is None else len(rows)
        u = torch.rand(count, generator=generator, device=self.weights.device,
                       dtype=torch.float64)
        total = self.block_cdf[:, -1] if rows is None else self.block_cdf[rows, -1]
        return self.locate(rows, _below(u * total, total))

    def systematic(self, draws: Tensor, generator: torch.Generator,
                   rows: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Systematic sampling of `draws[i]` symbols from row i (or from row rows[i]): the
        evenly spaced points (u_i + j)/d_i of the row's mass, j < d_i, u_i ~ U[0, 1). Each
        symbol's count is within one of d·w/Σw and exactly that in expectation. Returns the
        distinct (row i, symbol, count) triples, sorted by row then symbol; rows without mass
        draw nothing. One float64 uniform per row."""
        device = self.weights.device
        total = self.block_cdf[:, -1] if rows is None else self.block_cdf[rows, -1]
        u = torch.rand(len(total), generator=generator, device=generator.device,
                       dtype=torch.float64).to(device)
        d = torch.where(total > 0, draws.to(device), 0)
        many = d > self.vocab_size  # more draws than symbols: counted from the row's CDF
        few = torch.where(many, 0, d)
        row = torch.repeat_interleave(torch.arange(len(total), device=device), few)
        j = torch.arange(len(row), device=device) - (few.cumsum(0) - few)[row]
        targets = _below((u[row] + j) / d[row] * total[row], total[row])
        symbol = self.locate(row if rows is None else rows[row], targets)
        key, count = torch.unique(row * self.vocab_size + symbol, return_counts=True)
        if many.any():
            more_key, more_count = self._counted(many.nonzero().flatten(), d, u, rows)
            key, order = torch.cat([key, more_key]).sort()
            count = torch.cat([count, more_count])[order]
        return key // self.vocab_size, key % self.vocab_size, count

    def _counted(self, rows_of: Tensor, d: Tensor, u: Tensor, rows: Tensor | None
                 ) -> tuple[Tensor, Tensor]:
        """`systematic` for rows with more draws than symbols, in O(V) each instead of O(d):
        symbol k gets ⌈d·C_k/T − u⌉ − ⌈d·C_{k−1}/T − u⌉ of the points (u + j)/d·T, C the row's
        cumulative weights and T its total. Returns (row·V + symbol, count) where count > 0."""
        V = self.vocab_size
        keys, counts = [], []
        for part in rows_of.split(rows_within(V, FLOAT64_BYTES)):
            source = part if rows is None else rows[part]
            cdf = (self.row_cdf[source] if self.row_cdf is not None
                   else self.weights[source].cumsum(-1, dtype=torch.float64))
            points = torch.ceil(d[part, None] * (cdf / cdf[:, -1:]) - u[part, None])
            points[:, -1] = d[part]  # the last edge holds every point, whatever the rounding
            per_symbol = torch.diff(points, dim=-1, prepend=torch.zeros_like(points[:, :1]))
            r, symbol = per_symbol.nonzero(as_tuple=True)
            keys.append(part[r] * V + symbol)
            counts.append(per_symbol[r, symbol].long())
        return torch.cat(keys), torch.cat(counts)

    def locate(self, rows: Tensor | None, targets: Tensor) -> Tensor:
        """The symbol whose interval of cumulative mass holds each target (0 ≤ target < the
        row's total, so it has mass): draw i from row i, or from row rows[i]."""
        (n, B), (W, V) = self.block_mass.shape, (self.width, self.vocab_size)
        if self.row_cdf is not None:  # one block: its mass is the last entry of the row's CDF
            return _search(self.row_cdf, rows, targets).clamp_max(V - 1)
        row = torch.arange(n, device=targets.device) if rows is None else rows
        block = _search(self.block_cdf, rows, targets).clamp_max(B - 1)
        before = self.block_cdf[row, (block - 1).clamp_min(0)]
        residual = targets - torch.where(block > 0, before, 0.0)
        pairs, at = torch.unique(row * B + block, return_inverse=True)
        columns = (pairs % B * W)[:, None] + torch.arange(W, device=pairs.device)
        inner_weights = self.weights[(pairs // B)[:, None], columns.clamp_max(V - 1)]
        inner_weights[columns >= V] = 0.0  # past the end of a shorter last block
        mass = self.block_mass[row, block]
        inner = inner_weights.cumsum(-1, dtype=torch.float64)
        end = inner[:, -1] if at is None else inner[at, -1]
        # the block's own cumsum may round apart from its block sum: rescale onto it
        scaled = residual * torch.where(mass > 0, end / mass, 0.0)
        column = _search(inner, at, _below(scaled, end)).clamp_max(W - 1)
        return (block * W + column).clamp_max(V - 1)


def _block_masses(weights: Tensor, width: int) -> tuple[Tensor, Tensor | None]:
    """([n, B] float64 block masses, the [n, V] float64 row CDFs or None). Rows of one block
    (V ≤ width) get their CDF here, once, and their mass is its last column: a draw then
    searches it directly, with no second pass."""
    if width < weights.shape[1]:
        return block_sums(weights, width).double(), None
    row_cdf = weights.cumsum(-1, dtype=torch.float64)
    return row_cdf[:, -1:], row_cdf


def block_sums(weights: Tensor, width: int) -> Tensor:
    """[n, ⌈V/width⌉] sums of consecutive blocks of `width` entries of each row (the last block
    may be shorter), in the weights' dtype: one vectorised pass."""
    return _by_blocks(weights, width, torch.sum)


def block_maxima(values: Tensor, width: int) -> Tensor:
    """[n, ⌈V/width⌉] largest entry of each block of `width` entries, as `block_sums`."""
    return _by_blocks(values, width, torch.amax)


def _by_blocks(values: Tensor, width: int, reduce: Callable[..., Tensor]) -> Tensor:
    n, V = values.shape
    full = V // width * width
    out = reduce(values[:, :full].view(n, full // width, width), -1)
    if full < V:
        out = torch.cat([out, reduce(values[:, full:], -1, keepdim=True)], 1)
    return out


def unshifted_rows(total: Tensor) -> Tensor:
    """[n] bool: rows whose Σ exp(logit), summed in float32 without subtracting the row's
    largest logit first, is as exact as with it. A model's log-probabilities (≤ 0, a domain
    of mass ≥ 2⁻³²) are: the largest weight is then far above float32's underflow, and what
    underflows is below 2⁻¹⁰⁰ of the row. Skipping the shift saves two passes over [n, V]
    (max, subtract); rows outside the range, NaN or empty are redone with it."""
    low, high = UNSHIFTED_MASS
    return (total >= low) & (total <= high)


def row_counts(mask: Tensor) -> Tensor:
    """True entries per row of a bool [n, V] (int64). Summed in int32, which CPU torch
    vectorises; a plain (int64) sum of bools is not vectorised, and far slower over a large V."""
    return mask.sum(-1, dtype=torch.int32).long()


def logsumexp_(logits: Tensor) -> Tensor:
    """log Σ exp over the last dim, overwriting `logits` (a fresh tensor the caller owns):
    in float64 over a large vocabulary, cheaper than torch.logsumexp's allocating passes."""
    top = _finite_or_zero(logits.amax(-1, keepdim=True))
    return logits.sub_(top).exp_().sum(-1).log_().add_(top[:, 0])


def _finite_or_zero(top: Tensor) -> Tensor:
    return torch.where(torch.isneginf(top), 0.0, top)


def _below(targets: Tensor, total: Tensor) -> Tensor:
    """Targets kept strictly below the total (u·total can round up to it), so a search with
    right=True lands on an entry with mass; rows of total 0 keep target 0."""
    return torch.minimum(targets, torch.nextafter(total, torch.zeros_like(total)))


def _search(cdf: Tensor, rows: Tensor | None, targets: Tensor) -> Tensor:
    """searchsorted(cdf[rows], targets, right=True) per draw. With shared rows (a trie node's
    walkers), a copy of one CDF row per draw is searched while it is small; past
    COPIED_ENTRIES entries, each draw bisects its own row in place (`_bisect`) instead."""
    if rows is None:
        return torch.searchsorted(cdf, targets[:, None], right=True)[:, 0]
    if len(rows) * cdf.shape[-1] <= COPIED_ENTRIES:
        return torch.searchsorted(cdf[rows], targets[:, None], right=True)[:, 0]
    return _bisect(cdf, rows, targets)


def _bisect(cdf: Tensor, rows: Tensor, targets: Tensor) -> Tensor:
    """How many entries of cdf[rows[i]] are ≤ targets[i], found by halving steps that each
    read one entry per draw: ⌈log2 V⌉ gathers of n entries, not a copy of n rows."""
    V = cdf.shape[-1]
    flat, start = cdf.reshape(-1), rows * V - 1  # flat index just before each draw's row
    last, at = start + V, start.clone()  # at: the last entry known to be ≤ the target
    step = 1 << (V.bit_length() - 1)
    while step:
        probe = torch.minimum(at + step, last)
        at = torch.where(flat[probe] <= targets, probe, at)
        step >>= 1
    return at - start
