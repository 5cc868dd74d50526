"""The query language (`seqq.parse`): every construct means what the docs say (checked on every
path of a small V^K against a plain-Python predicate), builds the constructor's query where one
exists, and every mistake is a `QueryError` with a caret under the offending column."""

from __future__ import annotations

import math
import operator
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import compose_sweep, tiny_overrides
from oracles import all_paths, brute_force, random_markov

import seqq
from seqq import queries as Q
from seqq.errors import QueryError, SeqqError
from seqq.queries.language import check_syntax, parse, quote
from seqq.reports.tables import load_results
from seqq.sweeps import sweep

V = ["a", "b", "c", "d"]  # ids 0..3
a, b, c, d = range(4)
REPO = Path(__file__).resolve().parents[1]


def tau(path: tuple[int, ...], symbols: set[int]) -> float:
    """1-based step of the first symbol of the set, ∞ if none."""
    return next((i + 1 for i, s in enumerate(path) if s in symbols), math.inf)


def N(path: tuple[int, ...], symbols: set[int], K: int) -> int:
    return sum(s in symbols for s in path[:K])


# expression, horizon, the paths it holds (a predicate on one path), the constructor's query
# where the expression is exactly one constructor
CASES = [
    ("tau(a) = 3", 3, lambda p: tau(p, {a}) == 3, Q.hitting_time(a, 3)),
    ("tau({a, b}) <= 3", 3, lambda p: tau(p, {a, b}) <= 3, Q.occurs_within([a, b], 3)),
    ("tau(c) < 3", 2, lambda p: tau(p, {c}) < 3, Q.occurs_within(c, 2)),
    ("tau(2) > 2", 2, lambda p: tau(p, {c}) > 2, None),
    ('tau("d") >= 3', 2, lambda p: tau(p, {d}) >= 3, None),
    ("tau(a) != 2", 2, lambda p: tau(p, {a}) != 2, None),
    ("tau(not {a, b}) = 2", 2, lambda p: tau(p, {c, d}) == 2,
     Q.hitting_time(~Q.Domain(frozenset({a, b})), 2)),
    ("tau({a, b}) < tau(c) within 3", 3,
     lambda p: tau(p, {a, b}) < tau(p, {c}) and tau(p, {a, b}) <= 3, Q.a_before_b([a, b], c, 3)),
    ("tau(a) > tau(b) within 3", 3, lambda p: tau(p, {b}) < tau(p, {a}) and tau(p, {b}) <= 3,
     Q.a_before_b(b, a, 3)),
    ("X3 in {a, b}", 3, lambda p: p[2] in {a, b}, Q.event_at([a, b], 3)),
    ("X2 = c", 2, lambda p: p[1] == c, Q.event_at(c, 2)),
    ("X2 != c", 2, lambda p: p[1] != c, None),
    ("X2 not in {a, b}", 2, lambda p: p[1] in {c, d}, None),
    ("X2 in not a", 2, lambda p: p[1] != a, None),
    ("X1 = a or X3 = b", 3, lambda p: p[0] == a or p[2] == b, Q.event_at(a, 1) | Q.event_at(b, 3)),
    ("X1 = a and tau(b) = 2", 2, lambda p: p[0] == a and tau(p, {b}) == 2, None),
    ("X1 = a or X2 = b and X1 = c", 2, lambda p: p[0] == a or (p[1] == b and p[0] == c), None),
    ("not X1 = a or X2 = b", 2, lambda p: p[0] != a or p[1] == b, None),
    ("not (X1 = a or X2 = b)", 2, lambda p: not (p[0] == a or p[1] == b), None),
    ("((tau(a) = 1))", 1, lambda p: p[0] == a, Q.hitting_time(a, 1)),
    ('X1 in {0, "b", c}', 1, lambda p: p[0] in {a, b, c}, Q.event_at([a, b, c], 1)),
]
COMPARE = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
           ">": operator.gt, ">=": operator.ge}
CASES += [(f"count(a, 4) {op} 2", 4, lambda p, op=op: COMPARE[op](N(p, {a}, 4), 2),
           Q.count(a, 2, 4, op=op)) for op in Q.COUNT_OPS]
CASES += [("count({a, b}, 3) <= 1 and not tau(d) <= 3", 3,
           lambda p: N(p, {a, b}, 3) <= 1 and d not in p, None)]


@pytest.mark.parametrize("expr, K, holds, constructed", CASES, ids=[c[0] for c in CASES])
def test_every_construct_means_what_it_says(expr, K, holds, constructed):
    query = parse(expr, V)
    assert query.horizon == K
    paths = all_paths(len(V), K)
    expected = torch.tensor([holds(tuple(p)) for p in paths.tolist()])
    assert torch.equal(query.contains(paths, len(V)), expected)
    if constructed is not None:
        assert query == constructed


