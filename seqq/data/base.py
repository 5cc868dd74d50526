"""The dataset record every loader returns, and the preprocessing steps they share.

Splits are made over whole users (event data) or whole contiguous text blocks, never over
overlapping windows, so no held-out window shares an event with a training window
(docs/decisions.md §8).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from seqq.errors import DataError

BOS = "<BOS>"
DEFAULT_FRACTIONS = (0.8, 0.1, 0.1)


@dataclass
class SequenceDataset:
    """Whole sequences per split; each starts with the `<BOS>` id where the vocabulary has one."""

    name: str
    vocab: list[str]
    train: list[list[int]]
    valid: list[list[int]]
    test: list[list[int]]
    synthetic: bool = False
    description: str = ""
    stats: dict = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def bos_id(self) -> int | None:
        """Id of `<BOS>` (always 0 when present); None for vocabularies without one (GPT-2)."""
        return 0 if self.vocab and self.vocab[0] == BOS else None

    @property
    def title(self) -> str:
        """Name for plots and tables; synthetic stand-ins always say so."""
        return f"{self.name} (synthetic)" if self.synthetic else self.name


def natural_sorted(tokens: set[str]) -> list[str]:
    """Numbers in numeric order (item ids), everything else in string order."""
    if all(t.lstrip("-").isdigit() for t in tokens):
        return sorted(tokens, key=int)
    return sorted(tokens)


def split_indices(n: int, fractions: Sequence[float], seed: int) -> tuple[list[int], ...]:
    """A seeded partition of range(n) into train/valid/test by `fractions`.

    Valid and test get at least one item each whenever n ≥ 3, so tiny datasets still evaluate.
    """
    if len(fractions) != 3 or any(f < 0 for f in fractions) or sum(fractions) <= 0:
        raise DataError(f"split fractions must be three non-negative numbers, got {list(fractions)}")
    total = float(sum(fractions))
    n_valid = round(n * fractions[1] / total)
    n_test = round(n * fractions[2] / total)
    if n >= 3:
        n_valid = max(n_valid, 1 if fractions[1] > 0 else 0)
        n_test = max(n_test, 1 if fractions[2] > 0 else 0)
    order = np.random.default_rng(seed).permutation(n).tolist()
    n_train = n - n_valid - n_test
    return order[:n_train], order[n_train:n_train + n_valid], order[n_train + n_valid:]


def events_to_dataset(events: pd.DataFrame, name: str, *, min_events: int,
                      fractions: Sequence[float], seed: int, description: str) -> SequenceDataset:
    """Per-user event sequences from a frame with columns user, time, token.

    Events are ordered by time within each user (ties keep file order); users with fewer than
    `min_events` events are dropped before the vocabulary is built, so it holds only kept symbols.
    """
    if events.empty:
        raise DataError(f"{name}: the raw file holds no events")
    events = events.sort_values(["user", "time"], kind="mergesort")
    counts = events.groupby("user", sort=False)["token"].transform("size")
    events = events[counts >= min_events]
    if events.empty:
        raise DataError(f"{name}: no user has at least {min_events} events")
    tokens = events["token"].astype(str)
    vocab = [BOS, *natural_sorted(set(tokens.unique()))]
    index = {t: i for i, t in enumerate(vocab)}
    codes = tokens.map(index).to_numpy(dtype=np.int64)
    users = events["user"].to_numpy()
    bounds = np.flatnonzero(users[1:] != users[:-1]) + 1
    sequences = [[0, *part.tolist()] for part in np.split(codes, bounds)]
    train, valid, test = split_indices(len(sequences), fractions, seed)
    stats = dict(users=len(sequences), events=int(len(codes)), min_events=min_events)
    return SequenceDataset(
        name=name, vocab=vocab, train=[sequences[i] for i in train],
        valid=[sequences[i] for i in valid], test=[sequences[i] for i in test],
        description=description, stats=stats,
    )
