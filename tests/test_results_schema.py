"""One results schema for the runner, the store and the reports: rows in its columns and
dtypes, keys built by column name (so a part whose columns are in another order still resumes
with the hybrid's budgets), ground truth cached as `GroundTruth`, one provenance writer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import compose_sweep, tiny_overrides
from result_frames import panel_rows

from seqq.estimators.estimate import GroundTruth
from seqq.models import MarkovModel
from seqq.results.schema import COLUMNS, KEY, to_frame
from seqq.results.store import read_parts, read_results
from seqq.sweeps import sweep
from seqq.sweeps.histories import History
from seqq.sweeps.provenance import write_provenance
from seqq.sweeps.query_specs import build_specs
from seqq.sweeps.truth_store import GroundTruthStore


def test_rows_have_the_schemas_columns_and_dtypes() -> None:
    frame = to_frame(panel_rows(histories=2, ks=(3,), levels=(10,)))
    assert tuple(frame.columns) == COLUMNS and set(KEY) <= set(COLUMNS)
    assert frame.K.dtype == "int64" and frame.truth.dtype == "float64"
    assert frame.is_lower_bound.dtype == "bool"


def test_old_parts_read_with_new_columns_missing_and_without_keys_fail(tmp_path: Path) -> None:
    frame = to_frame(panel_rows(histories=2, ks=(3,), levels=(10,)))
    frame.drop(columns=["truth_rule", "entropy"]).to_parquet(tmp_path / "old.parquet")
    table = read_results([tmp_path])
    assert tuple(table.columns) == COLUMNS
    assert (table.truth_rule == "").all() and table.entropy.isna().all()
    frame.drop(columns=["budget_rule"]).to_parquet(tmp_path / "other.parquet")
    with pytest.raises(ValueError, match=r"lacks the key columns \['budget_rule'\]"):
        read_results([tmp_path])


def test_parts_from_before_the_estimated_truth_was_named_read_as_estimated(tmp_path: Path) -> None:
    """An estimated truth was a "surrogate" before issue 60: results and ground-truth parts
    written then read as "estimated", in one place (`store.read_parts`), so resumed sweeps,
    reports and the committed truths agree with new rows."""
    frame = to_frame(panel_rows(histories=2, ks=(3,), levels=(10,), truth_kind="surrogate"))
    frame.to_parquet(tmp_path / "old.parquet")
    assert set(read_results([tmp_path]).truth_kind) == {"estimated"}
    model = MarkovModel.random(5, 1, seed=1)
    histories = [History(0, 0, 1, (0, 1), (1, 2, 3))]
    specs = build_specs(histories, [3], {"kind": "hitting_time", "a": "observed"},
                        [str(v) for v in range(5)])
    store = tmp_path / "truths"
    options = {"exact_max_calls": 0, "rule": "absolute", "s_low": 50, "s_step": 50, "s_high": 50}
    truth = GroundTruthStore(str(store), "d", "m", 1.0, options, seed=0).get(model, specs)[0]
    assert truth.kind in ("exact", "estimated")
    part = next(store.glob("*.parquet"))
    pd.read_parquet(part).assign(kind="surrogate").to_parquet(part)
    again = GroundTruthStore(str(store), "d", "m", 1.0, options, seed=0).stored()
    assert [t.kind for t in again.values()] == ["estimated"]


@pytest.mark.slow
def test_resume_takes_the_hybrids_budget_from_parts_in_any_column_order(tmp_path: Path) -> None:
    overrides = tiny_overrides(tmp_path, "resume", "estimator.methods=[hybrid,importance]",
                               "sweep.ks=[3]", "levels.S=[10]")
    results = sweep.run(compose_sweep(overrides)) / "results"
    first = read_parts([results])
    for part in results.glob("*.parquet"):  # keep the hybrid's rows, with columns reversed
        rows = pd.read_parquet(part)
        rows = rows[rows.method == "hybrid"]
        part.unlink()
        if len(rows):
            rows[rows.columns[::-1]].to_parquet(part)
    sweep.run(compose_sweep(overrides))
    again = read_parts([results], KEY)
    query = ["history_id", "K", "label"]
    hybrid = again[again.method == "hybrid"].set_index(query).model_calls
    redone = again[again.method == "importance"].set_index(query)
    assert len(redone) == (first.method == "importance").sum()
    assert (redone.budget_calls == hybrid.reindex(redone.index)).all()


def test_ground_truth_store_returns_ground_truth_objects(tmp_path: Path) -> None:
    model = MarkovModel.random(5, 1, seed=1)
    histories = [History(i, 0, i + 1, (0, i % 5), (1, 2, 3)) for i in range(3)]
    specs = build_specs(histories, [2, 3], {"kind": "hitting_time", "a": "observed"},
                        [str(v) for v in range(5)])
    options = {"exact_max_calls": 10_000}
    first = GroundTruthStore(str(tmp_path), "d", "m", 1.0, options, seed=0).get(model, specs)
    assert all(isinstance(t, GroundTruth) and t.kind == "exact" for t in first)
    reread = GroundTruthStore(str(tmp_path), "d", "m", 1.0, options, seed=0)
    assert reread.get(model, specs) == first  # from the stored parts, not recomputed
    assert len(read_parts([tmp_path])) == len(specs)
    assert "at most 10,000 model calls" in reread.rule


def test_rows_without_ground_truth_are_marked(tmp_path: Path) -> None:
    overrides = tiny_overrides(tmp_path, "none", "estimator=importance", "sweep.ks=[3]",
                               "levels.S=[10]", "sweep.ground_truth=false")
    table = read_results([sweep.run(compose_sweep(overrides)) / "results"])
    assert (table.truth_kind == "none").all() and table.truth.isna().all()
    assert (table.truth_rule.str.startswith("none")).all()
    assert (table.budget_rule == "samples").all()
    assert all(math.isfinite(x) for x in table.estimate)


def test_one_provenance_writer_for_runs(tmp_path: Path) -> None:
    path = write_provenance(tmp_path, {"a": 1}, 7, name="run_info.json", command="seqq train",
                            scores={"accuracy": 0.5})
    record = json.loads(path.read_text())
    assert record["seed"] == 7 and record["config"] == {"a": 1}
    assert record["command"] == "seqq train" and record["scores"] == {"accuracy": 0.5}
    assert "torch" in record["versions"] and "git_commit" in record and record["host"]


def test_one_folder_given_as_a_string_is_one_path(tmp_path: Path) -> None:
    """`read_results("outputs/…/results")` reads that folder: a string iterated by character
    searched from "/" and read another package's Parquet files."""
    frame = to_frame(panel_rows(histories=2, ks=(3,), levels=(10,)))
    frame.to_parquet(tmp_path / "part.parquet")
    assert len(read_results(str(tmp_path))) == len(read_results(tmp_path)) == len(frame)
