"""Count-based n-gram models fitted in seconds: cheap Markov surrogates of a neural model.

Twisted proposals (`seqq/estimators/twisted.py`) need a model whose future can be summed exactly;
an n-gram fitted on the training split is a `MarkovModel`, so its forward/backward DP comes free.
Smoothing is interpolated absolute discounting (Ney, Essen & Kneser 1994): each order keeps
max(N(c,x) − D, 0)/N(c) and hands the discounted mass D·T(c)/N(c) (T = distinct successors of c)
to the next lower order, down to the uniform distribution. Every symbol therefore has positive
probability in every context, so a surrogate never rules out a path the model allows.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from seqq.errors import DataError
from seqq.models.markov import MarkovModel

MAX_TABLE = 2**20  # entries of the order-n table V^(n+1): 8 MB of float64
DISCOUNT_RANGE = (0.1, 0.9)  # Ney's estimate is clipped here on degenerate corpora


def auto_order(vocab_size: int, max_table: int = MAX_TABLE) -> int:
    """The largest order n with V^(n+1) ≤ max_table; 0 when even V^2 is too big (GPT-2)."""
    order = 0
    while vocab_size > 1 and vocab_size ** (order + 2) <= max_table:
        order += 1
    return order


def fit_ngram(sequences: Sequence[Sequence[int]], vocab_size: int, order: int | None = None,
              discount: float | None = None, max_table: int = MAX_TABLE) -> MarkovModel:
    """An order-`order` Markov model (context = last `order` symbols) fitted by counting.

    `order=None` picks `auto_order(vocab_size, max_table)`. `discount=None` estimates D per order
    as n1 / (n1 + 2·n2) from the counts of n-grams seen once and twice (clipped to
    `DISCOUNT_RANGE`). A context never seen falls back to the lower order entirely.
    """
    order = auto_order(vocab_size, max_table) if order is None else order
    if order < 0:
        raise DataError(f"an n-gram order must be >= 0, got {order}")
    if discount is not None and not 0 < discount <= 1:
        raise DataError(f"the discount must lie in (0, 1], got {discount}")
    tokens, position = _flatten(sequences, vocab_size)
    probs = torch.full((1, vocab_size), 1.0 / vocab_size, dtype=torch.float64)
    gram = tokens.clone()  # base-V id of the (m+1)-gram ending at each token, oldest symbol first
    for m in range(order + 1):
        if m:
            gram[m:] += tokens[:-m] * vocab_size**m
        ids = gram[position >= m]  # windows that stay inside one sequence
        counts = torch.bincount(ids, minlength=vocab_size ** (m + 1)).view(-1, vocab_size).double()
        lower = probs.repeat(vocab_size, 1) if m else probs  # row c ↦ context c minus its oldest symbol
        probs = _interpolate(counts, lower, _discount(counts) if discount is None else discount)
    return MarkovModel(probs, order)


def _flatten(sequences: Sequence[Sequence[int]], vocab_size: int) -> tuple[Tensor, Tensor]:
    """All sequences end to end, and each token's position within its own sequence."""
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    if not int(lengths.sum()):
        raise DataError("cannot fit an n-gram model on no tokens; pass the training sequences")
    tokens = torch.cat([torch.as_tensor(list(s), dtype=torch.long) for s in sequences if len(s)])
    if int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size:
        raise DataError(f"training symbols must lie in 0..{vocab_size - 1}; "
                        "pass the vocabulary size of the dataset the sequences come from")
    starts = torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
    return tokens, torch.arange(len(tokens)) - starts


def _discount(counts: Tensor) -> float:
    n1, n2 = int((counts == 1).sum()), int((counts == 2).sum())
    estimate = n1 / (n1 + 2 * n2) if n1 + n2 else DISCOUNT_RANGE[1]
    return min(max(estimate, DISCOUNT_RANGE[0]), DISCOUNT_RANGE[1])


def _interpolate(counts: Tensor, lower: Tensor, discount: float) -> Tensor:
    """P(x|c) = (max(N(c,x) − D, 0) + D·T(c)·P_lower(x|c)) / N(c); unseen contexts use P_lower."""
    total = counts.sum(-1, keepdim=True)
    types = (counts > 0).sum(-1, keepdim=True)
    kept = (counts - discount).clamp_min(0) + discount * types * lower
    return torch.where(total > 0, kept / total.clamp_min(1), lower)
