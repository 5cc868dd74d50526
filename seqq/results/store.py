"""A crash-safe table made of Parquet part files: the results store and the ground-truth cache.

Each completed unit of work becomes one part, written to a temporary file and moved into place
with `os.replace`, so a killed process leaves either a whole part or none. Readers merge every
part and keep the first row per key, so re-running a finished unit (or merging the shards of a
SLURM array) never duplicates rows.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from seqq.results import schema

PART_SUFFIX = ".parquet"
# values renamed since parts were first written, mapped as parts are read (here only, so every
# reader sees the new ones): an estimated truth was a "surrogate" before issue 60, a word kept
# for the twisting model; `truth_kind` in results, `kind` in the ground-truth cache
RENAMED_VALUES = {"truth_kind": {"surrogate": "estimated"}, "kind": {"surrogate": "estimated"}}


def safe_name(text: str) -> str:
    """A file-name-safe rendering of a part name."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)


def part_files(root: str | Path) -> list[Path]:
    """Every finished part under `root` (a part file or a directory searched recursively)."""
    root = Path(root)
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob(f"*{PART_SUFFIX}") if not p.name.startswith("."))


def _listed(paths: str | Path | Iterable[str | Path]) -> list[str | Path]:
    """One path or several: a single string is one path, not its characters (read from "/"
    on, `rglob` would search the whole disk)."""
    return [paths] if isinstance(paths, (str, Path)) else list(paths)


def read_parts(paths: str | Path | Iterable[str | Path],
               key: Sequence[str] | None = None) -> pd.DataFrame:
    """Concatenate part files (and directories of them); drop repeated keys, keeping the first."""
    paths = _listed(paths)
    files = [f for p in paths for f in part_files(p)]
    frames = [pd.read_parquet(f) for f in files]
    for file, frame in zip(files, frames, strict=True):
        for column, renamed in RENAMED_VALUES.items():
            if column in frame.columns:
                frame[column] = frame[column].replace(renamed)
        for column, value in schema.KEY_DEFAULTS.items():
            if column in (key or ()) and column not in frame.columns:
                frame[column] = value  # a part written before this key column existed
        missing = [k for k in key or () if k not in frame.columns]
        if missing:
            raise ValueError(f"{file} lacks the key columns {missing}: it was written by "
                             "another version of seqq or is not its results; write new results "
                             "to a fresh folder (e.g. another sweep.name)")
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame()
    table = pd.concat(frames, ignore_index=True)
    if key:
        table = table.drop_duplicates(subset=list(key), keep="first", ignore_index=True)
    return table


def read_results(paths: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """The results table stored under `paths` (a part file or folder, or several, e.g. one per
    SLURM job), one row per `schema.KEY`, in the schema's columns."""
    paths = _listed(paths)
    table = read_parts(paths, schema.KEY)
    if table.empty:
        raise FileNotFoundError(f"no result parts (*{PART_SUFFIX}) under "
                                f"{', '.join(map(str, paths))}")
    return schema.conform(table)


class PartStore:
    """A directory of Parquet parts with a unique key per row."""

    def __init__(self, root: str | Path, key: Sequence[str]):
        self.root, self.key = Path(root), list(key)
        self.root.mkdir(parents=True, exist_ok=True)

    def read(self) -> pd.DataFrame:
        return read_parts([self.root], self.key)

    def keys(self) -> set[tuple]:
        table = self.read()
        if table.empty:
            return set()
        return set(table[self.key].itertuples(index=False, name=None))

    def write(self, rows: pd.DataFrame, name: str) -> Path:
        """Write `rows` as part `name`, atomically; a part of that name is replaced."""
        missing = [k for k in self.key if k not in rows.columns]
        if missing:
            raise ValueError(f"rows lack key columns {missing}")
        final = self.root / f"{safe_name(name)}{PART_SUFFIX}"
        tmp = self.root / f".{final.name}.{uuid.uuid4().hex}.tmp"
        rows.to_parquet(tmp, index=False)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        return final
