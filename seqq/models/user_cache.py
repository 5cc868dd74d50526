"""What one entry in seqq's user cache is (where the cache is: `seqq.paths.cache_root`). Two
modules own its folders: `lm_cache` (language models converted from GGUF files, `models/`) and
`surrogate_cache` (surrogates distilled from models, `surrogates/`); `seqq cache` lists and
clears both."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CacheEntry:
    """One thing in the cache: its file or folder, what it was made from, its size, when."""

    path: Path
    source: str
    size_bytes: int
    created: str


def disk_size(path: Path) -> int:
    """Bytes of a file, or of every file under a folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def described(path: Path, manifest: Path, size_bytes: int) -> CacheEntry | None:
    """The entry at `path` as the manifest its owner wrote last says; None while there is no
    manifest (an entry being written, or one whose writing was interrupted)."""
    if not manifest.is_file():
        return None
    try:
        info = json.loads(manifest.read_text())
    except (OSError, ValueError):
        info = {}
    return CacheEntry(path, str(info.get("source", "?")), size_bytes,
                      str(info.get("created", "?")))


def clear_folder(folder: Path) -> int:
    """Remove one owner's folder of entries; returns the bytes freed."""
    if not folder.is_dir():
        return 0
    freed = disk_size(folder)
    shutil.rmtree(folder)
    return freed
