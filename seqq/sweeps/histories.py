"""Query histories: seeded random positions in the test split (paper §5, App. G), or in
sequences sampled from the model itself where the dataset's files are absent.

A history is the prefix of a test sequence before a random position t; the symbols after t are
the observed future the benchmark queries are built from (docs/decisions.md §7: the target of the
horizon-K query is the observed K-th next symbol).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from seqq.data.base import SequenceDataset
from seqq.errors import DataError
from seqq.models.protocol import SequenceModel
from seqq.models.sampling import sample_continuations


@dataclass(frozen=True)
class History:
    """One query history: `tokens` is what the model conditions on, `future` what followed."""

    history_id: int
    sequence: int
    position: int
    tokens: tuple[int, ...]
    future: tuple[int, ...]
    group: str = ""

    @property
    def digest(self) -> str:
        """A hash of the tokens: stored with every row, so a re-run with another N or seed
        never mistakes a different history with the same id for a finished one."""
        return hashlib.sha1(",".join(map(str, self.tokens)).encode()).hexdigest()[:16]


def sample_histories(
    sequences: Sequence[Sequence[int]],
    n: int,
    horizon: int,
    seed: int,
    min_history: int = 1,
    max_history: int | None = None,
    keep_first: bool = True,
) -> list[History]:
    """`n` positions drawn uniformly (without replacement while possible) over all test positions
    with at least `min_history` symbols before and `horizon` observed symbols after.

    `max_history` keeps only the most recent symbols; `keep_first` then keeps the sequence's
    first symbol too (the `<BOS>` the models were trained to start from).
    """
    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    slots = np.maximum(lengths - horizon - min_history + 1, 0)
    total = int(slots.sum())
    if total == 0:
        raise ValueError(
            f"no test sequence is long enough for a history of {min_history} symbols plus a "
            f"horizon of {horizon}; lower sweep.k_max or choose another dataset"
        )
    rng = np.random.default_rng(seed)
    flat = rng.choice(total, size=n, replace=n > total)
    ends = np.cumsum(slots)
    histories = []
    for hid, index in enumerate(flat.tolist()):
        seq = int(np.searchsorted(ends, index, side="right"))
        t = min_history + index - (int(ends[seq - 1]) if seq else 0)
        histories.append(_cut(hid, seq, sequences[seq], t, horizon, max_history, keep_first))
    return histories


def _cut(hid: int, seq: int, sequence: Sequence[int], t: int, horizon: int,
         max_history: int | None, keep_first: bool) -> History:
    """The history before position t (its most recent `max_history` symbols, and the first one
    when `keep_first`) and the `horizon` symbols after it."""
    tokens = [int(x) for x in sequence[:t]]
    if max_history is not None and len(tokens) > max_history:
        tail = tokens[len(tokens) - max_history + int(keep_first):]
        tokens = (tokens[:1] if keep_first else []) + tail
    return History(hid, seq, t, tuple(tokens), tuple(int(x) for x in sequence[t:t + horizon]))


@torch.inference_mode()
def model_histories(
    model: SequenceModel,
    n: int,
    horizon: int,
    seed: int,
    bos: int | None,
    min_history: int = 1,
    max_length: int = 100,
    max_history: int | None = None,
) -> list[History]:
    """`n` histories drawn from the model by ancestral sampling from `<BOS>` (from the empty
    history when the vocabulary has none), all rows stepped together, seeded: each is cut at a
    uniform length in [min_history, max_length] and followed by `horizon` sampled symbols."""
    first = int(bos is not None)
    if max_length < max(min_history, first):
        raise DataError(f"sampled histories need max_length >= min_history, got {max_length}")
    lengths = np.random.default_rng(seed).integers(max(min_history, first), max_length + 1, n)
    steps = int(lengths.max()) + horizon - first
    start = [[bos] if first else [] for _ in range(n)]
    drawn = sample_continuations(model, start, steps, torch.Generator().manual_seed(seed))
    sequences = torch.cat([torch.tensor(start, dtype=torch.long).reshape(n, first), drawn],
                          1).tolist()
    return [_cut(i, i, sequences[i], int(t), horizon, max_history, first == 1)
            for i, t in enumerate(lengths)]


def sampled_dataset(name: str, model: SequenceModel) -> SequenceDataset:
    """A dataset record without data files, for histories sampled from a model of it: the
    model's own vocabulary names the symbols."""
    vocab = getattr(model, "vocab", None)
    if vocab is None:
        raise DataError(f"{name}: its data files are absent and the model exposes no `vocab`; "
                        f"put the raw files under data/{name}/ or use a model that names its "
                        "symbols (sweep.histories_from=model)")
    return SequenceDataset(name=name, vocab=list(vocab), train=[], valid=[], test=[],
                           description="no data files: histories sampled from the model")


def shard(histories: Sequence[History], index: int, count: int) -> list[History]:
    """The histories of shard `index` of `count` (round robin, so shards stay balanced)."""
    if not 0 <= index < count:
        raise ValueError(f"shard index {index} must lie in 0..{count - 1}")
    return [h for h in histories if h.history_id % count == index]


def mixture_histories(
    vocab_size: int,
    focus: Sequence[int],
    shares: Sequence[float],
    per_share: int,
    length: int,
    seed: int,
    exclude: Sequence[int] = (),
    bos: int | None = 0,
) -> list[History]:
    """Synthetic histories in which a fraction `share` of the symbols come from `focus` and the
    rest from the other symbols (minus `exclude`), for case studies like Fig. 15 ("how does the
    share of social-media apps in a history change p(social media before communication)?")."""
    rng = np.random.default_rng(seed)
    banned = set(focus) | set(exclude) | ({bos} if bos is not None else set())
    others = np.array([v for v in range(vocab_size) if v not in banned])
    focus = np.array(sorted(focus))
    histories = []
    for share in shares:
        for _ in range(per_share):
            pick = rng.random(length) < share
            body = np.where(pick, rng.choice(focus, length), rng.choice(others, length))
            tokens = ([bos] if bos is not None else []) + body.tolist()
            histories.append(History(len(histories), -1, len(tokens), tuple(tokens), (),
                                     f"share={share:g}"))
    return histories
