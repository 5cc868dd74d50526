"""seqq's user cache: where it is (`SEQQ_CACHE`) and what one entry in it is. Two modules own
its folders: `lm_cache` (language models converted from GGUF files, `models/`) and
`surrogate_cache` (surrogates distilled from models, `surrogates/`); `seqq cache` lists and
clears both."""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path


def cache_root() -> Path:
    """Where seqq caches: `SEQQ_CACHE`, else the platform's user cache directory
    (~/.cache/seqq, ~/Library/Caches/seqq, %LOCALAPPDATA%\\seqq\\Cache)."""
    given = os.environ.get("SEQQ_CACHE", "").strip()
    if given:
        return Path(given).expanduser()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "seqq" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "seqq"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seqq"


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
