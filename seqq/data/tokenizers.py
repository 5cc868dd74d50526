"""Tokenizers that turn text into a model's token ids, found without any network access.

GPT-2's comes from the files shipped in `seqq/resources/gpt2_tokenizer/` (or a copy under the data
root); SmolLM2's from its GGUF file (`seqq.paths.smollm2_file`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from seqq.data.base import require
from seqq.errors import DataError
from seqq.paths import CONVERSION_MANIFEST, find_data, gguf_conversion

GPT2_FILES = ("vocab.json", "merges.txt")
GPT2_SOURCE = "openai/whisper assets/gpt2"
GPT2_VOCAB_SIZE = 50257


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


def folder_tokenizer(folder: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def gguf_tokenizer(gguf_file: Path):
    """The tokenizer a GGUF file holds (SmolLM2's): from seqq's cache of the file's conversion
    when there is one (a fraction of a second), else built from the file's metadata (seconds)."""
    from transformers import AutoTokenizer

    converted = gguf_conversion(gguf_file)
    if (converted / CONVERSION_MANIFEST).is_file():
        with contextlib.suppress(OSError, ValueError):
            return AutoTokenizer.from_pretrained(str(converted), local_files_only=True)
    return AutoTokenizer.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name)
