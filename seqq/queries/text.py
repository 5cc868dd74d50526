r"""Text questions for tokenised language models, compiled to automata over token ids.

A question about text ("the next 8 tokens' text matches /\s*(yes|no)/", "the continuation is
' Paris' or ' London'") is a set of token sequences: every tokenisation of every matching text.
outlines-core compiles the regex to a DFA over bytes and walks every token's bytes through it,
which gives a token-level index: per state, the tokens that keep a match possible and the state
each one leads to. That index is an `Automaton` over the model's vocabulary, so the lattice
(backward reachability over K, restricted proposals, exact enumeration) answers text questions
like any other query and sums over tokenisations without listing them.

The text of a token sequence is the UTF-8 decoding of its tokens' bytes, up to the end of the
match; a sequence whose bytes are not valid UTF-8 there does not match. Special tokens (EOS, chat
markers) write no text and never take part in a match. Regexes use the syntax of Rust's `regex`
crate (close to Python's `re`), without look-around; a match is anchored at the start of the
continuation.
"""

from __future__ import annotations

import json
import re
import weakref
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import outlines_core

from seqq.errors import QueryError
from seqq.queries.automaton import Automaton, absorbing
from seqq.queries.domains import Domain, check_horizon
from seqq.queries.query import Query

MODES = ("full", "prefix", "contains")
_ANY_TEXT = "(?s:.)*"
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def text_matches(pattern: str, K: int, tokenizer, mode: str = "full") -> Query:
    """The text of the next K tokens matches the regex `pattern`.

    mode "full": the text of all K tokens matches as a whole. "prefix": the text of the first
    k ≤ K tokens matches for some k (what follows is free). "contains": a match occurs somewhere
    in the text of the first K tokens.
    """
    check_horizon(K)
    if mode not in MODES:
        raise QueryError(f"text match mode {mode!r} is not one of {', '.join(MODES)}")
    if not isinstance(pattern, str) or not pattern:
        raise QueryError(f"the regex must be a non-empty string, got {pattern!r}")
    what = f"regex {pattern!r}"
    _check_syntax(pattern, what)
    if mode == "contains":  # the match may start and end anywhere, also inside a token
        pattern = f"{_ANY_TEXT}(?:{pattern}){_ANY_TEXT}"
    a = _token_automaton(pattern, tokenizer, what)
    if mode != "full":
        a = absorbing(a)
    _check_can_accept(a, K, what, exactly=mode == "full")
    return Query(a, K, "text_matches")


def choice(strings: Sequence[str], tokenizer, K: int | None = None) -> Query:
    """The continuation begins with one of `strings`, ending on a token boundary; every
    tokenisation of each string counts (paths are counted once). K defaults to the most tokens
    any of the strings can take, which makes the probability exact."""
    if isinstance(strings, str) or not isinstance(strings, Sequence):
        raise QueryError(f"choice takes a list of strings, got {strings!r}; write choice([s], ...)")
    if not strings:
        raise QueryError("choice needs at least one string; pass e.g. [' Paris', ' London']")
    for i, s in enumerate(strings):
        if not isinstance(s, str) or not s:
            raise QueryError(f"choice string {i + 1} is {s!r}; every choice must be a non-empty "
                             "string")
    what = f"choice {list(strings)!r}"
    a = _token_automaton("|".join(_literal(s) for s in strings), tokenizer, what)
    if K is None:
        K = _longest_accepted(a)
    check_horizon(K)
    a = absorbing(a)
    _check_can_accept(a, K, what, exactly=False)
    return Query(a, K, "choice")


def appears_within(s: str, K: int, tokenizer) -> Query:
    """The literal string `s` occurs in the text of the next K tokens."""
    if not isinstance(s, str) or not s:
        raise QueryError(f"appears_within needs a non-empty string, got {s!r}")
    check_horizon(K)
    what = f"string {s!r}"
    a = absorbing(_token_automaton(f"{_ANY_TEXT}{_literal(s)}{_ANY_TEXT}", tokenizer, what))
    _check_can_accept(a, K, what, exactly=False)
    return Query(a, K, "appears_within")


