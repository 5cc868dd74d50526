"""The `<BOS>` rule and text histories: where a sequence starts, and text read as a model's ids.

seqq's own vocabularies put `<BOS>` first, and every training sequence starts with it; a
pretrained LM's tokenizer has its own BOS token, or none (GPT-2). `bos_index` is the one place
that says which symbol a vocabulary starts from; datasets, surrogates and `seqq ask` all ask it.
Models are read by what they name (a `tokenizer`, a `vocab`), so nothing here imports them.
"""

from __future__ import annotations

from collections.abc import Sequence

from seqq.errors import QueryError

BOS = "<BOS>"


def bos_index(vocab: Sequence[str] | None) -> int | None:
    """The id of `<BOS>` in `vocab`, None where it names none (GPT-2's, or no vocabulary)."""
    if vocab is None or BOS not in vocab:
        return None
    return list(vocab).index(BOS)


def encode_history(model: object, text: str) -> list[int]:
    """Text → the model's ids: its tokenizer (HF LMs), else its vocabulary, read character by
    character when every symbol is one character (after `<BOS>`, as training sequences start)
    and as whitespace-separated symbols otherwise."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None:
        return list(tokenizer.encode(text, add_special_tokens=False))
    vocab = getattr(model, "vocab", None)
    if vocab is None:
        raise QueryError(f"{type(model).__name__} names no symbols (no tokenizer or vocab), so "
                         "a text history cannot be read for it")
    index = {t: i for i, t in enumerate(vocab)}
    characters = all(len(t) == 1 for t in vocab if t != BOS)
    symbols = list(text) if characters else text.split()
    unknown = next((s for s in symbols if s not in index), None)
    if unknown is not None:
        what = "character" if characters else "symbol"
        raise QueryError(f"the history's {what} {unknown!r} is not in the model's vocabulary of "
                         f"{len(vocab)} symbols")
    bos = bos_index(vocab)
    return ([] if bos is None else [bos]) + [index[s] for s in symbols]


def has_bos(model: object) -> bool:
    """Whether an empty history has a start: a tokenizer's BOS token, or `<BOS>` among the
    symbols of a model that reads its vocabulary (`encode_history` puts it first)."""
    if getattr(model, "tokenizer", None) is not None:
        return getattr(model, "bos_id", None) is not None
    return bos_index(getattr(model, "vocab", None)) is not None
