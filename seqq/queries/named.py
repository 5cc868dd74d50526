"""Named token sets: `@sentence_end` and `@text_end` in the query language.

A language model's sentence can end with many tokens ('.', ' .', '."', '?)', '.\\n' …), so
`tau(".")` misses most ends; these names stand for every token of the vocabulary that does the
job, found from each token's text (decoded by the tokenizer where the model has one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from seqq.errors import QueryError

# A token ends a sentence when its text, stripped of white space, is sentence-final punctuation
# (one or more of . ! ?) optionally followed by closing quotes or brackets: '.', ' .', '?"', '.)'.
SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*")
# Tokens that end a text: a tokenizer's end-of-sequence token, and the usual spellings of one
TEXT_END = re.compile(r"<\|?(endoftext|end_of_text|im_end|eot_id|eos)\|?>|</s>|<EOS>", re.I)


def token_texts(vocab: Sequence[str], tokenizer: Any = None) -> list[str]:
    """Each token's text: what the tokenizer decodes it to, else the vocabulary's entry."""
    if tokenizer is None:
        return list(vocab)
    return [tokenizer.convert_tokens_to_string([t]) for t in vocab]


def sentence_end_tokens(texts: Sequence[str]) -> list[int]:
    """Ids of the tokens that end a sentence (`SENTENCE_END`), from each token's text."""
    return [i for i, text in enumerate(texts) if SENTENCE_END.fullmatch(text.strip())]


def text_end_tokens(texts: Sequence[str]) -> list[int]:
    """Ids of the tokens that end a text (`TEXT_END`)."""
    return [i for i, text in enumerate(texts) if TEXT_END.fullmatch(text.strip())]


NAMED: dict[str, tuple[Callable[[Sequence[str]], list[int]], str]] = {
    "sentence_end": (sentence_end_tokens, "sentence-final punctuation ('.', ' ?', '.\"', …)"),
    "text_end": (text_end_tokens, "an end-of-text token (<|endoftext|>, </s>, <|im_end|>, …)"),
}


def named_tokens(name: str, vocab: Sequence[str] | None, tokenizer: Any = None) -> list[int]:
    """The ids `@name` stands for in this vocabulary."""
    if name not in NAMED:
        known = ", ".join(f"@{n}" for n in NAMED)
        raise QueryError(f"unknown token set @{name}; use one of {known}")
    if vocab is None:
        raise QueryError(f"@{name} needs the model's vocabulary (pass vocab=)")
    find, about = NAMED[name]
    ids = find(token_texts(vocab, tokenizer))
    if not ids:
        raise QueryError(f"@{name} names no token of this vocabulary (it looks for {about})")
    return ids