def _literal(s: str) -> str:
    """`s` as a regex matching exactly it: every non-alphanumeric character as \\x{..}."""
    return "".join(c if c.isalnum() else f"\\x{{{ord(c):x}}}" for c in s)


# --- tokens and their bytes ---------------------------------------------------------------------

@dataclass(frozen=True)
class TokenTexts:
    """What each ordinary token writes, in the form outlines-core indexes."""

    vocabulary: outlines_core.Vocabulary  # token bytes -> ids (no special or empty tokens), MARK
    end: int  # ids from here on are no token's: outlines-core's end of text and MARK
    spaced: frozenset[int]  # ordinary tokens whose text starts with whitespace (" Paris", "\n")


# A character no token writes, appended to every regex: outlines-core 0.2.14 drops tokens that
# run one byte past a complete match (regex-automata reports matches one byte late) and keeps
# only the first alternative that matches (leftmost-first: "a|ab" never reads "ab"). Behind MARK
# no match completes inside the text, so no token is dropped; a state where reading MARK ends
# a match is one where the text so far matches.
MARK = "\U0010ffff"
_MARK_REGEX = "\\x{10ffff}"

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def token_texts(tokenizer) -> TokenTexts:
    """The bytes of every ordinary token of a HF tokenizer (cached per tokenizer)."""
    if tokenizer in _CACHE:
        return _CACHE[tokenizer]
    texts = _token_bytes(tokenizer)
    by_text: dict[bytes, list[int]] = defaultdict(list)
    for i, b in texts.items():
        if MARK.encode() in b:
            raise QueryError(f"token {i} writes U+10FFFF, which text queries reserve")
        by_text[b].append(i)
    end = max(tokenizer.get_vocab().values()) + 1
    by_text[MARK.encode()] = [end + 1]
    spaced = frozenset(i for i, b in texts.items() if b[:1].isspace())
    out = TokenTexts(outlines_core.Vocabulary(end, dict(by_text)), end, spaced)
    _CACHE[tokenizer] = out
    return out


def whitespace_tokens(tokenizer) -> frozenset[int]:
    """Ids of the ordinary tokens whose text starts with whitespace. BPE tokenizers glue a word
    to the space before it (" Paris", " 1"), so after most text the likely next tokens are
    these, and a pattern that cannot start with whitespace asks for an unlikely spelling."""
    return token_texts(tokenizer).spaced


def _token_bytes(tokenizer) -> dict[int, bytes]:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise QueryError(f"text queries need a fast (tokenizers-backed) HF tokenizer, got "
                         f"{type(tokenizer).__name__}; load it with AutoTokenizer.from_pretrained")
    spell = _speller(json.loads(backend.decoder.__getstate__()) if backend.decoder else {})
    added = tokenizer.added_tokens_decoder  # id -> AddedToken: literal text, not byte-encoded
    special = set(tokenizer.all_special_ids) | {i for i, t in added.items() if t.special}
    texts = {}
    for token, i in tokenizer.get_vocab().items():
        if i in special:
            continue
        b = added[i].content.encode() if i in added else spell(token)
        if b:
            texts[i] = b
    return texts


def _speller(decoder: dict) -> Callable[[str], bytes]:
    """How a token string becomes bytes, read from the tokenizer's decoder: byte-level BPE
    (GPT-2, SmolLM2, Llama 3: one character per byte) or SentencePiece (▁ for a space, <0xNN>
    byte-fallback tokens)."""
    parts = decoder.get("decoders", [decoder]) if decoder.get("type") == "Sequence" else [decoder]
    kinds = {p.get("type") for p in parts}
    if "ByteLevel" in kinds:
        from transformers.convert_slow_tokenizer import bytes_to_unicode

        byte_of = {c: b for b, c in bytes_to_unicode().items()}

        def byte_level(token: str) -> bytes:
            try:
                return bytes(byte_of[c] for c in token)
            except KeyError as e:
                raise QueryError(f"token {token!r} is not byte-level encoded; the tokenizer's "
                                 "vocabulary does not match its ByteLevel decoder") from e
        return byte_level
    spaces = [p.get("replacement") or p.get("pattern", {}).get("String") for p in parts
              if p.get("type") in ("Metaspace", "Replace")]
    if spaces and spaces[0]:
        space, fallback = spaces[0], "ByteFallback" in kinds

        def sentencepiece(token: str) -> bytes:
            m = _BYTE_TOKEN.fullmatch(token) if fallback else None
            return bytes([int(m.group(1), 16)]) if m else token.replace(space, " ").encode()
        return sentencepiece
    raise QueryError(f"text queries support byte-level BPE and SentencePiece tokenizers; this "
                     f"one's decoder is {decoder.get('type')!r}")


