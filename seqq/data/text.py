"""Language datasets: Shakespeare characters and WikiText-2 under the GPT-2 tokenizer."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from seqq.data.base import (
    BOS,
    DEFAULT_FRACTIONS,
    SequenceDataset,
    model_vocab,
    parsing,
    require,
    split_indices,
    vocab_files,
)
from seqq.data.prepared import prepared
from seqq.data.tokenizers import folder_tokenizer, gguf_tokenizer, gpt2_files, gpt2_tokenizer
from seqq.errors import DataError
from seqq.paths import find_data, smollm2_file

SHAKESPEARE_URL = "https://cs.stanford.edu/people/karpathy/char-rnn/shakespeare_input.txt"
WIKITEXT_URL = "https://huggingface.co/datasets/Salesforce/wikitext (wikitext-2-v1)"


def load_shakespeare(root: Path, *, file: str = "tinyshakespeare_input.txt",
                     block_chars: int = 5000, fractions: Sequence[float] = DEFAULT_FRACTIONS,
                     seed: int = 0, vocab: str | None = None) -> SequenceDataset:
    """Characters of a Shakespeare text cut into contiguous blocks, whole blocks per split.

    The default is the shipped tiny Shakespeare (65 characters); `file=shakespeare_input.txt`
    uses karpathy's full text (67 characters, the paper's) once it is put in
    `<root>/shakespeare/` (a file there is read before the shipped one of the same name).
    The vocabulary is `<BOS>` then the sorted characters, unless `vocab` names a model's
    vocabulary file (the authors' LSTM: `seqq/resources/models/authors/shakespeare_vocab.json`).
    """
    path = require(find_data(root, Path("shakespeare") / file), f"Shakespeare text {file!r}",
                   SHAKESPEARE_URL)
    if block_chars < 2:
        raise DataError(f"shakespeare: block_chars must be at least 2, got {block_chars}")
    options = dict(block_chars=block_chars, fractions=list(fractions), seed=seed, vocab=vocab)

    def build() -> SequenceDataset:
        with parsing("shakespeare", path):
            text = path.read_text(encoding="utf-8")
        if not text:
            raise DataError(f"shakespeare: {path} is empty")
        symbols = (model_vocab(vocab, set(text), "shakespeare") if vocab is not None
                   else [BOS, *sorted(set(text))])
        index = {c: i for i, c in enumerate(symbols)}
        blocks = [[index[BOS], *(index[c] for c in text[i:i + block_chars])]
                  for i in range(0, len(text), block_chars)]
        train, valid, test = split_indices(len(blocks), fractions, seed)
        return SequenceDataset(
            name="shakespeare", vocab=symbols, train=[blocks[i] for i in train],
            valid=[blocks[i] for i in valid], test=[blocks[i] for i in test],
            description=f"Shakespeare characters from {file}, {block_chars}-character blocks"
                        + (f", ids of {vocab}" if vocab is not None else ""),
            stats=dict(characters=len(text), blocks=len(blocks)),
        )

    return prepared(root, "shakespeare", [path, *vocab_files(vocab)], options, build)


_ARTICLE_HEADING = re.compile(r"^ = [^=].* = $")


def wikitext_articles(text: str) -> list[str]:
    """Split a WikiText `*.tokens` file into articles at its top-level ` = Title = ` headings."""
    articles: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if _ARTICLE_HEADING.match(line.rstrip("\n")) or not articles:
            articles.append([])
        articles[-1].append(line)
    return [a for a in ("".join(lines) for lines in articles) if a.strip()]


def _tokenizer_source(root: Path, tokenizer: str) -> tuple[list[Path], Callable[[], object]]:
    """The files that identify a tokenizer (for the cache key) and a function that loads it."""
    if tokenizer == "gpt2":
        return gpt2_files(root), lambda: gpt2_tokenizer(root)
    if tokenizer == "smollm2":
        gguf_file = smollm2_file()
        return [gguf_file], lambda: gguf_tokenizer(gguf_file)
    folder = Path(tokenizer)
    if not folder.is_dir():
        raise DataError(f"wikitext: tokenizer must be gpt2, smollm2 or a tokenizer folder, "
                        f"got {tokenizer!r}")
    return sorted(p for p in folder.iterdir() if p.is_file()), lambda: folder_tokenizer(folder)


def load_wikitext(root: Path, *, tokenizer: str = "gpt2", test_file: str = "wiki.test.tokens",
                  valid_file: str = "wiki.valid.tokens") -> SequenceDataset:
    """WikiText-2 (v1) articles as token-id blocks, GPT-2 BPE by default (or `smollm2` / a
    tokenizer folder, to query other LMs); no training split (the paper only queries
    pretrained GPT-2 with test-split prefixes)."""
    folder = Path("wikitext2")  # under the root, else the samples shipped with seqq
    test_path = require(find_data(root, folder / test_file), f"WikiText-2 {test_file}",
                        WIKITEXT_URL)
    valid_path = require(find_data(root, folder / valid_file), f"WikiText-2 {valid_file}",
                         WIKITEXT_URL)
    tok_files, load_tokenizer = _tokenizer_source(root, tokenizer)

    def build() -> SequenceDataset:
        tok = load_tokenizer()
        tok.model_max_length = 1 << 30  # articles are longer than the context; that is fine

        def encode(path: Path) -> list[list[int]]:
            with parsing("wikitext", path):
                articles = wikitext_articles(path.read_text(encoding="utf-8"))
            return [ids for ids in tok(articles, add_special_tokens=False)["input_ids"] if ids]

        vocab = tok.convert_ids_to_tokens(list(range(len(tok))))
        test, valid = encode(test_path), encode(valid_path)
        return SequenceDataset(
            name="wikitext", vocab=vocab, train=[], valid=valid, test=test,
            description=f"WikiText-2 v1 articles, {tokenizer} token ids (no <BOS>)",
            stats=dict(test_tokens=sum(map(len, test)), test_articles=len(test)),
        )

    return prepared(root, "wikitext", [test_path, valid_path, *tok_files],
                  dict(tokenizer=tokenizer), build)
