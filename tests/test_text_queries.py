"""Text queries against brute force over every token sequence, decoded by the tokenizer itself.

A byte-level BPE tokenizer trained here on a few sentences (é, è, ç split into byte tokens, so
some token boundaries fall inside a character) and a random GPT-2 over its 30 tokens: every
sequence up to small K is decoded with `tokenizer.decode` and checked with Python's `re`,
independently of outlines-core and the automaton. A token sequence is text once its bytes decode
(no replacement character) and it holds no special token.
"""

from __future__ import annotations

import itertools
import math
import re

import pytest
import torch
from conftest import requires_smollm2
from oracles import all_paths, brute_force, path_log_probs, tiny_gpt2

import seqq
from seqq.errors import QueryError
from seqq.queries import Query, appears_within, choice, text_matches

SENTENCES = ["the cat sat on the mat", "a cat ate the rat", "the rat sat", "café crème", "ça"]
HISTORY = [19, 26]  # "the cat"


def train_tokenizer(pre_tokenizer, decoder, vocab_size: int):
    from tokenizers import Tokenizer, models, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer, tok.decoder = pre_tokenizer, decoder
    tok.train_from_iterator(SENTENCES, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<eos>"], initial_alphabet=[]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import decoders, pre_tokenizers

    tok = train_tokenizer(pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel(),
                          vocab_size=30)
    assert len(tok) == 30 and {"Ġcat", "Ã", "©"} <= set(tok.get_vocab())
    return tok


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_gpt2(V=len(tokenizer))  # its EOS/BOS id 0 is the tokenizer's <eos>


def texts_of_prefixes(tokenizer, paths: torch.Tensor) -> list[list[str | None]]:
    """Per path, the text of its first j tokens for j = 1..K (None where that is not text)."""
    special = torch.tensor(tokenizer.all_special_ids)
    columns = []
    for j in range(1, paths.shape[1] + 1):
        decoded = tokenizer.batch_decode(paths[:, :j].tolist(), clean_up_tokenization_spaces=False)
        bad = torch.isin(paths[:, :j], special).any(1).tolist()
        columns.append([None if b or "\ufffd" in t else t for t, b in zip(decoded, bad, strict=True)])
    return [list(row) for row in zip(*columns, strict=True)]


def re_matches(pattern: str, mode: str, texts: list[str | None]) -> bool:
    if mode == "full":
        return texts[-1] is not None and re.fullmatch(pattern, texts[-1]) is not None
    test = re.fullmatch if mode == "prefix" else re.search
    return any(t is not None and test(pattern, t) is not None for t in texts)


def accepted(query: Query, paths: torch.Tensor, V: int) -> list[bool]:
    return query.contains(paths, V).tolist()


PATTERNS = [r"the cat", r" ?(the|a) [cr]at", r"caf[éè]", r"[a-z ]+", r"t.e", r"(ç|a)+", r"\w+ \w+",
            r"t|th|the"]  # leftmost-first engines stop at "t"; a full match must not


@pytest.mark.parametrize("K", [2, 3])
def test_regex_automaton_accepts_exactly_what_re_matches_on_the_decoded_text(tokenizer, K):
    V = len(tokenizer)
    paths = all_paths(V, K)
    texts = texts_of_prefixes(tokenizer, paths)
    for pattern, mode in itertools.product(PATTERNS, ("full", "prefix", "contains")):
        expected = [re_matches(pattern, mode, t) for t in texts]
        if K == 3:
            assert any(expected), (pattern, mode)  # every case has matches to get right
        try:
            query = text_matches(pattern, K, tokenizer, mode)
        except QueryError:  # refused as unmatchable: then nothing matches
            assert not any(expected), (pattern, mode)
            continue
        assert accepted(query, paths, V) == expected, (pattern, mode, K)


def test_appears_within_is_contains_of_the_literal(tokenizer):
    V, K = len(tokenizer), 3
    paths = all_paths(V, K)
    texts = texts_of_prefixes(tokenizer, paths)
    for s in ["e c", "é", "t.", "(a"]:  # regex metacharacters are literal here
        expected = [any(t is not None and s in t for t in row) for row in texts]
        try:
            query = appears_within(s, K, tokenizer)
        except QueryError:
            assert not any(expected), s
            continue
        assert accepted(query, paths, V) == expected, s


def sequence_log_prob(model, history: list[int], tokens: tuple[int, ...]) -> float:
    """log p(tokens | history) by feeding the tokens one at a time."""
    log_probs, state = model.initial_state([history])
    total = 0.0
    for k, t in enumerate(tokens):
        total += float(log_probs[0, t])
        if k + 1 < len(tokens):
            log_probs, state = model.step(state, torch.tensor([t]))
    return total


def tokenisations(tokenizer, strings: list[str]) -> set[tuple[int, ...]]:
    """Every token sequence that decodes to one of `strings`, grown token by token while its
    text can still become one (a trailing incomplete character decodes to one U+FFFD)."""
    special = set(tokenizer.all_special_ids)
    ordinary = [t for t in range(len(tokenizer)) if t not in special]
    found, frontier = set(), [()]
    while frontier:
        grown = [(*seq, t) for seq in frontier for t in ordinary]
        texts = tokenizer.batch_decode([list(seq) for seq in grown], clean_up_tokenization_spaces=False)
        frontier = []
        for seq, text in zip(grown, texts, strict=True):
            head = text.removesuffix("\ufffd")
            if text in strings:
                found.add(seq)
            elif "\ufffd" not in head and any(
                    s.startswith(head) and len(s) > len(head) and (head == text or not s[len(head)].isascii())
                    for s in strings):
                frontier.append(seq)
    return found


def test_choice_sums_every_tokenisation(tokenizer, model):
    strings = ["the", "ça", " c"]
    query = choice(strings, tokenizer)
    found = tokenisations(tokenizer, strings)
    assert query.horizon == max(len(t) for t in found) == 3  # "the" as "t", "h", "e"
    assert len(found) > len(strings)  # strings with several tokenisations
    total = sum(math.exp(sequence_log_prob(model, HISTORY, t)) for t in found)
    assert brute_force(model, HISTORY, query) == pytest.approx(total, rel=1e-6)
    assert seqq.exact(model, HISTORY, query) == pytest.approx(total, rel=1e-6)


def test_choice_accepts_exactly_the_tokenisations_of_longer_strings(tokenizer):
    strings = [" the cat", "café", "crème"]
    query = choice(strings, tokenizer)
    found = tokenisations(tokenizer, strings)
    assert query.horizon == max(len(t) for t in found)
    assert accepted_sequences(query, len(tokenizer)) == found


def test_choice_counts_a_path_once_when_one_string_extends_another(tokenizer, model):
    """ "the" and "the c": a path writing "the c" also writes "the" on a token boundary."""
    both = choice(["the", "the c"], tokenizer, K=3)
    alone = choice(["the"], tokenizer, K=3)
    assert brute_force(model, HISTORY, both) == pytest.approx(brute_force(model, HISTORY, alone))


def accepted_sequences(query: Query, V: int) -> set[tuple[int, ...]]:
    """The token sequences the query's lattice accepts, each cut at the node where every
    continuation is accepted."""
    lattice = query.lattice(V)
    out, stack = set(), [(int(lattice.roots[0]), ())]
    while stack:
        node, seq = stack.pop()
        if lattice.free[node]:
            out.add(seq)
            continue
        children = lattice.child_table(torch.tensor([node]))[0]
        stack += [(int(children[t]), (*seq, t)) for t in children.ge(0).nonzero().flatten().tolist()]
    return out


def test_regex_probability_equals_brute_force_over_decoded_paths(tokenizer, model):
    K = 3
    paths, joint = path_log_probs(model, HISTORY, K)
    texts = texts_of_prefixes(tokenizer, paths)
    for pattern, mode in [(r" ?(the|a) [cr]at", "full"), (r"caf[éè]", "prefix"), (r"t.e", "contains")]:
        inside = torch.tensor([re_matches(pattern, mode, t) for t in texts])
        expected = math.exp(torch.logsumexp(joint[inside], 0).item())
        query = text_matches(pattern, K, tokenizer, mode)
        assert brute_force(model, HISTORY, query) == pytest.approx(expected, rel=1e-6), pattern
        assert seqq.exact(model, HISTORY, query) == pytest.approx(expected, rel=1e-6), pattern


@pytest.mark.parametrize("make", [
    lambda t: choice(["the", "ça", " c"], t),
    lambda t: text_matches(r" ?(the|a) [cr]at", 3, t, mode="prefix"),
    lambda t: appears_within("é", 4, t),
], ids=["choice", "prefix", "appears_within"])
def test_importance_sampling_is_unbiased_on_text_queries(tokenizer, model, make):
    query = make(tokenizer)
    truth = seqq.exact(model, HISTORY, query)
    seeds = 240  # independent replicas, run as one batched call
    estimates = seqq.estimate_many(model, [HISTORY] * seeds, query, "importance", samples=4, seed=3)
    values = torch.tensor([e.value for e in estimates], dtype=torch.float64)
    se = values.std().item() / math.sqrt(seeds)
    assert 0 < truth < 1 and se > 0
    assert abs(values.mean().item() - truth) <= 4 * se, (values.mean(), truth, se)


@pytest.fixture(scope="module")
def sentencepiece_tokenizer():
    """A SentencePiece-style BPE: ▁ for a space, <0xNN> byte-fallback tokens for é's bytes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pieces = ["<eos>", "<0xC3>", "<0xA9>", "▁", "a", "b", "c", "▁a", "ab", "▁ab", "ca"]
    merges = [("▁", "a"), ("a", "b"), ("▁a", "b"), ("c", "a")]
    tok = Tokenizer(models.BPE({p: i for i, p in enumerate(pieces)}, merges, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse()])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")


def test_sentencepiece_spaces_and_byte_fallback(sentencepiece_tokenizer):
    tok, K = sentencepiece_tokenizer, 4
    paths = all_paths(len(tok), K)
    texts = texts_of_prefixes(tok, paths)
    for pattern, mode in [(r" ab", "prefix"), (r"cé", "contains"), (r"[a-c ]+é", "full")]:
        expected = [re_matches(pattern, mode, t) for t in texts]
        assert any(expected), pattern
        assert accepted(text_matches(pattern, K, tok, mode), paths, len(tok)) == expected, pattern


@pytest.mark.parametrize("call, message", [
    (lambda t: choice([], t), "at least one string"),
    (lambda t: choice("the", t), "list of strings"),
    (lambda t: choice(["the", ""], t), "choice string 2 is ''"),
    (lambda t: appears_within("", 3, t), "non-empty string"),
    (lambda t: text_matches("", 3, t), "non-empty string"),
    (lambda t: text_matches("(the", 3, t), "invalid or unsupported"),
    (lambda t: text_matches(r"\bthe", 3, t), "invalid or unsupported"),
    (lambda t: text_matches("the", 3, t, mode="search"), "not one of full, prefix, contains"),
    (lambda t: text_matches("the", 0, t), "K must be an integer >= 1"),
    (lambda t: text_matches("x", 3, t), "needs text this tokenizer's tokens cannot write"),
    (lambda t: text_matches("the$", 3, t), "without anchors (^, $)"),
    (lambda t: text_matches("the cat", 1, t), "shortest match takes 2; change K"),
    (lambda t: text_matches("the cat", 1, t, mode="prefix"), "raise K to at least 2"),
    (lambda t: appears_within(" the rat", 1, t), "raise K to at least 2"),
    (lambda t: choice(["ça", "café"], t, K=2), "raise K to at least 3"),
])
def test_bad_input_is_one_line_naming_the_fix(tokenizer, call, message):
    with pytest.raises(QueryError, match=re.escape(message)) as error:
        call(tokenizer)
    assert "\n" not in str(error.value)


# --- SmolLM2, a real pretrained LM (optional package; installed by `make venv`) ------------------



@pytest.fixture(scope="module")
def smollm2():
    from seqq.models.loading import load_model

    lm = load_model({"type": "smollm2", "device": "cpu"})
    history = lm.tokenizer("The capital of France is")["input_ids"]
    token_texts = lm.tokenizer.batch_decode([[i] for i in range(len(lm.tokenizer))])
    return lm, history, token_texts


def forward_log_probs(lm, history: list[int], seqs: list[tuple[int, ...]]) -> list[float]:
    """log p(seq | history) of each sequence, from one right-padded forward pass of the HF model
    (causal attention: the padding after a sequence does not change its own positions)."""
    width = max(len(s) for s in seqs)
    ids = torch.tensor([history + list(s) + [0] * (width - len(s)) for s in seqs])
    with torch.no_grad():
        log_probs = torch.log_softmax(lm.model(ids).logits.double(), -1)
    n = len(history)
    return [sum(log_probs[i, n - 1 + k, t].item() for k, t in enumerate(s)) for i, s in enumerate(seqs)]


@pytest.mark.slow
@requires_smollm2
def test_smollm2_choice_is_every_tokenisation_of_each_string(smollm2):
    lm, history, token_texts = smollm2
    strings = [" Paris", " Lyon"]
    ids_of: dict[str, list[int]] = {}
    for i, t in enumerate(token_texts):
        if i not in lm.tokenizer.all_special_ids:
            ids_of.setdefault(t, []).append(i)
    expected = set()  # split each string every possible way; keep splits whose pieces are tokens
    for s in strings:
        for cuts in itertools.product([False, True], repeat=len(s) - 1):
            bounds = [0, *(i + 1 for i, c in enumerate(cuts) if c), len(s)]
            pieces = [s[a:b] for a, b in itertools.pairwise(bounds)]
            expected |= set(itertools.product(*(ids_of.get(p, []) for p in pieces)))
    query = choice(strings, lm.tokenizer)
    assert query.horizon == 6 and len(expected) > 10
    assert accepted_sequences(query, lm.vocab_size) == expected
    total = sum(math.exp(lp) for lp in forward_log_probs(lm, history, sorted(expected)))
    assert total > 0.01  # " Paris" is likely after "The capital of France is"
    assert seqq.exact(lm, history, query) == pytest.approx(total, rel=1e-4)


@requires_smollm2
def test_smollm2_regex_at_two_tokens(smollm2):
    lm, history, token_texts = smollm2
    pattern = r" (Par|Ly)(is|on)"
    words = [" Paris", " Paron", " Lyis", " Lyon"]  # the language of the pattern
    special = set(lm.tokenizer.all_special_ids)
    expected = set()
    for t1, a in enumerate(token_texts):
        if t1 in special or not any(w.startswith(a) for w in words) or not a:
            continue
        if a in words:
            expected.add((t1,))
            continue
        expected |= {(t1, t2) for t2, b in enumerate(token_texts) if t2 not in special and a + b in words}
    assert all(re.fullmatch(pattern, "".join(token_texts[t] for t in seq)) for seq in expected)
    query = text_matches(pattern, 2, lm.tokenizer, mode="prefix")
    assert len(expected) > 4 and accepted_sequences(query, lm.vocab_size) == expected
    total = sum(math.exp(lp) for lp in forward_log_probs(lm, history, sorted(expected)))
    assert seqq.exact(lm, history, query) == pytest.approx(total, rel=1e-4)
