"""seqq's user cache: one owner per kind of entry (converted models, distilled surrogates), a
distilled surrogate keyed by its model's weights, and `seqq cache` listing and clearing both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from oracles import random_markov, tiny_lstm

from seqq.commands import cli
from seqq.estimators import surrogates
from seqq.estimators.surrogates import distilled, model_symbols
from seqq.models import TemperatureModel, surrogate_cache
from seqq.models.hpyp import HPYPModel


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SEQQ_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _distil(model, **options) -> HPYPModel | None:
    vocab, bos = model_symbols(model)
    return distilled(model, vocab, bos, symbols=2_000, starts=[[0], [1]], **options)


def test_the_same_weights_find_the_same_surrogate_and_others_do_not(cache: Path,
                                                                     monkeypatch) -> None:
    """Kept under a hash of the weights, not the model object or its name: a fresh copy of
    the same weights loads it without sampling; other weights, or other settings, do not."""
    calls = []
    real = surrogates.distill_surrogate
    monkeypatch.setattr(surrogates, "distill_surrogate",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    first = _distil(tiny_lstm(), source="tiny")
    again = _distil(tiny_lstm())
    assert calls == [1] and "loaded_from" in again.info and "loaded_from" not in first.info
    assert torch.equal(again.log_table, first.log_table)
    assert _distil(tiny_lstm(seed=1), only_cached=True) is None
    assert _distil(tiny_lstm(), seed=1, only_cached=True) is None
    (entry,) = surrogate_cache.entries()
    assert entry.path.parent == cache / "surrogates" and entry.source == "tiny"
    assert entry.size_bytes == entry.path.stat().st_size + entry.path.with_suffix(
        ".json").stat().st_size


def test_weights_are_hashed_whatever_holds_them() -> None:
    lstm = tiny_lstm()
    assert surrogate_cache.weights_digest(lstm) == surrogate_cache.weights_digest(tiny_lstm())
    assert surrogate_cache.weights_digest(lstm) != surrogate_cache.weights_digest(
        tiny_lstm(seed=1))
    markov = random_markov(4, 1, seed=0)  # no torch module: its tables
    assert surrogate_cache.weights_digest(markov).startswith("MarkovModel-")
    assert surrogate_cache.weights_digest(markov) != surrogate_cache.weights_digest(
        random_markov(4, 1, seed=1))
    assert surrogate_cache.weights_digest(TemperatureModel(lstm, 2.0)) is None


def test_a_damaged_entry_is_distilled_again(cache: Path) -> None:
    first = _distil(tiny_lstm())
    (entry,) = surrogate_cache.entries()
    entry.path.write_bytes(b"not a checkpoint")
    again = _distil(tiny_lstm())
    assert "loaded_from" not in again.info and torch.equal(again.log_table, first.log_table)
    assert surrogate_cache.load(entry.path) is not None  # written again, whole


def test_seqq_cache_lists_and_clears_models_and_surrogates(cache: Path, capsys) -> None:
    model = cache / "models" / "Tiny-0123456789ab"  # as lm_cache writes a conversion
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"0" * 1500)
    (model / "seqq.json").write_text(json.dumps({"source": "/x/tiny.gguf",
                                                 "created": "2026-01-02 03:04:05"}))
    (cache / "models" / ".Tiny-0123456789ab.7.partial").mkdir()  # an interrupted one: not listed
    _distil(tiny_lstm(), source="tiny.pt")
    assert cli.main(["cache"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{cache} (SEQQ_CACHE moves it):"
    assert lines[1].startswith("  models/Tiny-0123456789ab  1.6 kB  from /x/tiny.gguf "
                               "(2026-01-02 03:04:05)")
    assert lines[2].startswith("  surrogates/distilled-LSTMModel-") and " from tiny.pt (" in (
        lines[2])
    assert lines[3].startswith("1 model, 1 surrogate, ") and len(lines) == 4
    assert cli.main(["cache", "--clear"]) == 0
    assert capsys.readouterr().out.startswith(f"removed 1 model, 1 surrogate from {cache} (")
    assert not (cache / "models").exists() and not (cache / "surrogates").exists()
    assert cli.main(["cache"]) == 0
    assert capsys.readouterr().out == f"nothing cached in {cache} (SEQQ_CACHE moves it)\n"


def test_a_gguf_files_tokenizer_is_read_from_its_conversion(cache: Path, tmp_path: Path) -> None:
    """Text datasets tokenised for a GGUF model read the tokenizer its conversion saved (a
    fraction of a second) instead of building it from the file (seconds): here the file is not
    a GGUF file at all, so only the conversion can answer."""
    from conftest import REPO

    from seqq.data.tokenizers import gguf_tokenizer, gpt2_tokenizer
    from seqq.paths import CONVERSION_MANIFEST, gguf_conversion

    gguf_file = tmp_path / "Tiny.gguf"
    gguf_file.write_bytes(b"not a gguf file")
    with pytest.raises(Exception):  # noqa: B017  (whatever transformers raises on garbage)
        gguf_tokenizer(gguf_file)
    converted = gguf_conversion(gguf_file)
    gpt2_tokenizer(REPO / "data").save_pretrained(converted)
    with pytest.raises(Exception):  # noqa: B017  an entry without its manifest is never read
        gguf_tokenizer(gguf_file)
    (converted / CONVERSION_MANIFEST).write_text("{}")
    assert gguf_tokenizer(gguf_file).encode(" Paris") == [6342]
    assert converted.parent == cache / "models"
