"""Surrogates distilled from models, kept across processes in `<SEQQ_CACHE>/surrogates/`.

Distilling one (`seqq.estimators.surrogates.distilled`) costs millions of model calls, so each
is kept: `seqq ask`, ground truth's twisted rule and sweeps all read and write here, and `seqq
cache` lists and clears the entries. An entry is keyed by a hash of the model's weights and of
the distillation's settings, never by the model's name or file: the same weights find the same
entry however they were loaded (a copied checkpoint, `authors-shakespeare`, a sweep's model),
and weights changed under an old name never read a stale one (docs/decisions.md §43).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Hashable
from pathlib import Path

import torch

from seqq.errors import CheckpointError
from seqq.models.hpyp import HPYPModel
from seqq.models.user_cache import CacheEntry, clear_folder, described, disk_size
from seqq.paths import cache_root

FORMAT = 1  # bump when the key or an entry's layout changes: old entries are then not read


def surrogates_dir() -> Path:
    return cache_root() / "surrogates"


def weights_digest(model: object) -> str | None:
    """`<class name>-<hash>` of what defines the model: the state dict of its torch module (the
    model itself, its `net` or its `model`), else the tensors among its attributes (an HPYP's
    or Markov chain's tables). None for a model with neither (a wrapper such as
    `TemperatureModel`), whose surrogates are kept only while the process runs."""
    module = next((m for m in (model, getattr(model, "net", None), getattr(model, "model", None))
                   if isinstance(m, torch.nn.Module)), None)
    tensors = (module.state_dict() if module is not None else
               {k: v for k, v in sorted(vars(model).items()) if isinstance(v, torch.Tensor)})
    if not tensors:
        return None
    digest = hashlib.sha1(type(model).__name__.encode())
    for key, value in tensors.items():
        digest.update(key.encode())
        digest.update(value.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return f"{type(model).__name__}-{digest.hexdigest()[:16]}"


def entry_path(model: object, settings: Hashable) -> Path | None:
    """Where the surrogate distilled from `model` with `settings` is kept; None where the
    model's weights cannot be hashed (`weights_digest`)."""
    weights = weights_digest(model)
    if weights is None:
        return None
    key = hashlib.sha256(repr((weights, settings, FORMAT)).encode()).hexdigest()[:16]
    return surrogates_dir() / f"distilled-{weights.split('-')[0]}-{key}.pt"


def _manifest(path: Path) -> Path:
    return path.with_suffix(".json")


def load(path: Path) -> HPYPModel | None:
    """The surrogate kept at `path`, marked `info["loaded_from"]`; None where there is none
    (or only a damaged one, which the next distillation replaces)."""
    if not _manifest(path).is_file():
        return None
    try:
        surrogate = HPYPModel.load(path)
    except (OSError, CheckpointError):
        return None
    surrogate.info["loaded_from"] = str(path)
    return surrogate


def keep(surrogate: HPYPModel, path: Path, source: str) -> None:
    """Write `surrogate` to `path`, whole or not at all (a temporary file renamed into place),
    its manifest (what it was distilled from, when) last; a cache that cannot be written
    costs only the keeping."""
    partial = path.with_suffix(f".{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        surrogate.save(partial)
        os.replace(partial, path)
        _manifest(path).write_text(json.dumps({
            "source": source, "format": FORMAT, "created": time.strftime("%Y-%m-%d %H:%M:%S")},
            indent=1))
    except OSError as e:
        print(f"seqq: cannot keep the distilled surrogate in {path.parent} ({e.strerror or e}); "
              "set SEQQ_CACHE to a writable folder", file=sys.stderr)
        partial.unlink(missing_ok=True)


def entries() -> list[CacheEntry]:
    """Every complete entry, by name."""
    folder = surrogates_dir()
    found = [described(path, _manifest(path), disk_size(path) + disk_size(_manifest(path)))
             for path in (sorted(folder.glob("distilled-*.pt")) if folder.is_dir() else [])]
    return [entry for entry in found if entry is not None]


def clear() -> int:
    """Remove every entry (and leftovers of interrupted writes); returns the bytes freed."""
    return clear_folder(surrogates_dir())
