"""Surrogates for twisting: exact context models (HPYP n-grams) whose future can be summed.

A surrogate steers a proposal by its chance of completing the query (`engine/twist.py`); any
`ContextAutomaton` serves. `fit_surrogate` fits one on data in seconds; `distill_surrogate`
fits one on the model's own samples, so a user without training data gets one too.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
import torch

from seqq.data.symbols import bos_index
from seqq.models import surrogate_cache
from seqq.models.automaton import ContextAutomaton
from seqq.models.hpyp import HPYPModel, indexable
from seqq.models.markov import MarkovModel
from seqq.models.protocol import SequenceModel
from seqq.models.sampling import sample_continuations

DEFAULT_ORDER = 5  # HPYP order of `fit_surrogate`: 4 symbols of context
SURROGATE_TABLE = 2**24  # largest C × V table `fit_surrogate` picks an order for (C counted):
# the twist's backward DP reads the whole table once per lattice node, so this bounds its time
# too, and keeps a 64-query sweep chunk's messages inside the message cache (docs/decisions.md §19)
DISTILL_SYMBOLS = 4_000_000  # symbols `distill_surrogate` samples (4× tiny Shakespeare)
DISTILL_ROWS = 2_000  # sequences it samples side by side (DISTILL_SYMBOLS / rows steps each)


def twistable(vocab_size: int) -> bool:
    """Whether a surrogate over this many symbols can steer at all: a bigram's table fits
    SURROGATE_TABLE; past that (GPT-2's vocabulary) `fit_surrogate` returns an i.i.d. model,
    whose flat twist changes nothing, so distilling one would be calls spent for nothing."""
    return vocab_size * (vocab_size + 1) <= SURROGATE_TABLE


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


def model_symbols(model: SequenceModel) -> tuple[list[str], int | None]:
    """The symbols a surrogate of `model` names (its vocabulary, else the ids as strings) and
    the index of its `<BOS>`, None where it names none: where a distilled surrogate's rows
    start."""
    vocab = list(getattr(model, "vocab", None) or [str(v) for v in range(model.vocab_size)])
    return vocab, bos_index(vocab)


def distill_surrogate(model: SequenceModel, vocab: Sequence[str], bos: int | None,
                      order: int | None = None, symbols: int = DISTILL_SYMBOLS,
                      seed: int = 0, starts: Sequence[Sequence[int]] | None = None,
                      rows: int = DISTILL_ROWS, keep: int | None = DEFAULT_ORDER - 1
                      ) -> ContextAutomaton:
    """The twist's surrogate fitted on `symbols` symbols sampled from the model itself (from
    `<BOS>`, or the empty history without one) instead of on data: counting a model's samples
    estimates the n-gram closest to the *model* in KL, its own habits included, and needs no
    training data (a Hugging Face model's user rarely has it). It costs `symbols` model calls,
    once per model (`info["model_calls"]`); seeded. On the authors' Shakespeare LSTM it cut
    `twisted`'s median RAE at K = 7 and 320 calls from 0.081 (fitted on data) to 0.051
    (docs/decisions.md §19). `starts`: for a model that takes no empty history and names no
    `<BOS>`, its rows continue these histories instead (cycled; their last few symbols are
    counted as context: `keep` of them, all with None); `rows` sequences are sampled side by
    side, symbols / rows steps each."""
    if starts is not None and bos is None:
        begun = [list(starts[i % len(starts)]) for i in range(rows)]
        begun = [b[-keep:] for b in begun] if keep else begun
    else:
        begun = [[bos] if bos is not None else [] for _ in range(rows)]
    steps = -(-symbols // rows)
    drawn = sample_continuations(model, begun, steps, torch.Generator().manual_seed(seed))
    sequences = [start + d for start, d in zip(begun, drawn.tolist(), strict=True)]
    surrogate = fit_surrogate(sequences, vocab, order, skip_first=bos is not None)
    if isinstance(surrogate, HPYPModel):
        surrogate.info.update(distilled_symbols=rows * steps, model_calls=rows * steps)
    return surrogate


# distilled surrogates per model object and settings, kept while the model lives
_DISTILLED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def distilled(model: SequenceModel, vocab: Sequence[str], bos: int | None,
              order: int | None = None, symbols: int | None = None, seed: int = 0,
              starts: Sequence[Sequence[int]] | None = None, source: str | None = None,
              only_cached: bool = False) -> ContextAutomaton | None:
    """`distill_surrogate`, paid once per model and settings: kept while the model object lives
    (a sweep's `surrogate: distilled` methods and its ground truth share one) and in seqq's
    cache under a hash of the model's weights (`seqq.models.surrogate_cache`, `seqq cache`),
    so a later process loads it instead of sampling again; `source` says in the cache's listing
    what it was distilled from (default: the model's class). Its `info["model_calls"]` is what
    it cost when distilled; `info["loaded_from"]` marks one read from the cache, whose calls
    this process did not make. `only_cached`: None rather than sampling, where none is held or
    kept (`seqq ask` uses a surrogate only once distilled). `starts` (for a model without
    `<BOS>`) are not part of the key: a surrogate describes the model, and the one distilled
    from the first histories given serves later ones too."""
    symbols = DISTILL_SYMBOLS if symbols is None else symbols
    settings = (order, symbols, seed, bos)  # not `starts`: the first ones given serve after
    try:
        held = _DISTILLED.setdefault(model, {})
    except TypeError:  # a model that cannot be weakly referenced is distilled every time
        held = {}
    if settings in held:
        return held[settings]
    path = surrogate_cache.entry_path(model, settings)
    surrogate = None if path is None else surrogate_cache.load(path)
    if surrogate is None and only_cached:
        return None
    if surrogate is None:
        surrogate = distill_surrogate(model, vocab, bos, order, symbols, seed, starts)
        if path is not None and isinstance(surrogate, HPYPModel):
            surrogate_cache.keep(surrogate, path, source or type(model).__name__)
    held[settings] = surrogate
    return surrogate


def model_surrogate(model: SequenceModel, starts: Sequence[Sequence[int]] | None = None,
                    source: str | None = None, only_cached: bool = False
                    ) -> ContextAutomaton | None:
    """The surrogate distilled from the model itself with the default settings (`distilled`):
    its rows start from `<BOS>` where the model's vocabulary names one, else continue `starts`
    (else the empty history). None where no surrogate could steer (`twistable`), or, with
    `only_cached`, where none was distilled before."""
    if not twistable(model.vocab_size):
        return None
    vocab, bos = model_symbols(model)
    return distilled(model, vocab, bos, starts=None if bos is not None else starts,
                     source=source, only_cached=only_cached)