def test_tokens_may_be_quoted_with_escapes_or_bare_words_and_vocab_may_be_a_mapping():
    vocab = ["e", "\n", " ", '"', "\\", "'", "é", "\x01", "the", "\u2028", "\U0001f600", "\t\r\0"]
    for i, token in enumerate(vocab):
        assert parse(f"X1 = {quote(token)}", vocab) == Q.event_at(i, 1)
    assert parse(r"X1 in {'\n', '\'', '\x20', '\u00e9'}", vocab) == Q.event_at([1, 5, 2, 6], 1)
    assert parse("tau(e) = 5 or X2 = the", vocab) == Q.hitting_time(0, 5) | Q.event_at(8, 2)
    assert parse('X2 = "y"', vocab={"x": 0, "y": 2, "z": 1}) == Q.event_at(2, 2)
    assert parse("tau(3) = 2") == Q.hitting_time(3, 2)  # ids need no vocabulary


@pytest.fixture(scope="module")
def gpt2_tokenizer():
    from seqq.data.tokenizers import gpt2_tokenizer

    return gpt2_tokenizer(REPO / "data")


def test_a_quoted_string_is_the_token_it_decodes_to(gpt2_tokenizer):
    vocab = gpt2_tokenizer.convert_ids_to_tokens(list(range(len(gpt2_tokenizer))))
    space, the = gpt2_tokenizer.convert_tokens_to_ids(["Ġ", "Ġthe"])
    assert parse('tau(" ") <= 5', vocab, gpt2_tokenizer) == Q.occurs_within(space, 5)
    assert parse('X1 = " the"', vocab, gpt2_tokenizer) == Q.event_at(the, 1)
    assert parse('X1 = "Ġthe"', vocab, gpt2_tokenizer) == Q.event_at(the, 1)  # the raw entry
    with pytest.raises(QueryError, match=r'" Paris France" is 2 tokens .* contains\(" Paris '
                                         r'France"\) within K') as error:
        parse('tau(" Paris France") <= 5', vocab, gpt2_tokenizer)
    assert error.value.args[0].endswith("\n      ^")


@pytest.mark.parametrize("expr, built", [
    (r"text ~ / (yes|no)/ within 3", lambda t: Q.text_matches(" (yes|no)", 3, t)),
    (r"text ~ /[0-9]+/ within 2 prefix", lambda t: Q.text_matches("[0-9]+", 2, t, mode="prefix")),
    (r"text ~ /a\/b/ within 4 contains", lambda t: Q.text_matches("a/b", 4, t, mode="contains")),
    (r"text ~ /\d\./ within 2 full", lambda t: Q.text_matches(r"\d\.", 2, t)),
    ('choice(" Paris", " Lyon")', lambda t: Q.choice([" Paris", " Lyon"], t)),
    ("choice(' Paris') within 3", lambda t: Q.choice([" Paris"], t, K=3)),
    ('contains("ab") within 5', lambda t: Q.appears_within("ab", 5, t)),
    ('choice(" Paris") or X1 = " the"',
     lambda t: Q.choice([" Paris"], t) | Q.event_at(t.convert_tokens_to_ids("Ġthe"), 1)),
])
def test_text_constructs_build_the_text_queries(gpt2_tokenizer, expr, built):
    assert parse(expr, tokenizer=gpt2_tokenizer) == built(gpt2_tokenizer)


@pytest.mark.parametrize("expr, message, column", [
    ('choice("")', "every choice must be a non-empty string", 1),
    ("X1 = a or text ~ /(/ within 3", "regex '('", 11),
    ("text ~ /abcdefghijklmnop/ within 1", "within 1", 1),
])
def test_text_errors_point_at_their_condition(gpt2_tokenizer, expr, message, column):
    with pytest.raises(QueryError) as error:
        parse(expr, tokenizer=gpt2_tokenizer)
    assert message in str(error.value)
    assert str(error.value).split("\n")[0].endswith(f" at column {column}:")


