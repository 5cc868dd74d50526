"""`seqq report` from results alone: merges shards, writes tables (CSV + Markdown) and every
figure its input supports (PNG + PDF)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import compose_sweep, tiny_overrides

from seqq.commands import report
from seqq.errors import ResultsError
from seqq.reports.figures import FIGURES
from seqq.reports.tables import load_results
from seqq.results.schema import KEY
from seqq.sweeps import sweep


def _run(root: Path, name: str, *extra: str) -> Path:
    overrides = tiny_overrides(root, name, *extra)
    return sweep.run(compose_sweep(overrides)) / "results"


@pytest.mark.slow
def test_report_merges_shards(tmp_path: Path, tiny_sweep: Path) -> None:
    shards = [_run(tmp_path / f"job{i}", "sharded", "sweep.shards=2", f"sweep.shard={i}")
              for i in range(2)]
    assert report.main([*map(str, shards), "--out", str(tmp_path / "merged"), "--figures",
                     "rae_vs_k_median"]) == 0
    merged = pd.read_csv(tmp_path / "merged" / "tables" / "rae_summary.csv")
    whole = pd.read_csv(tiny_sweep / "report" / "tables" / "rae_summary.csv")
    assert merged.queries.sum() == whole.queries.sum()
    assert (tmp_path / "merged" / "figures" / "rae_vs_k_median.pdf").exists()
    assert not (tmp_path / "merged" / "figures" / "rae_vs_k_mean.png").exists()
    table = load_results([*map(str, shards), *map(str, shards)])  # repeated inputs: no dupes
    assert not table.duplicated(KEY).any()


@pytest.mark.slow
def test_report_draws_every_figure(tmp_path: Path, tiny_sweep: Path) -> None:
    runs = [
        tiny_sweep / "results",
        _run(tmp_path, "budgets", "estimator=paper_and_baselines", "levels.S=[10,20,40]",
             "sweep.ks=[3]"),
        _run(tmp_path, "temps", "sweep.temperatures=[0.5,1.0]", "sweep.ks=[3]",
             "levels.S=[10]"),
        _run(tmp_path, "pairs", "query=a_before_b", "estimator=importance", "sweep.ks=[2,4]",
             "levels.S=[10]", "sweep.ground_truth=false"),
        _run(tmp_path, "coverage", "query=event_at", "estimator=coverage", "sweep.ks=[3]",
             "levels.S=[0]", "sweep.ground_truth=false"),
        _run(tmp_path, "mixture", "preset=case_study", "sweep.ks=[4]", "levels.S=[10]",
             "sweep.mixture.per_share=3", "sweep.mixture.shares=[0.0,0.5,1.0]",
             "query.a=[1,2]", "query.b=[3,4]"),
        _run(tmp_path, "large_lm", "estimator=large_lm", "levels.S=[10,20]", "sweep.ks=[3]"),
    ]
    out = tmp_path / "report"
    assert report.main([*map(str, runs), "--out", str(out)]) == 0
    figures = {p.stem for p in (out / "figures").glob("*.png")}
    for name in FIGURES:
        assert any(f.startswith(name) for f in figures), name
        assert all((out / "figures" / f"{f}.pdf").exists() for f in figures)
    for table in ("rae_summary", "large_lm", "unaccounted"):
        assert (out / "tables" / f"{table}.csv").exists() and (out / "tables" / f"{table}.md")
    summary = (out / "summary.md").read_text()
    assert "synthetic stand-in" in summary
    assert "## Table 2" in summary and "## Fig. 14" in summary
    for png in (out / "figures").glob("*.png"):
        assert f"](figures/{png.name})" in summary


def test_report_rejects_unknown_figures_and_empty_input(tmp_path: Path, tiny_sweep: Path) -> None:
    with pytest.raises(ValueError, match="unknown figures"):
        report.main([str(tiny_sweep / "results"), "--out", str(tmp_path), "--figures", "nope"])
    with pytest.raises(ResultsError, match="no result parts"):
        report.main([str(tmp_path)])