# --- regex -> token automaton -------------------------------------------------------------------

_BYTES = outlines_core.Vocabulary(256, {bytes([b]): [b] for b in range(256)})


def _check_syntax(pattern: str, what: str) -> None:
    """Refuse a bad regex before it is embedded in a larger one: indexed over single bytes,
    only syntax and unsupported features (anchors, look-around) can fail."""
    try:
        outlines_core.Index(f"(?:{pattern}){_MARK_REGEX}", _BYTES)
    except ValueError as e:
        raise QueryError(f"{what} is invalid or unsupported ({_one_line(e)}); use Rust regex "
                         "syntax without anchors (^, $) or look-around") from None


def _token_automaton(pattern: str, tokenizer, what: str) -> Automaton:
    """outlines-core's token index of `pattern` (followed by MARK) as an Automaton: states
    renumbered from the start, edges grouped by target state, accepting where MARK may follow."""
    texts = token_texts(tokenizer)
    try:
        index = outlines_core.Index(f"(?:{pattern}){_MARK_REGEX}", texts.vocabulary)
    except ValueError as e:
        raise QueryError(f"{what} needs text this tokenizer's tokens cannot write "
                         f"({_one_line(e)}); change the pattern") from None
    transitions, finals = index.get_transitions(), set(index.get_final_states())
    number = {index.get_initial_state(): 0}
    order, edges, accepting = list(number), [], set()
    for state in order:  # grows while we walk it (breadth-first)
        by_target: dict[int, list[int]] = defaultdict(list)
        for token, target in transitions.get(state, {}).items():
            if token < texts.end:
                by_target[target].append(token)
            elif token > texts.end and target in finals:  # MARK ends a match here
                accepting.add(number[state])
        for target in by_target:
            if target not in number:
                number[target] = len(order)
                order.append(target)
        edges.append(tuple((Domain(frozenset(tokens)), number[target])
                           for target, tokens in by_target.items()))
    return Automaton(tuple(edges), frozenset(accepting))


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


# --- horizons -----------------------------------------------------------------------------------

def _step(a: Automaton, states: set[int]) -> set[int]:
    return {t for s in states for _, t in a.edges[s]}


def _check_can_accept(a: Automaton, K: int, what: str, exactly: bool) -> None:
    """Refuse a query that holds no path: no accepting state K tokens from the start."""
    states = {a.start}
    for _ in range(K):
        states = _step(a, states)
    if states & a.accepting:
        return
    shortest = _shortest_accepted(a)
    if shortest is None:
        fix = "its text cannot be written with this tokenizer's tokens; change the pattern"
    elif exactly:
        fix = f"the shortest match takes {shortest}; change K or use mode='prefix'"
    else:
        fix = f"the shortest match takes {shortest}; raise K to at least {shortest}"
    raise QueryError(f"{what} matches no text of {'exactly' if exactly else 'at most'} {K} "
                     f"tokens; {fix}")


def _shortest_accepted(a: Automaton) -> int | None:
    """The fewest tokens of an accepted path (None if no accepting state is reachable)."""
    states, seen = {a.start}, {a.start}
    for k in range(a.num_states):
        if states & a.accepting:
            return k
        states = _step(a, states) - seen
        seen |= states
    return None


def _longest_accepted(a: Automaton) -> int:
    """The most tokens an accepted path of a finite language (an acyclic automaton) takes."""
    states, longest = {a.start}, 0
    for k in range(1, a.num_states + 1):  # no path of an acyclic automaton is longer
        states = _step(a, states)
        if states & a.accepting:
            longest = k
    return longest
