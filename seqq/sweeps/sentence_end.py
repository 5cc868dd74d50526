"""Fig. 1 of the paper: when will the sentence end? The hitting time of a sentence end,
p(τ(A) = K) for every K ≤ K_max after a few WikiText prefixes, estimated by importance sampling
and by naive model sampling at equal model calls, each run `replicates` times so the variance of
each method's estimate can be compared per K (the paper: "a 6x reduction in variance").

Every run answers all K from one set of paths (`seqq.estimators.horizons`), as App. G.7 does.
A is every token of the vocabulary that ends a sentence (`SENTENCE_END`). The prefixes are picked
from the WikiText-2 test articles by a stated rule (`pick_prefixes`), not by hand.

Rows are written one part per prefix (`<out>/part-<i>.parquet`): a killed run resumes at the
prefix in flight.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

import seqq
from seqq.data.base import require
from seqq.data.text import WIKITEXT_URL, wikitext_articles
from seqq.errors import ConfigError
from seqq.models import SequenceModel
from seqq.paths import find_data
from seqq.progress import progress_bar
from seqq.queries import hitting_time
from seqq.queries.named import named_tokens
from seqq.results.store import PartStore

# A WikiText sentence: text up to a spaced-out sentence-final mark (the corpus writes ' . ').
SENTENCE = re.compile(r"[^.!?]*? [.!?](?= |$)")
OPEN_WORDS = (",", "and", "which", "who", "that", "but")  # an open-ended cut follows one of these
DECLARATIVE_VERBS = ("is", "was", "are", "were")
KEY = ("prefix", "method", "replicate", "K")


@dataclass(frozen=True)
class Prefix:
    kind: str  # "open-ended" or "declarative"
    text: str  # the partial sentence the prefix ends with
    tokens: tuple[int, ...]  # context from the article, then the partial sentence


@dataclass(frozen=True)
class SentenceEndSpec:
    """`sweep.sentence_end` (preset=fig1)."""

    k_max: int = 30
    samples: int = 100  # importance samples per run; naive gets the same model calls
    replicates: int = 20
    context_tokens: int = 48  # article text kept before the partial sentence
    per_kind: int = 2  # prefixes of each kind (open-ended, declarative)


def pick_prefixes(articles: Sequence[str], tokenize: Callable[[str], list[int]],
                  per_kind: int = 2, context_tokens: int = 48) -> list[Prefix]:
    """The first `per_kind` sentences of the test articles, in order, of each kind:
    open-ended — a sentence of ≥ 25 words cut right after a comma or a conjunction/relative
    pronoun (`OPEN_WORDS`) in its first half, so most of it is still to come; declarative — a
    sentence of ≤ 12 words of the form "… is/was … ." cut two words before its full stop, so
    little is left to say. Each prefix carries up to `context_tokens` tokens of the article
    before its sentence."""
    found: dict[str, list[Prefix]] = {"open-ended": [], "declarative": []}
    for article in articles:
        body = article.split("\n", 2)[-1]
        for match in SENTENCE.finditer(body):
            words = match.group(0).split()[:-1]  # without its final mark
            if any(w.startswith(("=", "@")) or w == "<unk>" for w in words):
                continue  # headings, WikiText's @-@ joins and unknown words read badly
            cut = _cut(words)
            if cut is None or len(found[cut[0]]) == per_kind:
                continue
            kind, partial = cut
            context = tokenize(body[:match.start()])[-context_tokens:]
            found[kind].append(Prefix(kind, partial, tuple(context + tokenize(" " + partial))))
        if all(len(v) == per_kind for v in found.values()):
            break
    return found["open-ended"] + found["declarative"]


def _cut(words: list[str]) -> tuple[str, str] | None:
    if len(words) >= 25:
        for i in range(3, len(words) // 2):
            if words[i] in OPEN_WORDS:
                return "open-ended", " ".join(words[:i + 1])
    if 6 <= len(words) <= 12 and any(w in DECLARATIVE_VERBS for w in words[1:4]):
        return "declarative", " ".join(words[:-2])
    return None


def run_prefix(model: SequenceModel, prefix: Prefix, event: Sequence[int],
               spec: SentenceEndSpec, seed: int) -> pd.DataFrame:
    """Every replicate of both methods on one prefix: importance sampling with `samples`
    paths per run, then naive sampling with each run's budget set to the calls its importance
    run spent. All replicates of a method share one batched call of the estimator."""
    R, ks = spec.replicates, range(1, spec.k_max + 1)
    histories = [list(prefix.tokens)] * (R * spec.k_max)
    queries = [hitting_time(event, k) for _ in range(R) for k in ks]
    rows = []
    runs = seqq.estimate_many(model, histories, queries, "importance", samples=spec.samples,
                              seed=seed)
    budgets = [e.model_calls for e in runs]
    naive = seqq.estimate_many(model, histories, queries, "naive", budget=budgets, seed=seed + 1)
    for method, estimates in (("importance", runs), ("naive", naive)):
        for i, e in enumerate(estimates):
            rows.append(dict(kind=prefix.kind, prefix=prefix.text, method=method,
                             replicate=i // spec.k_max, K=ks[i % spec.k_max], estimate=e.value,
                             stderr=e.stderr, model_calls=e.model_calls,
                             samples=e.num_samples))
    return pd.DataFrame(rows)


def run(model: SequenceModel, prefixes: Sequence[Prefix], event: Sequence[int],
        spec: SentenceEndSpec, out: Path, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """All prefixes, one saved part each (a re-run skips the saved ones)."""
    store = PartStore(out, KEY)
    saved = store.read()
    done = set(saved["prefix"]) if len(saved) else set()
    for prefix in progress_bar(prefixes, desc="Fig. 1 prefixes", disable=not progress):
        if prefix.text not in done:
            store.write(run_prefix(model, prefix, event, spec, seed + _stable_hash(prefix.text)),
                        f"prefix-{_stable_hash(prefix.text)}")
    return store.read()


def _stable_hash(text: str) -> int:
    """A number of the prefix's text that is the same in every process (seeds, file names)."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def run_sentence_end(model: SequenceModel, data_root: Path, spec: SentenceEndSpec, out: Path,
                     seed: int, shard: int = 0, shards: int = 1, progress: bool = True) -> int:
    """The sweep's entry: this shard's prefixes (every `shards`-th) of the WikiText-2 test
    articles, A = the model's sentence-ending tokens. Returns how many prefixes are saved."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise ConfigError("Fig. 1 (sweep.sentence_end) needs a language model with a tokenizer "
                          "(model=smollm2 or model=gpt2), to read WikiText and find the tokens "
                          "that end a sentence")
    test = require(find_data(data_root, Path("wikitext2") / "wiki.test.tokens"),
                   "WikiText-2 wiki.test.tokens", WIKITEXT_URL)
    articles = wikitext_articles(test.read_text(encoding="utf-8"))
    prefixes = pick_prefixes(articles, lambda text: tokenizer(text, add_special_tokens=False)
                             ["input_ids"], spec.per_kind, spec.context_tokens)
    mine = prefixes[shard::shards]
    return len(run(model, mine, named_tokens("sentence_end", model.vocab, tokenizer), spec, out,
                   seed, progress)
               .drop_duplicates("prefix"))
