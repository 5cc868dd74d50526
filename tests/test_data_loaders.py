"""Each loader parses small files in its real raw format into the expected sequences,
vocabulary and user-level splits."""

from __future__ import annotations

import pytest
from data_fixtures import (
    app_name,
    category,
    user_events,
    write_amazon_ratings,
    write_amazon_reviews,
    write_jodie_mooc,
    write_lsapp,
    write_snap_mooc,
)

from seqq.data import BOS, SequenceDataset, load_dataset
from seqq.errors import DataError, MissingRawData


def decoded(ds: SequenceDataset) -> dict[str, list[tuple[str, ...]]]:
    """Each split's sequences as symbol tuples, without the leading <BOS>."""
    out = {}
    for split in ("train", "valid", "test"):
        seqs = getattr(ds, split)
        assert all(s[0] == 0 for s in seqs), "every sequence starts with <BOS>"
        out[split] = [tuple(ds.vocab[t] for t in s[1:]) for s in seqs]
    return out


def check_user_split(ds: SequenceDataset, expected: dict[str, tuple[str, ...]]) -> None:
    """Every kept user appears exactly once, whole, in one split; dropped users nowhere."""
    splits = decoded(ds)
    owner = {seq: user for user, seq in expected.items()}
    seen = [owner[seq] for seqs in splits.values() for seq in seqs]  # KeyError: not a user's seq
    assert sorted(seen) == sorted(expected)
    assert all(splits[s] for s in splits), "train, valid and test are all non-empty"
    assert ds.vocab[0] == BOS
    symbols = {t for seq in expected.values() for t in seq}
    assert set(ds.vocab[1:]) == symbols


@pytest.fixture
def events() -> dict[str, list[int]]:
    return user_events()


def kept(events, name=str) -> dict[str, tuple[str, ...]]:
    return {u: tuple(name(s) for s in seq) for u, seq in events.items() if len(seq) >= 15}


@pytest.mark.parametrize("writer", [write_snap_mooc, write_jodie_mooc])
def test_moocs_formats(tmp_path, events, writer):
    writer(tmp_path / "moocs", events)
    ds = load_dataset("moocs", tmp_path)
    check_user_split(ds, kept(events))
    assert ds.vocab == [BOS, *map(str, range(12))]  # item ids in numeric order
    assert "99" not in ds.vocab  # only the dropped short user had it


def test_both_mooc_formats_give_the_same_sequences(tmp_path, events):
    write_snap_mooc(tmp_path / "a" / "moocs", events)
    write_jodie_mooc(tmp_path / "b" / "moocs", events)
    a, b = load_dataset("moocs", tmp_path / "a"), load_dataset("moocs", tmp_path / "b")
    assert a.vocab == b.vocab
    assert sorted(a.train + a.valid + a.test) == sorted(b.train + b.valid + b.test)


def test_lsapp(tmp_path, events):
    write_lsapp(tmp_path / "apps", events)
    opened = load_dataset("apps", tmp_path, event_types=["Opened"])
    check_user_split(opened, kept(events, app_name))
    every = load_dataset("apps", tmp_path)  # Opened and Closed rows: each app twice in a row
    doubled = {u: tuple(a for a in seq for _ in range(2)) for u, seq in events.items()}
    check_user_split(every, {u: tuple(map(app_name, s)) for u, s in doubled.items()
                             if len(s) >= 15})


def test_amazon_ratings_with_metadata(tmp_path, events):
    write_amazon_ratings(tmp_path / "reviews", events)
    ds = load_dataset("reviews", tmp_path)
    check_user_split(ds, kept(events, category))
    assert ds.vocab[1:] == sorted(ds.vocab[1:])


def test_amazon_per_category_review_files(tmp_path, events):
    write_amazon_reviews(tmp_path / "reviews", events)
    ds = load_dataset("reviews", tmp_path)
    check_user_split(ds, kept(events, category))


def test_min_events_and_split_options(tmp_path, events):
    write_snap_mooc(tmp_path / "moocs", events)
    ds = load_dataset("moocs", tmp_path, min_events=1, fractions=[0.5, 0.25, 0.25], seed=3)
    assert len(ds.train + ds.valid + ds.test) == len(events)
    assert "99" in ds.vocab
    other = load_dataset("moocs", tmp_path, min_events=1, fractions=[0.5, 0.25, 0.25], seed=4)
    assert ds.test != other.test  # the split seed matters


