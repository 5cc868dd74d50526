"""User-behaviour datasets read from their published raw formats: MOOCs, Apps, Reviews."""

from __future__ import annotations

import ast
import csv
import gzip
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pandas as pd

from seqq.data.base import (
    DEFAULT_FRACTIONS,
    SequenceDataset,
    events_to_dataset,
    parsing,
    vocab_files,
)
from seqq.data.prepared import prepared
from seqq.errors import DataError, MissingRawData

MOOC_SOURCES = ("https://snap.stanford.edu/data/act-mooc.html (mooc_actions.tsv) or "
                "http://snap.stanford.edu/jodie/mooc.csv")
LSAPP_SOURCE = "https://github.com/aliannejadi/LSApp (lsapp.tsv.gz)"
AMAZON_SOURCE = "https://nijianmo.github.io/amazon/ (Amazon Review Data 2018)"


def _open_text(path: Path):
    """Plain or gzip-compressed text, decided by the suffix as the datasets ship both."""
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(
        path, encoding="utf-8", newline="")


def _first_existing(folder: Path, names: Sequence[str]) -> Path | None:
    return next((folder / n for n in names if (folder / n).exists()), None)


def _missing(name: str, folder: Path, files: str, source: str) -> MissingRawData:
    return MissingRawData(f"{name}: raw data not found: put {files} in {folder}/ "
                          f"(download: {source})")


# --- MOOCs -------------------------------------------------------------------------------------
def _read_mooc(path: Path) -> pd.DataFrame:
    """SNAP act-mooc `mooc_actions.tsv` (ACTIONID, USERID, TARGETID, TIMESTAMP) or JODIE
    `mooc.csv` (user_id, item_id, timestamp, state_label, features...); the token is the target."""
    with parsing("moocs", path), _open_text(path) as f:
        header = f.readline()
        if header.startswith("ACTIONID"):
            df = pd.read_csv(f, sep="\t", header=None, usecols=[1, 2, 3],
                             names=["action", "user", "token", "time"])
        elif header.startswith("user_id"):
            # JODIE rows carry more feature fields than the header names, so read them raw.
            rows = [r[:3] for r in csv.reader(f) if r]
            df = pd.DataFrame(rows, columns=["user", "token", "time"])
            df["time"] = df["time"].astype(float)
        else:
            raise DataError(f"moocs: {path} is neither SNAP mooc_actions.tsv nor JODIE mooc.csv; "
                            f"replace it with the original download ({MOOC_SOURCES})")
        return df[["user", "token", "time"]]


def load_moocs(root: Path, *, file: str | None = None, min_events: int = 15,
               fractions: Sequence[float] = DEFAULT_FRACTIONS, seed: int = 0,
               vocab: str | None = None) -> SequenceDataset:
    """MOOC interaction sequences per user; 97 target types in the full data. `vocab`: a
    model's vocabulary file to take the ids from (the authors' LSTM: moocs_vocab.json)."""
    folder = root / "moocs"
    path = _first_existing(folder, [file] if file else ["mooc_actions.tsv", "mooc.csv"])
    if path is None:
        raise _missing("moocs", folder, file or "mooc_actions.tsv or mooc.csv", MOOC_SOURCES)
    options = dict(min_events=min_events, fractions=list(fractions), seed=seed, vocab=vocab)
    return prepared(root, "moocs", [path, *vocab_files(vocab)], options, lambda: events_to_dataset(
        _read_mooc(path), "moocs", min_events=min_events, fractions=fractions, seed=seed,
        description=f"MOOC actions ({path.name}), users with >= {min_events} events",
        vocab=vocab))


# --- Apps --------------------------------------------------------------------------------------
LSAPP_COLUMNS = ["user_id", "session_id", "timestamp", "app_name", "event_type"]


def _read_lsapp(path: Path, event_types: Sequence[str] | None) -> pd.DataFrame:
    with parsing("apps", path):
        df = pd.read_csv(path, sep="\t", dtype=str)
        if list(df.columns) != LSAPP_COLUMNS:
            raise DataError(f"apps: {path} has columns {list(df.columns)[:5]}, not LSApp's "
                            f"{LSAPP_COLUMNS}; replace it with the original download "
                            f"({LSAPP_SOURCE})")
        if event_types:
            df = df[df["event_type"].isin(list(event_types))]
        return pd.DataFrame({"user": df["user_id"], "token": df["app_name"],
                             "time": pd.to_datetime(df["timestamp"])})


