"""Small raw files in the exact published layouts of MOOCs, LSApp and Amazon Reviews.

Every user gets a distinctive first event (target/app/category `first[u]`), so a test can tell
which user a processed sequence came from and check that no user lands in two splits.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np

# user -> events in time order; user "short" has fewer than 15 and must be dropped
N_USERS = 12


def user_events(seed: int = 0, vocab: int = 9) -> dict[str, list[int]]:
    rng = random.Random(seed)
    events = {f"u{u}": [u] + [rng.randrange(vocab) for _ in range(14 + rng.randrange(10))]
              for u in range(N_USERS)}
    events["short"] = [99, 98, 97]  # symbols that only this user has
    return events


def _rows(events: dict[str, list[int]], seed: int = 1) -> list[tuple[str, int, int, int]]:
    """(user, symbol, timestamp, position) shuffled, as raw logs interleave users."""
    rows = [(u, s, 1_000_000 + 60 * i + 7 * k, i)
            for k, (u, seq) in enumerate(events.items()) for i, s in enumerate(seq)]
    random.Random(seed).shuffle(rows)
    return rows


def write_snap_mooc(folder: Path, events: dict[str, list[int]]) -> Path:
    """SNAP act-mooc `mooc_actions.tsv`: ACTIONID, USERID, TARGETID, TIMESTAMP (tab separated)."""
    folder.mkdir(parents=True, exist_ok=True)
    users = {u: i for i, u in enumerate(events)}
    lines = ["ACTIONID\tUSERID\tTARGETID\tTIMESTAMP"]
    lines += [f"{a}\t{users[u]}\t{s}\t{t}.0" for a, (u, s, t, _) in enumerate(_rows(events))]
    path = folder / "mooc_actions.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_jodie_mooc(folder: Path, events: dict[str, list[int]]) -> Path:
    """JODIE `mooc.csv`: user_id,item_id,timestamp,state_label,<4 feature values>."""
    folder.mkdir(parents=True, exist_ok=True)
    users = {u: i for i, u in enumerate(events)}
    rng = np.random.default_rng(0)
    lines = ["user_id,item_id,timestamp,state_label,comma_separated_list_of_features"]
    for u, s, t, _ in _rows(events):
        feats = ",".join(f"{x:.9f}" for x in rng.normal(size=4))
        lines.append(f"{users[u]},{s},{float(t - 1_000_000)},0,{feats}")
    path = folder / "mooc.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


APPS = ["Chrome", "Facebook", "Gmail", "Google Maps", "Instagram", "Messenger", "Spotify",
        "WhatsApp Messenger", "YouTube", "Yahoo Mail"]


def app_name(s: int) -> str:
    return APPS[s] if s < len(APPS) else f"App {s}"


def write_lsapp(folder: Path, events: dict[str, list[int]]) -> Path:
    """LSApp `lsapp.tsv`: user_id, session_id, timestamp, app_name, event_type; each event here
    is an "Opened" row followed by a "Closed" row of the same app one second later."""
    import datetime as dt

    folder.mkdir(parents=True, exist_ok=True)
    users = {u: i + 1 for i, u in enumerate(events)}
    lines = ["user_id\tsession_id\ttimestamp\tapp_name\tevent_type"]
    for u, s, t, i in _rows(events):
        for offset, kind in ((0, "Opened"), (1, "Closed")):
            stamp = dt.datetime.fromtimestamp(t * 30 + offset, dt.timezone.utc)
            lines.append(f"{users[u]}\t{1000 + i // 5}\t{stamp:%Y-%m-%d %H:%M:%S}\t"
                         f"{app_name(s)}\t{kind}")
    path = folder / "lsapp.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path


CATEGORIES = ["AMAZON_FASHION", "All_Beauty", "Appliances", "Arts_Crafts_and_Sewing",
              "Automotive", "Books", "CDs_and_Vinyl", "Cell_Phones_and_Accessories",
              "Clothing_Shoes_and_Jewelry", "Digital_Music"]


def category(s: int) -> str:
    return CATEGORIES[s] if s < len(CATEGORIES) else f"Category_{s}"


def write_amazon_ratings(folder: Path, events: dict[str, list[int]]) -> tuple[Path, Path]:
    """Amazon 2018 ratings-only CSV (item,user,rating,timestamp; no header) and item metadata
    JSON lines (asin, main_cat, category, ...). Items without a category are dropped."""
    folder.mkdir(parents=True, exist_ok=True)
    users = {u: f"A{i:013d}" for i, u in enumerate(events)}
    lines = [f"B{s:03d}{t % 997:06d},{users[u]},{(t % 5) + 1}.0,{t}" for u, s, t, _ in _rows(events)]
    lines.append(f"B_NO_META,{users['u0']},5.0,1")  # an item missing from the metadata
    ratings = folder / "all_csv_files.csv"
    ratings.write_text("\n".join(lines) + "\n")
    meta = []
    for _, s, t, _ in _rows(events):
        item = {"asin": f"B{s:03d}{t % 997:06d}", "title": "x", "brand": "y",
                "category": [category(s), "Sub"], "main_cat": category(s), "price": "$9.99"}
        if s == 1:  # some metadata rows carry only the category list
            item["main_cat"] = ""
        meta.append(json.dumps(item))
    metadata = folder / "All_Amazon_Meta.json"
    metadata.write_text("\n".join(meta) + "\n")
    return ratings, metadata


def write_amazon_reviews(folder: Path, events: dict[str, list[int]]) -> list[Path]:
    """Per-category 2018 review files `<Category>_5.json.gz`, one JSON object per line."""
    folder.mkdir(parents=True, exist_ok=True)
    by_cat: dict[str, list[str]] = {}
    for u, s, t, _ in _rows(events):
        review = {"overall": 5.0, "verified": True, "reviewTime": "09 4, 2015",
                  "reviewerID": f"R{u}", "asin": f"B{s:03d}", "reviewerName": "n",
                  "reviewText": "fine", "summary": "ok", "unixReviewTime": t}
        by_cat.setdefault(category(s), []).append(json.dumps(review))
    paths = []
    for cat, lines in by_cat.items():
        path = folder / f"{cat}_5.json.gz"
        with gzip.open(path, "wt") as f:
            f.write("\n".join(lines) + "\n")
        paths.append(path)
    return paths
