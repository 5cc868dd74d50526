"""Shakespeare characters, WikiText-2 articles under GPT-2 BPE, synthetic stand-ins, windows."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from seqq.data import BOS, DATASETS, load_dataset
from seqq.data.text import gpt2_tokenizer, wikitext_articles
from seqq.data.windows import IGNORE, make_batch, window_starts
from seqq.errors import DataError
from seqq.paths import SHIPPED

DATA = Path(__file__).resolve().parents[1] / "data"
WIKI = """ 
 = Robert Boulter = 
 
 Robert Boulter is an English film , television and theatre actor . 
 
 = = Career = = 
 
 In 2000 Boulter had a guest @-@ starring role . 
 
 = Du Fu = 
 
 Du Fu was a prominent Chinese poet . 
"""


def test_shakespeare_blocks_split_whole(tmp_path):
    (tmp_path / "shakespeare").mkdir()
    text = "".join(chr(97 + (i * 7) % 26) for i in range(1000)) + "\nTo be!"
    (tmp_path / "shakespeare" / "tinyshakespeare_input.txt").write_text(text)
    ds = load_dataset("shakespeare", tmp_path, block_chars=100)
    assert ds.vocab == [BOS, *sorted(set(text))]
    blocks = ds.train + ds.valid + ds.test
    assert len(blocks) == 11 and all(b[0] == 0 for b in blocks)
    assert len(ds.valid) == len(ds.test) == 1  # 80/10/10 of 11 blocks, rounded
    decoded = sorted("".join(ds.vocab[t] for t in b[1:]) for b in blocks)
    assert decoded == sorted(text[i:i + 100] for i in range(0, len(text), 100))


def test_shipped_tiny_shakespeare():
    ds = load_dataset("shakespeare", DATA)
    assert ds.vocab_size == 66 and not ds.synthetic  # 65 characters + <BOS>
    assert sum(len(b) - 1 for b in ds.train + ds.valid + ds.test) == ds.stats["characters"]


def test_wikitext_articles_and_gpt2_ids(tmp_path):
    (tmp_path / "wikitext2").mkdir()
    (tmp_path / "wikitext2" / "wiki.test.tokens").write_text(WIKI)
    (tmp_path / "wikitext2" / "wiki.valid.tokens").write_text(WIKI.split(" = Du Fu")[0])
    (tmp_path / "gpt2_tokenizer").symlink_to(SHIPPED / "gpt2_tokenizer")
    articles = wikitext_articles(WIKI)
    assert len(articles) == 2 and articles[1].startswith(" = Du Fu = ")
    assert "= = Career = =" in articles[0]  # sub-headings stay inside their article
    ds = load_dataset("wikitext", tmp_path)
    assert ds.vocab_size == 50257 and ds.vocab[50256] == "<|endoftext|>" and ds.bos_id is None
    assert ds.train == [] and len(ds.test) == 2 and len(ds.valid) == 1
    tok = gpt2_tokenizer(tmp_path)
    assert ds.test[1] == tok(articles[1])["input_ids"]
    assert tok.decode(ds.test[1]) == articles[1]


@pytest.mark.parametrize("preset, V", [("reviews", 29), ("apps", 88), ("moocs", 98),
                                       ("shakespeare", 68)])
def test_synthetic_presets(preset, V):
    start = time.perf_counter()
    ds = load_dataset(f"synthetic_{preset}")
    assert time.perf_counter() - start < 5
    assert ds.synthetic and ds.name == f"synthetic_{preset}" and "synthetic" in ds.title
    assert "SYNTHETIC" in ds.description and ds.vocab_size == V and ds.vocab[0] == BOS
    seqs = ds.train + ds.valid + ds.test
    assert all(s[0] == 0 and 0 not in s[1:] and max(s) < V for s in seqs)
    assert load_dataset("synthetic", preset=preset).test == ds.test  # same seed, same data


def test_synthetic_options_and_seed():
    a = load_dataset("synthetic_apps", vocab_size=10, num_sequences=30, seed=1, hidden_states=0)
    b = load_dataset("synthetic_apps", vocab_size=10, num_sequences=30, seed=2, hidden_states=0)
    assert a.vocab_size == 10 and len(a.train + a.valid + a.test) == 30
    assert a.train != b.train
    peaky = load_dataset("synthetic_reviews", concentration=0.01, hidden_states=0)
    flat = load_dataset("synthetic_reviews", concentration=10.0, hidden_states=0)

    def entropy(ds):
        counts = np.bincount([t for s in ds.train for t in s[1:]], minlength=ds.vocab_size)[1:]
        pairs = np.zeros((ds.vocab_size,) * 2)
        for s in ds.train:
            np.add.at(pairs, (s[1:-1], s[2:]), 1)
        rows = pairs[1:, 1:] / np.maximum(pairs[1:, 1:].sum(1, keepdims=True), 1)
        logs = np.log(np.where(rows > 0, rows, 1))
        return -(counts / counts.sum() * (rows * logs).sum(1)).sum()

    assert entropy(peaky) < entropy(flat) - 1.0
    with pytest.raises(DataError, match="unknown synthetic preset"):
        load_dataset("synthetic", preset="weather")


def test_registry_names():
    assert {"shakespeare", "wikitext", "moocs", "apps", "reviews", "synthetic_apps",
            "synthetic_moocs", "synthetic_reviews", "synthetic_shakespeare"} <= set(DATASETS)


def test_windows_never_cross_sequences_and_prepend_bos():
    seqs = [[0, 1, 2, 3, 4, 5], [0, 6, 7], [0, 8, 9, 10, 11]]
    pairs = window_starts(seqs, 3, 1)
    assert pairs.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [2, 0], [2, 1]]
    x, y = make_batch(seqs, pairs, 3, bos=0)
    assert x[1].tolist() == [0, 2, 3] and y[1].tolist() == [2, 3, 4]
    assert x[3].tolist() == [0, 6, 0] and y[3].tolist() == [6, 7, IGNORE]  # short: padded
    rng = np.random.default_rng(0)
    strided = window_starts([[0, *range(1, 101)]], 10, 10, rng)
    starts = strided[:, 1]
    assert (np.diff(starts) == 10).all() and 0 <= starts[0] < 10 and starts[-1] <= 90
    assert window_starts(seqs, 2, 2).tolist() == [[0, 0], [0, 2], [1, 0], [2, 0], [2, 2]]


def test_wikitext_tokenizer_choice(tmp_path):
    (tmp_path / "wikitext2").mkdir()
    for name in ("wiki.test.tokens", "wiki.valid.tokens"):
        (tmp_path / "wikitext2" / name).write_text(WIKI)
    (tmp_path / "gpt2_tokenizer").symlink_to(SHIPPED / "gpt2_tokenizer")
    by_folder = load_dataset("wikitext", tmp_path, tokenizer=str(SHIPPED / "gpt2_tokenizer"))
    assert by_folder.test == load_dataset("wikitext", tmp_path).test
    with pytest.raises(DataError, match="tokenizer must be"):
        load_dataset("wikitext", tmp_path, tokenizer="no-such-tokenizer")