# expression, what the message says, the 1-based column the caret points at
ERRORS = [
    ('tau("zz") = 3', 'unknown token "zz"', 5),
    ("tau(zz) = 3", 'unknown token "zz"', 5),
    ("tau(9) = 3", "symbol id 9 is outside the vocabulary (ids 0..3)", 5),
    ("foo(a) = 3", "unknown function foo(); use one of tau, count, choice, contains", 1),
    ("tua(a) = 3", "unknown function tua(); did you mean tau? use one of", 1),
    ("tau(a) < tau(b)", "missing 'within K' after tau(A) < tau(B)", 16),
    ("tau(a) < tau(b) in 5", "missing 'within K'", 17),
    ("text ~ /a+/", "missing 'within K' after text ~ /a+/", 12),
    ('contains("a")', "missing 'within K' after contains(\"a\")", 14),
    ("tau(a) = 3.5", "bad number '3.5'", 10),
    ("tau(a) = -3", "negative number -3: horizons, counts and ids are whole numbers ≥ 0", 10),
    ("count(a, 3x) = 1", "bad number '3x'", 10),
    ("tau(a) = b", "expected the horizon K (a whole number) but found 'b'", 10),
    ("tau(a) = 0", "the horizon K must be at least 1, got 0", 10),
    ("(tau(a) = 3", "unbalanced parenthesis: this '(' is never closed", 1),
    ("tau(a) = 3)", "unbalanced parenthesis: this ')' has no matching '('", 11),
    ("(X1 = a X2 = b)", "expected ')' to close the '(' at column 1 but found 'X2'", 9),
    ("tau(a = 3", "expected ')' to close tau( but found '='", 7),
    ("tau({}) = 2", "empty set {}: give at least one symbol", 5),
    ("tau({a b}) = 2", "the set {...} expects ',' or '}' but found 'b'", 8),
    ("tau({a, b) = 2", "the set {...} expects ',' or '}' but found ')'", 10),
    ("choice()", "choice() needs at least one quoted string", 7),
    ("choice(a)", "choice(...) takes quoted strings", 8),
    ("", "empty query", 1),
    ("tau(a) = 3 X1 = b", "unexpected 'X1'; join conditions with 'and' or 'or'", 12),
    ("tau(a) = tau(b) within 3", "compare two hitting times with < or >", 8),
    ("tau(a) < 1", "tau(...) < 1 never holds", 10),
    ("tau(a) >= 1", "tau(...) >= 1 always holds", 11),
    ("tau(a) ~ 3", "expected a comparison (= != <= < >= >) after tau(...)", 8),
    ("count(a, 3) = 5", "count n must lie in 0..K=3, got 5", 15),
    ("count(a 3) = 1", "expected ',' between count's symbols and its horizon", 9),
    ("X0 = a", "positions start at X1", 1),
    ("X2 is a", "expected 'in', 'not in', '=' or '!=' after X2 but found 'is'", 4),
    ("X2 = ", "expected a symbol", 6),
    ("tau({a}) < tau({a, b}) within 3", "A and B share symbols [0]", 1),
    ("tau(a) = 3 and @", "unexpected character '@'", 16),
    ('tau("a) = 3', "unterminated string", 5),
    (r'tau("\q") = 3', r"unknown escape \q", 6),
    (r'tau("\x4") = 3', r"bad escape \x4", 6),
    ("text ~ /a+ within 3", "unterminated regex", 8),
    ("text = /a/ within 3", "expected '~' after text", 6),
    ("text ~ a within 3", "expected a regex between slashes", 8),
    ('choice("a") and text ~ /a/ within 2', "need the model's tokenizer", 1),
    ('X1 = a and contains("a") within 2', "need the model's tokenizer", 12),
    ("text ~ /a/ within 2", "need the model's tokenizer", 1),
]


@pytest.mark.parametrize("expr, message, column", ERRORS, ids=[e[0] or "empty" for e in ERRORS])
def test_errors_name_the_problem_and_point_at_it(expr, message, column):
    with pytest.raises(ValueError) as error:  # a QueryError is a ValueError
        parse(expr, V)
    assert isinstance(error.value, QueryError)
    text = str(error.value)
    assert message in text
    head, shown, caret = text.split("\n")
    assert head.endswith(f" at column {column}:")
    assert shown == "  " + expr
    assert caret == "  " + " " * (column - 1) + "^"


def test_tokens_without_a_vocabulary_are_refused_with_the_fix():
    with pytest.raises(QueryError, match="needs the model's vocabulary"):
        parse("tau(a) = 3")


def test_syntax_is_checked_without_a_vocabulary():
    check_syntax('tau("anything") = 3 or choice("x") or text ~ /y/ within 2')
    with pytest.raises(QueryError, match="missing 'within K'"):
        check_syntax("tau(a) < tau(b)")
    with pytest.raises(QueryError, match="a query is a string"):
        check_syntax(None)


def test_parse_is_exported():
    assert seqq.parse is parse and Q.parse is parse


@pytest.mark.parametrize("expr", [
    "tau({0, 1}) = 3",
    "tau(2) < tau(not {0, 2}) within 4",
    "count(1, 5) >= 2 or X2 in {0, 3}",
    "not (X1 = 0 and tau(3) <= 4) and count(not 2, 4) != 2",
])
def test_parsed_queries_are_answered_exactly(expr):
    """seqq.exact (the Markov chain's forward DP over chain × automaton states) and exact
    enumeration both equal brute force over V^K."""
    model = random_markov(V=4)
    history = [1, 2]
    query = parse(expr, model.vocab)
    truth = brute_force(model, history, query)
    assert seqq.exact(model, history, query) == pytest.approx(truth, rel=1e-9, abs=1e-12)
    assert seqq.estimate(model, history, query, "exact").value == pytest.approx(truth, rel=1e-6)