def load_apps(root: Path, *, file: str | None = None, event_types: Sequence[str] | None = None,
              min_events: int = 15, fractions: Sequence[float] = DEFAULT_FRACTIONS,
              seed: int = 0) -> SequenceDataset:
    """LSApp app-usage sequences; every record counts unless `event_types` narrows them
    (e.g. ["Opened"])."""
    folder = root / "apps"
    path = _first_existing(folder, [file] if file else ["lsapp.tsv", "lsapp.tsv.gz"])
    if path is None:
        raise _missing("apps", folder, file or "lsapp.tsv (or lsapp.tsv.gz)", LSAPP_SOURCE)
    types = list(event_types) if event_types else None
    options = dict(event_types=types, min_events=min_events, fractions=list(fractions), seed=seed)
    return prepared(root, "apps", [path], options, lambda: events_to_dataset(
        _read_lsapp(path, types), "apps", min_events=min_events, fractions=fractions, seed=seed,
        description=f"LSApp app usage ({path.name}), event types {types or 'all'}"))


# --- Reviews -----------------------------------------------------------------------------------
def _json_lines(path: Path) -> Iterator[dict]:
    """Amazon JSON lines; older dumps are Python literals rather than strict JSON."""
    with _open_text(path) as f:
        for line in f:
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    yield ast.literal_eval(line)


def _item_categories(path: Path, field: str) -> dict[str, str]:
    """asin → category from the 2018 metadata (`main_cat`, else the first of `category`)."""
    out: dict[str, str] = {}
    for item in _json_lines(path):
        category = item.get(field) or (item.get("category") or [None])[0]
        if item.get("asin") and category:
            out[item["asin"]] = str(category).strip()
    return out


def _read_ratings(ratings: Path, metadata: Path, field: str) -> pd.DataFrame:
    """Ratings CSV rows (item, user, rating, timestamp; no header) joined to item categories,
    read in chunks because the full file has 233M rows."""
    categories = pd.Series(_item_categories(metadata, field), dtype=object)
    with _open_text(ratings) as f:
        has_header = f.readline().lower().startswith("item,")
    parts = []
    for chunk in pd.read_csv(ratings, header=None, skiprows=int(has_header), chunksize=2_000_000,
                             names=["item", "user", "rating", "time"], dtype={0: str, 1: str}):
        chunk["token"] = chunk["item"].map(categories)
        parts.append(chunk.dropna(subset=["token"])[["user", "token", "time"]])
    return pd.concat(parts, ignore_index=True)


def _review_category(path: Path) -> str:
    """`Clothing_Shoes_and_Jewelry_5.json.gz` → `Clothing_Shoes_and_Jewelry`."""
    stem = path.name.split(".json")[0]
    return stem[:-2] if stem.endswith("_5") else stem


def _read_review_files(paths: Sequence[Path]) -> pd.DataFrame:
    rows = [(r["reviewerID"], _review_category(p), int(r["unixReviewTime"]))
            for p in paths for r in _json_lines(p)]
    return pd.DataFrame(rows, columns=["user", "token", "time"])


def load_reviews(root: Path, *, ratings: str = "all_csv_files.csv",
                 metadata: str = "All_Amazon_Meta.json", category_field: str = "main_cat",
                 min_events: int = 15, fractions: Sequence[float] = DEFAULT_FRACTIONS,
                 seed: int = 0) -> SequenceDataset:
    """Amazon review category sequences per reviewer, from either the ratings CSV plus item
    metadata, or the per-category JSON-lines review files (category = file name)."""
    folder = root / "reviews"
    ratings_path = _first_existing(folder, [ratings])
    meta_path = _first_existing(folder, [metadata, f"{metadata}.gz"])
    review_files = sorted(p for p in folder.glob("*.json*")
                          if p.name.split(".json")[-1] in ("", ".gz") and p != meta_path
                          and not p.name.startswith(("meta_", "All_Amazon_Meta")))
    options = dict(category_field=category_field, min_events=min_events,
                   fractions=list(fractions), seed=seed)
    if ratings_path is not None and meta_path is not None:
        raw = [ratings_path, meta_path]

        def read() -> pd.DataFrame:
            with parsing("reviews", ratings_path, meta_path):
                return _read_ratings(ratings_path, meta_path, category_field)
        source = f"{ratings_path.name} + {meta_path.name}"
    elif review_files:
        raw = review_files

        def read() -> pd.DataFrame:
            with parsing("reviews", *review_files):
                return _read_review_files(review_files)
        source = f"{len(review_files)} per-category review files"
    else:
        raise _missing("reviews", folder, f"{ratings} with {metadata}(.gz), or per-category "
                       "review files such as Books.json.gz", AMAZON_SOURCE)
    return prepared(root, "reviews", raw, options, lambda: events_to_dataset(
        read(), "reviews", min_events=min_events, fractions=fractions, seed=seed,
        description=f"Amazon review categories ({source}), users with >= {min_events} reviews"))
