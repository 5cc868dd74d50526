"""SmolLM2-135M's tokenizer, from seqq's cache of its GGUF file's conversion (the file itself:
`seqq.paths.smollm2_file`)."""

from __future__ import annotations

from seqq.paths import smollm2_file


def smollm2_tokenizer(gguf_file: str | None = None):
    """SmolLM2's tokenizer: from seqq's cache of the converted model when it is there (a
    fraction of a second), else built from the GGUF file's metadata (seconds)."""
    from seqq.data.tokenizers import gguf_tokenizer  # imports transformers: only when asked

    return gguf_tokenizer(smollm2_file(gguf_file))