# ------------------------------------------------------------------------ sweeps: query=expr


def _specs(tmp_path: Path, *overrides: str) -> list:
    spec = sweep.check_config(compose_sweep(tiny_overrides(tmp_path, "expr", *overrides)))
    return sweep.make_specs(spec, sweep.load_data(spec))


def test_an_expr_sweep_asks_what_the_template_says(tmp_path: Path):
    """The default template is the paper's hitting-time query, symbol for symbol."""
    ours, paper = _specs(tmp_path, "query=expr"), _specs(tmp_path, "query=hitting_time")
    assert [(s.history, s.K) for s in ours] == [(s.history, s.K) for s in paper]
    assert [s.query for s in ours] == [s.query for s in paper]
    vocab = sweep.load_data(sweep.sweep_spec(compose_sweep(tiny_overrides(tmp_path, "v")))).vocab
    first = ours[0]
    assert first.label == f"tau({quote(vocab[first.history.future[first.K - 1]])}) = {first.K}"
    assert {s.kind for s in ours} == {"tau({observed}) = {K}"}


def test_an_expr_template_fills_every_placeholder(tmp_path: Path):
    specs = _specs(tmp_path, "query=expr",
                   "query.expr='count({observed_first}, {K}) >= 1 and X1 != {observed_other}'")
    assert specs
    for s in specs:
        future = s.history.future
        other = next(x for x in future if x != future[0])
        assert s.query == Q.count(future[0], 1, s.K, op=">=") & Q.event_at(
            ~Q.Domain(frozenset({other})), 1)


@pytest.mark.parametrize("template, said", [
    ("tau({observed}) < tau(x)", "query.expr at K=3: missing 'within K'"),
    ("count({observed}, {K}) = 4", None),  # fine at K=5 only: refused when specs are built
    ("", "query.expr must be a query-language expression"),
])
def test_an_expr_template_is_checked_before_anything_loads(tmp_path: Path, template, said):
    cfg = compose_sweep(tiny_overrides(tmp_path, "bad", "query=expr", f"query.expr='{template}'"))
    if said is None:
        spec = sweep.check_config(cfg)
        with pytest.raises(QueryError, match="query.expr: count n must lie in 0..K=3"):
            sweep.make_specs(spec, sweep.load_data(spec))
        return
    with pytest.raises(SeqqError, match=re.escape(said)):
        sweep.check_config(cfg)


def test_an_expr_template_symbols_are_checked_against_the_vocabulary(tmp_path: Path):
    with pytest.raises(QueryError, match='query.expr: unknown token "zz" at column 5'):
        _specs(tmp_path, "query=expr", "query.expr='tau(\"zz\") <= {K}'")


@pytest.mark.slow
def test_an_expr_sweep_runs_end_to_end(tmp_path: Path):
    template = "count({observed_first}, {K}) >= 2 or X1 = {observed}"
    cfg = compose_sweep(tiny_overrides(tmp_path, "expr", "query=expr",
                                       f"query.expr='{template}'", "sweep.ks=[3]",
                                       "levels.S=[10]"))
    table = load_results([str(sweep.run(cfg) / "results")])
    assert set(table["query"]) == {template} and len(table) == 6 * 3  # 6 histories, 3 methods
    assert table["label"].str.startswith("count(").all()
    assert np.isfinite(table.rae).all() and (table.truth > 0).all()


def test_named_sets_stand_for_every_token_that_ends_a_sentence_or_a_text():
    """`"."` is one token of many that end a sentence ('."', ' ?', …); `@sentence_end` and
    `@text_end` name them all, from each token's text, and a vocabulary without one says so."""
    vocab = ["a", "b", ".", '?"', " .", "<EOS>", "\n", "e.g"]
    ends = seqq.parse("tau(@sentence_end) = 3", vocab)
    assert ends == Q.hitting_time([2, 3, 4], 3)
    both = seqq.parse("tau({@sentence_end, @text_end, b}) <= 4", vocab)
    assert both == seqq.parse("tau({2, 3, 4, 5, b}) <= 4", vocab)
    with pytest.raises(QueryError, match="did you mean @sentence_end"):
        seqq.parse("tau(@sentense_end) = 3", vocab)
    with pytest.raises(QueryError, match="@text_end names no token of this vocabulary"):
        seqq.parse("tau(@text_end) = 3", ["a", "b", "."])
