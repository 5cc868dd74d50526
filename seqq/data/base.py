"""The dataset record every loader returns, and the preprocessing steps they share.

Splits are made over whole users (event data) or whole contiguous text blocks, never over
overlapping windows, so no held-out window shares an event with a training window
(docs/decisions.md §8).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from seqq.data.symbols import BOS, bos_index
from seqq.errors import DataError, MissingRawData

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
        """Id of `<BOS>` (0 in seqq's own vocabularies, wherever a model's vocabulary puts it
        when the dataset follows one); None for vocabularies without one (GPT-2)."""
        return bos_index(self.vocab)

    @property
    def title(self) -> str:
        """Name for plots and tables; synthetic stand-ins always say so."""
        return f"{self.name} (synthetic)" if self.synthetic else self.name


def model_vocab(path: str | Path, symbols: Iterable[str], name: str) -> list[str]:
    """The vocabulary a model was trained with (a JSON list of symbols, id = position), checked
    to hold `<BOS>` and every symbol of the data: a dataset built on it means the model's ids."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{name}: vocabulary file {path} not found")
    vocab = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(vocab, list) or BOS not in vocab or len(set(vocab)) != len(vocab):
        raise DataError(f"{name}: {path} must be a JSON list of distinct symbols including {BOS}")
    unknown = sorted(set(symbols) - set(vocab))
    if unknown:
        raise DataError(f"{name}: {len(unknown)} symbols of the data (e.g. {unknown[0]!r}) are "
                        f"not in the vocabulary {path}; use the model trained on this data")
    return vocab


def vocab_files(vocab: str | Path | None) -> list[Path]:
    """The model vocabulary file among a loader's raw files, so editing it rebuilds the cache."""
    return [Path(vocab)] if vocab is not None and Path(vocab).is_file() else []


def require(path: Path, what: str, source: str) -> Path:
    """`path` if it exists, else the one-line instruction saying what to put where."""
    if not path.exists():
        raise MissingRawData(f"{what} not found: put it at {path} (download: {source})")
    return path


@contextmanager
def parsing(name: str, *paths: Path) -> Iterator[None]:
    """Any failure to read or parse raw files (binary junk, a truncated archive, the wrong
    columns...) becomes one `DataError` naming the files, instead of a parser's traceback."""
    try:
        yield
    except DataError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, SyntaxError, EOFError, OSError,
            csv.Error) as e:
        detail = (str(e).strip().splitlines() or [""])[0][:200]
        files = " + ".join(str(p) for p in paths)
        raise DataError(f"{name}: cannot parse {files} ({type(e).__name__}: {detail}); replace "
                        "it with the original download") from e


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
                      fractions: Sequence[float], seed: int, description: str,
                      vocab: str | Path | None = None) -> SequenceDataset:
    """Per-user event sequences from a frame with columns user, time, token.

    Events are ordered by time within each user (ties keep file order); users with fewer than
    `min_events` events are dropped before the vocabulary is built, so it holds only kept symbols.
    `vocab`: a model's vocabulary file to take the ids from instead (see `model_vocab`).
    """
    if events.empty:
        raise DataError(f"{name}: the raw file holds no events")
    events = events.sort_values(["user", "time"], kind="mergesort")
    counts = events.groupby("user", sort=False)["token"].transform("size")
    events = events[counts >= min_events]
    if events.empty:
        raise DataError(f"{name}: no user has at least {min_events} events")
    tokens = events["token"].astype(str)
    symbols = set(tokens.unique())
    vocab = (model_vocab(vocab, symbols, name) if vocab is not None
             else [BOS, *natural_sorted(symbols)])
    index = {t: i for i, t in enumerate(vocab)}
    codes = tokens.map(index).to_numpy(dtype=np.int64)
    users = events["user"].to_numpy()
    bounds = np.flatnonzero(users[1:] != users[:-1]) + 1
    sequences = [[index[BOS], *part.tolist()] for part in np.split(codes, bounds)]
    train, valid, test = split_indices(len(sequences), fractions, seed)
    stats = dict(users=len(sequences), events=int(len(codes)), min_events=min_events)
    return SequenceDataset(
        name=name, vocab=vocab, train=[sequences[i] for i in train],
        valid=[sequences[i] for i in valid], test=[sequences[i] for i in test],
        description=description, stats=stats,
    )
