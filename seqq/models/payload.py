"""The one file format of every trained model seqq writes: a dict of tensors and plain values,
tagged with a format name and version, saved atomically and read back with `weights_only=True`
(no pickled code), every failure a one-line `CheckpointError` that says how to make a new one."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

from seqq.errors import CheckpointError


def save_payload(path: str | Path, payload: dict) -> None:
    """Write atomically, so an interrupted save never replaces a good file with a bad one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def load_payload(path: str | Path, *, kind: str, format: str, version: int,
                 fields: Sequence[str], remake: str) -> dict:
    """The checked contents of a `kind` checkpoint (`remake`: the command that writes a new one)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{kind} checkpoint {path} not found; make one with `{remake}`")
    try:
        with warnings.catch_warnings():  # a foreign file's quirks (an unknown pickle protocol)
            warnings.simplefilter("ignore")  # end in the one-line error below, not a warning
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for truncated or foreign files
        raise CheckpointError(f"{path} is corrupt or not a seqq checkpoint ({type(e).__name__}); "
                              f"delete it and run `{remake}` again") from e
    if not isinstance(payload, dict) or payload.get("format") != format:
        raise CheckpointError(f"{path} is not a seqq {kind} checkpoint")
    missing = [f for f in fields if f not in payload]
    if missing:
        raise CheckpointError(f"{path} lacks {missing}; it is incomplete")
    if payload.get("version") != version:
        raise CheckpointError(f"{path} has {kind} checkpoint version {payload.get('version')}; "
                              f"this seqq reads version {version}")
    return payload