def test_bad_format_and_options(tmp_path):
    (tmp_path / "moocs").mkdir()
    (tmp_path / "moocs" / "mooc.csv").write_text("a,b,c\n1,2,3\n")
    with pytest.raises(DataError, match="neither SNAP"):
        load_dataset("moocs", tmp_path)
    with pytest.raises(DataError, match="bad options"):
        load_dataset("moocs", tmp_path, colour="red")
    with pytest.raises(DataError, match="unknown dataset"):
        load_dataset("imagenet", tmp_path)


@pytest.mark.parametrize("name, hint, options", [
    ("moocs", "mooc_actions.tsv", {}), ("apps", "lsapp.tsv", {}),
    ("reviews", "all_csv_files.csv", {}),
    # seqq ships tiny Shakespeare and WikiText-2's test/valid splits: only other files are missing
    ("shakespeare", "shakespeare_input.txt", {"file": "shakespeare_input.txt"}),
    ("wikitext", "wiki.train.tokens", {"test_file": "wiki.train.tokens"})])
def test_missing_raw_files_say_what_to_put_where(tmp_path, name, hint, options):
    with pytest.raises(MissingRawData) as info:
        load_dataset(name, tmp_path, **options)
    message = str(info.value)
    assert hint in message and str(tmp_path) in message and "download" in message
    assert "\n" not in message


def test_shipped_text_is_found_under_any_root_and_a_users_copy_wins(tmp_path):
    shipped = load_dataset("shakespeare", tmp_path)  # nothing under the root: the shipped text
    assert shipped.stats["characters"] == 1_115_394
    assert list((tmp_path / "cache").glob("shakespeare-*.npz"))  # caches go under the root
    (tmp_path / "shakespeare").mkdir()
    (tmp_path / "shakespeare" / "tinyshakespeare_input.txt").write_text("to be or not " * 800)
    mine = load_dataset("shakespeare", tmp_path)
    assert mine.stats["characters"] == 13 * 800 and mine.vocab_size == 1 + len(set("to be rn"))


def test_cache_prepares_once_and_notices_edits(tmp_path, events, monkeypatch):
    import seqq.data.events as ev

    path = write_snap_mooc(tmp_path / "moocs", events)
    first = load_dataset("moocs", tmp_path)
    assert len(list((tmp_path / "cache").glob("moocs-*.npz"))) == 1
    monkeypatch.setattr(ev, "_read_mooc", lambda p: pytest.fail("cache not used"))
    again = load_dataset("moocs", tmp_path)
    assert (again.vocab, again.train, again.test) == (first.vocab, first.train, first.test)
    monkeypatch.undo()
    path.write_text(path.read_text().replace("\t0\t", "\t5\t", 3))  # an edited raw file
    load_dataset("moocs", tmp_path)
    assert len(list((tmp_path / "cache").glob("moocs-*.npz"))) == 2


def test_corrupt_cache_is_rebuilt(tmp_path, events):
    write_snap_mooc(tmp_path / "moocs", events)
    first = load_dataset("moocs", tmp_path)
    (cache,) = (tmp_path / "cache").glob("moocs-*.npz")
    cache.write_bytes(b"garbage")
    assert load_dataset("moocs", tmp_path).train == first.train



def test_event_windows_are_15_events_after_bos(tmp_path, events):
    from seqq.data.windows import make_batch, window_starts

    write_snap_mooc(tmp_path / "moocs", events)
    ds = load_dataset("moocs", tmp_path)
    seq = ds.train[0]
    pairs = window_starts([seq], 15, 1)
    assert len(pairs) == len(seq) - 15  # stride 1 over len(seq) - 1 events
    x, y = make_batch([seq], pairs, 15, bos=0)
    assert x[0].tolist() == seq[:15] and y[0].tolist() == seq[1:16]
    assert x[-1].tolist() == [0, *seq[-15:-1]] and y[-1].tolist() == seq[-15:]
