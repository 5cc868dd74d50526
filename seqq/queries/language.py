"""The query language: one line of text for any query, shared by `seqq ask`, sweeps and Python.

    seqq.parse('tau("e") = 5', vocab)                       # Q3, p(τ(e) = 5)
    seqq.parse('tau({a, b}) < tau(c) within 20', vocab)      # Q4, a or b before c
    seqq.parse('count(a, 10) >= 2 or X3 != b', vocab)
    seqq.parse('choice(" Paris", " Lyon")', tokenizer=tok)   # text, for tokenised LMs

Grammar and examples: docs/query-language.md. The language is tiny, so a hand-written lexer and
recursive-descent parser read it. Parsing yields a builder (a closure over what was written)
rather than a query, so a template's syntax can be checked before any vocabulary is at hand
(`check_syntax`); building maps every construct onto one constructor of `seqq.queries` and the
`|`, `&`, `~` of `Query`. Every mistake is a `QueryError` that shows the expression with a caret
under the offending column.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from seqq.errors import QueryError, did_you_mean
from seqq.queries.constructors import (
    COUNT_OPS,
    a_before_b,
    count,
    event_at,
    hitting_time,
    occurs_within,
)
from seqq.queries.domains import Domain, Vocabulary
from seqq.queries.named import NAMED, named_tokens
from seqq.queries.query import Query, intersection, union
from seqq.queries.text import appears_within, choice, text_matches

OPERATORS = ("!=", "<=", ">=", "=", "<", ">", "(", ")", "{", "}", ",", "~")
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_WRITTEN = {c: "\\" + code for code, c in ESCAPES.items() if c != "'"}  # how quote() escapes
FUNCTIONS = ("tau", "count", "choice", "contains")
TEXT_MODES = ("full", "prefix", "contains")
POSITION = re.compile(r"X([0-9]+)")
EXAMPLES = "tau(a) = 3, count(a, 10) >= 2, X3 in {a, b}, text ~ /re/ within 8, choice(\"s\")"


@dataclass(frozen=True)
class Token:
    kind: str  # number | string | regex | word | op | end
    text: str  # as written
    value: Any  # int (number), the decoded text (string, regex), else `text`
    column: int  # 0-based


@dataclass(frozen=True)
class SymbolSet:
    """A set as written: its symbols (number, string or word tokens), maybe complemented."""

    items: tuple[Token, ...]
    negated: bool
    column: int


Build = Callable[["Context"], Query]


def parse(expr: str, vocab: Vocabulary | None = None, tokenizer: Any = None) -> Query:
    """The query an expression describes (grammar: docs/query-language.md).

    Tokens (quoted, or bare words) are looked up in `vocab` (a list of token strings or a
    mapping token → id); integers are ids. `tokenizer` (a HuggingFace tokenizer) enables text
    queries and lets a quoted token be the text it decodes to (" " for GPT-2's "Ġ").
    """
    return _Parser(expr).parse()(Context(expr, vocab, tokenizer))


def check_syntax(expr: str) -> None:
    """Raise a `QueryError` if `expr` is not a well-formed query (symbols are not looked up)."""
    _Parser(expr).parse()


def quote(token: str) -> str:
    """`token` as a double-quoted string of the language (reading it back gives `token`)."""
    out = []
    for c in token:
        code = ord(c)
        if c in _WRITTEN:
            out.append(_WRITTEN[c])
        elif c.isprintable():
            out.append(c)
        else:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000
                       else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def located(expr: str, column: int, message: str) -> QueryError:
    """A `QueryError` that shows `expr` with a caret under `column` (0-based)."""
    shown = expr.replace("\n", " ").replace("\t", " ").replace("\r", " ")
    error = QueryError(f"{message} at column {column + 1}:\n  {shown}\n  {' ' * column}^")
    error.column = column
    return error


# ---------------------------------------------------------------------------------------- lexer


def _lex(expr: str) -> list[Token]:
    tokens, i = [], 0
    while i < len(expr):
        c = expr[i]
        if c.isspace():
            i += 1
        elif c in "\"'":
            tokens.append(_quoted(expr, i))
            i += len(tokens[-1].text)
        elif c == "/":
            tokens.append(_regex(expr, i))
            i += len(tokens[-1].text)
        elif c in "0123456789" or (c == "-" and expr[i + 1:i + 2].isdigit()):
            text = re.compile(r"-?[0-9][\w.]*").match(expr, i).group()
            if re.fullmatch(r"-[0-9]+", text):
                raise located(expr, i, f"negative number {text}: horizons, counts and ids are "
                                       "whole numbers ≥ 0 (a horizon ≥ 1)")
            if not re.fullmatch(r"[0-9]+", text):
                raise located(expr, i, f"bad number {text!r}: expected a whole number such as 5")
            tokens.append(Token("number", text, int(text), i))
            i += len(text)
        elif c.isalpha() or c == "_":
            text = re.compile(r"\w+").match(expr, i).group()
            tokens.append(Token("word", text, text, i))
            i += len(text)
        elif c == "@" and re.compile(r"@\w+").match(expr, i):
            text = re.compile(r"@\w+").match(expr, i).group()
            if text[1:] not in NAMED:
                raise located(expr, i, f"unknown token set {text}; "
                                       + did_you_mean(text[1:], list(NAMED)).replace(
                                           "mean ", "mean @")
                                       + f"use one of {', '.join('@' + n for n in NAMED)}")
            tokens.append(Token("named", text, text[1:], i))
            i += len(text)
        else:
            op = next((o for o in OPERATORS if expr.startswith(o, i)), None)
            if op is None:
                raise located(expr, i, f"unexpected character {c!r}")
            tokens.append(Token("op", op, op, i))
            i += len(op)
    return [*tokens, Token("end", "", None, len(expr))]


def _quoted(expr: str, start: int) -> Token:
    """A string in single or double quotes with backslash escapes (\\n, \\t, \\", \\x41, ...)."""
    quote_char, i, out = expr[start], start + 1, []
    while i < len(expr) and expr[i] != quote_char:
        if expr[i] != "\\":
            out.append(expr[i])
            i += 1
            continue
        code = expr[i + 1:i + 2]
        if code in ESCAPES:
            out.append(ESCAPES[code])
            i += 2
        elif code in HEX_ESCAPES:
            digits = expr[i + 2:i + 2 + HEX_ESCAPES[code]]
            if not re.fullmatch(r"[0-9a-fA-F]+", digits) or len(digits) < HEX_ESCAPES[code]:
                raise located(expr, i, f"bad escape \\{code}{digits}: expected "
                                       f"{HEX_ESCAPES[code]} hex digits")
            out.append(chr(int(digits, 16)))
            i += 2 + len(digits)
        else:
            raise located(expr, i, f"unknown escape \\{code} in a string; use \\n, \\t, \\r, \\0, "
                                   "\\\\, \\\", \\' or \\xNN")
    if i >= len(expr):
        raise located(expr, start, f"unterminated string: close it with {quote_char}")
    return Token("string", expr[start:i + 1], "".join(out), start)


def _regex(expr: str, start: int) -> Token:
    """A regular expression between slashes; `\\/` is a slash inside it, other escapes are the
    regex's own."""
    i, out = start + 1, []
    while i < len(expr) and expr[i] != "/":
        if expr.startswith("\\/", i):
            out.append("/")
            i += 2
        else:
            step = 2 if expr[i] == "\\" else 1
            out.append(expr[i:i + step])
            i += step
    if i >= len(expr):
        raise located(expr, start, "unterminated regex: close it with / (write a slash inside "
                                   "it as \\/)")
    return Token("regex", expr[start:i + 1], "".join(out), start)


def _describe(token: Token) -> str:
    return "the end of the expression" if token.kind == "end" else repr(token.text)


# --------------------------------------------------------------------------------------- parser


class _Parser:
    """Recursive descent: or < and < not < conditions (docs/query-language.md has the EBNF)."""

    def __init__(self, expr: str):
        if not isinstance(expr, str):
            raise QueryError(f"a query is a string such as 'tau(a) = 3', got {expr!r:.60}")
        self.expr = expr
        self.tokens = _lex(expr)
        self.i = 0

    def parse(self) -> Build:
        if self.peek().kind == "end":
            raise self.error(self.peek(), f"empty query; write a condition such as {EXAMPLES}")
        build = self.disjunction()
        token = self.peek()
        if token.text == ")" and token.kind == "op":
            raise self.error(token, "unbalanced parenthesis: this ')' has no matching '('")
        if token.kind != "end":
            raise self.error(token, f"unexpected {_describe(token)}; join conditions with 'and' "
                                    "or 'or'")
        return build

    # tokens
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.peek()
        self.i += 1
        return token

    def at(self, text: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind in ("op", "word") and token.text == text

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str, after: str) -> Token:
        if not self.at(text):
            raise self.error(self.peek(), f"expected '{text}' {after} but found "
                                          f"{_describe(self.peek())}")
        return self.advance()

    def error(self, token: Token, message: str) -> QueryError:
        return located(self.expr, token.column, message)

    # boolean structure
    def disjunction(self) -> Build:
        parts = [self.conjunction()]
        while self.accept("or"):
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else lambda ctx: union(*(p(ctx) for p in parts))

    def conjunction(self) -> Build:
        parts = [self.negation()]
        while self.accept("and"):
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else lambda ctx: intersection(*(p(ctx) for p in parts))

    def negation(self) -> Build:
        if self.accept("not"):
            inner = self.negation()
            return lambda ctx: ~inner(ctx)
        return self.condition()

    def condition(self) -> Build:
        token = self.peek()
        if self.at("("):
            self.advance()
            inner = self.disjunction()
            if not self.accept(")"):
                if self.peek().kind == "end":
                    raise self.error(token, "unbalanced parenthesis: this '(' is never closed")
                raise self.error(self.peek(), f"expected ')' to close the '(' at column "
                                              f"{token.column + 1} but found "
                                              f"{_describe(self.peek())}")
            return inner
        if token.kind == "word":
            if token.text in FUNCTIONS and self.at("(", 1):
                return getattr(self, token.text)()
            if POSITION.fullmatch(token.text):
                return self.position()
            if token.text == "text":
                return self.text()
            if self.at("(", 1):
                raise self.error(token, f"unknown function {token.text}(); "
                                        + did_you_mean(token.text, FUNCTIONS)
                                        + f"use one of {', '.join(FUNCTIONS)}")
        raise self.error(token, f"expected a condition such as {EXAMPLES} but found "
                                f"{_describe(token)}")

    # numbers, symbols, sets
    def number(self, what: str, minimum: int) -> Token:
        token = self.peek()
        if token.kind != "number":
            raise self.error(token, f"expected {what} (a whole number) but found "
                                    f"{_describe(token)}")
        if token.value < minimum:
            raise self.error(token, f"{what} must be at least {minimum}, got {token.value}")
        return self.advance()

    def within(self, after: str, example: str) -> Token:
        if not self.at("within"):
            raise self.error(self.peek(), f"missing 'within K' after {after}: say how many "
                                          f"steps ahead to look, e.g. {example}")
        self.advance()
        return self.number("the horizon K after 'within'", 1)

    def symbol(self) -> Token:
        token = self.peek()
        if (token.kind in ("number", "string", "named")
                or (token.kind == "word" and token.text != "not")):
            return self.advance()
        raise self.error(token, "expected a symbol (an id such as 3 or a token such as \"e\") "
                                f"but found {_describe(token)}")

    def symbol_set(self) -> SymbolSet:
        """`a`, `{a, b, "c"}`, or `not` followed by one of those (its complement)."""
        token = self.peek()
        if self.accept("not"):
            inner = self.symbol_set()
            return replace(inner, negated=not inner.negated, column=token.column)
        if not self.accept("{"):
            return SymbolSet((self.symbol(),), False, token.column)
        if self.at("}"):
            raise self.error(token, "empty set {}: give at least one symbol")
        items = [self.symbol()]
        while not self.accept("}"):
            if not self.accept(","):
                end = self.peek()
                problem = ("is never closed" if end.kind == "end"
                           else f"expects ',' or '}}' but found {_describe(end)}")
                raise self.error(end if end.kind != "end" else token, f"the set {{...}} {problem}")
            items.append(self.symbol())
        return SymbolSet(tuple(items), False, token.column)

    def comparison(self, allowed: tuple[str, ...], after: str) -> Token:
        token = self.peek()
        if token.kind != "op" or token.text not in allowed:
            raise self.error(token, f"expected a comparison ({' '.join(allowed)}) after {after} "
                                    f"but found {_describe(token)}")
        return self.advance()

    # conditions
    def tau(self) -> Build:
        start = self.advance()
        self.expect("(", "after tau")
        a = self.symbol_set()
        self.expect(")", "to close tau(")
        op = self.comparison(("=", "!=", "<=", "<", ">=", ">"), "tau(...)")
        if self.at("tau"):
            if op.text not in ("<", ">"):
                raise self.error(op, "compare two hitting times with < or >, e.g. "
                                     "tau(a) < tau(b) within 20")
            self.advance()
            self.expect("(", "after tau")
            b = self.symbol_set()
            self.expect(")", "to close tau(")
            K = self.within("tau(A) < tau(B)", "tau(a) < tau(b) within 20").value
            first, second = (a, b) if op.text == "<" else (b, a)
            return self.built(start, lambda ctx: a_before_b(ctx.domain(first), ctx.domain(second),
                                                             K))
        K = self.number("the horizon K", 1)
        if op.text in ("<", ">=") and K.value == 1:
            never = "never holds" if op.text == "<" else "always holds"
            raise self.error(K, f"tau(...) {op.text} 1 {never}: the first symbol is step 1")
        k = K.value
        make = {"=": lambda A: hitting_time(A, k),
                "!=": lambda A: ~hitting_time(A, k),
                "<=": lambda A: occurs_within(A, k),
                "<": lambda A: occurs_within(A, k - 1),
                ">": lambda A: ~occurs_within(A, k),
                ">=": lambda A: ~occurs_within(A, k - 1)}[op.text]
        return self.built(start, lambda ctx: make(ctx.domain(a)))

    def count(self) -> Build:
        self.advance()
        self.expect("(", "after count")
        a = self.symbol_set()
        self.expect(",", "between count's symbols and its horizon, as in count(a, 10)")
        K = self.number("count's horizon K", 1).value
        self.expect(")", "to close count(")
        op = self.comparison(COUNT_OPS, "count(...)").text
        n = self.number("the count to compare with", 0)
        return self.built(n, lambda ctx: count(ctx.domain(a), n.value, K, op=op))

    def position(self) -> Build:
        start = self.advance()
        k = int(POSITION.fullmatch(start.text).group(1))
        if k < 1:
            raise self.error(start, "positions start at X1 (the next symbol)")
        if self.at("=") or self.at("!="):
            negated = self.advance().text == "!="
        elif self.accept("in"):
            negated = False
        elif self.accept("not"):
            self.expect("in", f"after {start.text} not")
            negated = True
        else:
            raise self.error(self.peek(), f"expected 'in', 'not in', '=' or '!=' after "
                                          f"{start.text} but found {_describe(self.peek())}")
        a = self.symbol_set()
        a = replace(a, negated=a.negated != negated)
        return self.built(start, lambda ctx: event_at(ctx.domain(a), k))

    def strings(self, function: str) -> list[Token]:
        opening = self.expect("(", f"after {function}")
        if self.at(")"):
            raise self.error(opening, f"{function}() needs at least one quoted string")
        items = []
        while True:
            token = self.peek()
            if token.kind != "string":
                raise self.error(token, f"{function}(...) takes quoted strings, e.g. "
                                        f"{function}(\" Paris\"), but found {_describe(token)}")
            items.append(self.advance())
            if self.accept(")"):
                return items
            self.expect(",", f"between the strings of {function}(...)")

    def choice(self) -> Build:
        start = self.advance()
        strings = [t.value for t in self.strings("choice")]
        K = self.within("choice(...)", "").value if self.at("within") else None  # optional
        return self.built(start, lambda ctx: choice(strings, ctx.text_tokenizer(start), K=K))

    def contains(self) -> Build:
        start = self.advance()
        strings = self.strings("contains")
        if len(strings) > 1:
            raise self.error(strings[1], "contains(...) takes one string")
        K = self.within(f"contains({strings[0].text})", f"contains({strings[0].text}) within 10")
        s = strings[0].value
        return self.built(start, lambda ctx: appears_within(s, K.value,
                                                            ctx.text_tokenizer(start)))

    def text(self) -> Build:
        start = self.advance()
        self.expect("~", "after text (text ~ /regex/ within K)")
        pattern = self.peek()
        if pattern.kind != "regex":
            raise self.error(pattern, f"expected a regex between slashes, as in text ~ /yes|no/ "
                                      f"within 5, but found {_describe(pattern)}")
        self.advance()
        K = self.within(f"text ~ {pattern.text}", f"text ~ {pattern.text} within 10").value
        mode = "full"
        if self.peek().kind == "word" and self.peek().text in TEXT_MODES:
            mode = self.advance().text
        return self.built(start, lambda ctx: text_matches(pattern.value, K,
                                                          ctx.text_tokenizer(start), mode=mode))

    def built(self, token: Token, build: Build) -> Build:
        """`build`, with a plain `QueryError` it raises (a constructor's) located at `token`."""

        def locate(ctx: Context) -> Query:
            try:
                return build(ctx)
            except QueryError as error:
                if getattr(error, "column", None) is not None:
                    raise
                raise located(self.expr, token.column, str(error).rstrip(".")) from error

        return locate


# -------------------------------------------------------------------------------------- symbols


@dataclass
class Context:
    """What symbols are resolved against: the vocabulary and, for tokenised LMs, the tokenizer."""

    expr: str
    vocab: Vocabulary | None
    tokenizer: Any = None

    @cached_property
    def lookup(self) -> Mapping[str, int] | None:
        if self.vocab is not None:
            return self.vocab if isinstance(self.vocab, Mapping) else {
                t: i for i, t in enumerate(self.vocab)}
        return self.tokenizer.get_vocab() if self.tokenizer is not None else None

    def domain(self, symbols: SymbolSet) -> Domain:
        ids: set[int] = set()
        for t in symbols.items:
            ids.update(self.named(t) if t.kind == "named" else [self.symbol_id(t)])
        domain = Domain(frozenset(ids))
        return ~domain if symbols.negated else domain

    def named(self, token: Token) -> list[int]:
        """The ids a named set (`@sentence_end`, `seqq.queries.named`) stands for here."""
        vocab = (self.vocab if isinstance(self.vocab, Sequence) and not isinstance(self.vocab, str)
                 else None)
        if vocab is None and self.lookup is not None:
            vocab = [""] * (max(self.lookup.values(), default=-1) + 1)
            for text, i in self.lookup.items():
                vocab[int(i)] = text
        try:
            return named_tokens(token.value, vocab, self.tokenizer)
        except QueryError as e:
            raise located(self.expr, token.column, str(e)) from None

    def symbol_id(self, token: Token) -> int:
        if token.kind == "number":
            if self.vocab is not None and token.value >= len(self.vocab):
                raise located(self.expr, token.column, f"symbol id {token.value} is outside the "
                                                       f"vocabulary (ids 0..{len(self.vocab) - 1})")
            return token.value
        text, shown = token.value, quote(token.value)
        if self.lookup is None:
            raise located(self.expr, token.column, f"token {shown} needs the model's vocabulary "
                                                   "(pass vocab=) or an id such as 3")
        if text in self.lookup:
            return int(self.lookup[text])
        if self.tokenizer is not None:
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            if len(ids) == 1 and self.tokenizer.decode(ids) == text:
                return int(ids[0])
            if len(ids) > 1:
                pieces = ", ".join(quote(self.tokenizer.decode([i])) for i in ids)
                raise located(self.expr, token.column,
                              f"{shown} is {len(ids)} tokens of this model ({pieces}), not one "
                              f"symbol; ask about text with contains({shown}) within K or "
                              f"choice({shown})")
        raise located(self.expr, token.column, f"unknown token {shown}")

    def text_tokenizer(self, token: Token) -> Any:
        """The tokenizer a text condition (`token` its first word) reads tokens' text with."""
        if self.tokenizer is None:
            raise located(self.expr, token.column, f"{token.text} queries read text: they need "
                                                   "the model's tokenizer (parse(..., tokenizer="
                                                   "...), or a tokenised LM in seqq ask)")
        return self.tokenizer
