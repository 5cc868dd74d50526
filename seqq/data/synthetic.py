"""Seeded synthetic stand-ins with the shapes of the paper's datasets.

They let the whole pipeline run offline on every dataset's vocabulary size. The source is a
random hidden Markov model (`hidden_states=0`: a Markov chain over the symbols themselves);
smaller `concentration` gives peakier rows and so lower entropy. Every dataset made here has
`synthetic=True`, and its name starts with `synthetic_`, so results can never pass for real ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from seqq.data.base import BOS, DEFAULT_FRACTIONS, SequenceDataset, split_indices
from seqq.errors import DataError


@dataclass(frozen=True)
class Preset:
    vocab_size: int  # including <BOS>, as the paper's V
    num_sequences: int
    min_length: int
    max_length: int


PRESETS = {
    "reviews": Preset(29, 2000, 15, 60),
    "apps": Preset(88, 1000, 15, 200),
    "moocs": Preset(98, 2000, 15, 80),
    "shakespeare": Preset(68, 400, 200, 1000),
}


def _dirichlet_rows(rng: np.random.Generator, rows: int, cols: int, alpha: float) -> np.ndarray:
    return rng.dirichlet(np.full(cols, alpha), size=rows)


def _draw(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """One categorical draw per row of `probs` [N, C]."""
    u = rng.random((probs.shape[0], 1))
    return np.minimum((probs.cumsum(1) < u).sum(1), probs.shape[1] - 1)


def load_synthetic(preset: str = "apps", *, vocab_size: int | None = None,
                   num_sequences: int | None = None, min_length: int | None = None,
                   max_length: int | None = None, hidden_states: int = 16,
                   concentration: float = 0.1, fractions: Sequence[float] = DEFAULT_FRACTIONS,
                   seed: int = 0) -> SequenceDataset:
    """Sequences from a seeded random HMM shaped like `preset`; any preset value can be overridden."""
    if preset not in PRESETS:
        raise DataError(f"unknown synthetic preset {preset!r}; choose one of {sorted(PRESETS)}")
    p = PRESETS[preset]
    V = vocab_size or p.vocab_size
    n = num_sequences or p.num_sequences
    lo, hi = min_length or p.min_length, max_length or p.max_length
    if V < 2 or n < 1 or not 1 <= lo <= hi or concentration <= 0 or hidden_states < 0:
        raise DataError("synthetic: need vocab_size >= 2, num_sequences >= 1, "
                        "1 <= min_length <= max_length, concentration > 0, hidden_states >= 0")
    rng = np.random.default_rng(seed)
    symbols = V - 1
    states = hidden_states or symbols
    start = rng.dirichlet(np.full(states, 1.0))
    transition = _dirichlet_rows(rng, states, states, concentration)
    emission = (_dirichlet_rows(rng, states, symbols, concentration) if hidden_states
                else np.eye(symbols))
    lengths = rng.integers(lo, hi + 1, size=n)
    z = _draw(rng, np.broadcast_to(start, (n, states)))
    tokens = np.empty((n, hi), dtype=np.int64)
    for t in range(hi):
        tokens[:, t] = _draw(rng, emission[z]) + 1  # ids shift by one: 0 is <BOS>
        z = _draw(rng, transition[z])
    sequences = [[0, *tokens[i, :lengths[i]].tolist()] for i in range(n)]
    train, valid, test = split_indices(n, fractions, seed)
    source = f"HMM with {hidden_states} states" if hidden_states else "Markov chain"
    return SequenceDataset(
        name=f"synthetic_{preset}", vocab=[BOS, *(f"s{i}" for i in range(1, V))],
        train=[sequences[i] for i in train], valid=[sequences[i] for i in valid],
        test=[sequences[i] for i in test], synthetic=True,
        description=(f"SYNTHETIC stand-in for {preset}: seeded random {source}, V={V}, "
                     f"concentration {concentration}, seed {seed}"),
        stats=dict(sequences=n, events=int(lengths.sum())),
    )
