"""Datasets prepared once from their raw files, their arrays kept under `<root>/cache/`.

The key hashes the raw files' contents, the loader's options and a format version: editing a
raw file or changing an option prepares the data again, and nothing else does.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from seqq.data.base import SequenceDataset

FORMAT_VERSION = 1
SPLITS = ("train", "valid", "test")


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, streamed so multi-GB raw files need no memory."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def prepared_key(name: str, raw_files: Sequence[Path], options: dict) -> str:
    payload = json.dumps(
        dict(name=name, version=FORMAT_VERSION, options=options,
             files=sorted((p.name, file_digest(p)) for p in raw_files)),
        sort_keys=True, default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def _save(path: Path, ds: SequenceDataset) -> None:
    arrays: dict[str, np.ndarray] = {}
    for split in SPLITS:
        seqs = getattr(ds, split)
        arrays[f"{split}_lengths"] = np.array([len(s) for s in seqs], dtype=np.int64)
        arrays[f"{split}_tokens"] = np.array([t for s in seqs for t in s], dtype=np.int32)
    meta = dict(name=ds.name, vocab=ds.vocab, synthetic=ds.synthetic,
                description=ds.description, stats=ds.stats)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)  # atomic: a crash never leaves a half-written file behind


def _load(path: Path) -> SequenceDataset:
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(z["meta"].tobytes().decode())
        splits = {}
        for split in SPLITS:
            tokens = z[f"{split}_tokens"].astype(np.int64)
            cuts = np.cumsum(z[f"{split}_lengths"])[:-1]
            splits[split] = [a.tolist() for a in np.split(tokens, cuts)] if len(tokens) else []
    return SequenceDataset(**meta, **splits)


def prepared(root: Path, name: str, raw_files: Sequence[Path], options: dict,
           build: Callable[[], SequenceDataset]) -> SequenceDataset:
    """The dataset as prepared before when its key matches, else `build()` it and keep it."""
    path = root / "cache" / f"{name}-{prepared_key(name, raw_files, options)}.npz"
    if path.exists():
        try:
            return _load(path)
        except (OSError, ValueError, KeyError):
            path.unlink(missing_ok=True)  # unreadable: prepare it again below
    ds = build()
    _save(path, ds)
    return ds
