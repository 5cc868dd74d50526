"""A model named the way a person types it (`seqq ask --model`): a registered name
(`NAMED_MODELS`), `hf:<hub name or folder>`, a GGUF file, or a checkpoint written by `seqq
train` (LSTM or HPYP), each turned into the `ModelSpec` `load_model` reads. Importing this
imports no transformers (seconds): only loading a model does."""

from __future__ import annotations

from pathlib import Path

from seqq.errors import CheckpointError, ConfigError, did_you_mean
from seqq.models.protocol import SequenceModel

NAMED_MODELS = {
    "smollm2": {"type": "smollm2"},
    "gpt2": {"type": "hf", "name_or_path": "gpt2"},
    "gpt2-medium": {"type": "hf", "name_or_path": "gpt2-medium"},
    "authors-shakespeare": {"type": "authors", "dataset": "shakespeare"},
    "authors-moocs": {"type": "authors", "dataset": "moocs"},
}


def load_named(name: str, device: str, verbose: bool = False) -> SequenceModel:
    """The model `name` names; a checkpoint is read as an LSTM's, else as an HPYP's. `verbose`
    shows a GGUF conversion's own progress."""
    from seqq.models.loading import load_model  # transformers and friends: only once asked

    if name in NAMED_MODELS:
        return load_model({**NAMED_MODELS[name], "device": device})
    if name.startswith("hf:"):
        return load_model({"type": "hf", "name_or_path": name[3:], "device": device})
    path = Path(name)
    if path.suffix.lower() == ".gguf":
        from seqq.models.lm_cache import load_gguf

        return load_gguf(path, device, verbose=verbose)
    if not path.suffix == ".pt" and not path.exists():
        raise ConfigError(f"--model {name!r} is neither a model name ({', '.join(NAMED_MODELS)}, "
                          "hf:<name>) nor a checkpoint file; "
                          + did_you_mean(name, list(NAMED_MODELS)) + "or train one with seqq train")
    try:
        return load_model({"type": "lstm", "checkpoint": str(path), "device": device})
    except CheckpointError as not_lstm:
        if not path.is_file():
            raise
        try:
            return load_model({"type": "hpyp", "checkpoint": str(path)})
        except CheckpointError:
            raise not_lstm from None


def source_of(name: str) -> str:
    """What `name` denotes, as a cache listing says where something came from: a file's
    resolved path, else the name."""
    path = Path(name)
    return str(path.resolve()) if path.is_file() else name
