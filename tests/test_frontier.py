"""The estimator frontier (`make fig-frontier`): preset, winners table and figure."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import compose_sweep, tiny_overrides

from seqq.estimators import METHODS
from seqq.reports import frontier
from seqq.reports.build import build_report
from seqq.sweeps import sweep
from seqq.sweeps.method_runs import Surrogate, method_runs


def _row(method: str, K: int, level: int, rae: float, calls: int, history: int) -> dict:
    failed = math.isnan(rae)
    return dict(dataset="d", model="m", query="hitting_time", budget_rule="hybrid",
                synthetic=False, histories="test", temperature=1.0, method=method, K=K,
                budget_level=level, rae=rae, model_calls=calls, truth_log=-2.0,
                estimate=math.nan if failed else 0.1, history_id=history)


def test_winners_name_the_best_method_and_its_ratio_to_the_hybrid():
    rows = []
    for h, (hyb, imp, beam) in enumerate([(0.2, 0.05, 0.5), (0.4, 0.1, math.nan),
                                          (0.3, 0.2, 0.6)]):
        rows += [_row("hybrid", 3, 10, hyb, 30, h), _row("importance", 3, 10, imp, 29, h),
                 _row("beam", 3, 10, beam, 20, h)]
        rows += [_row("hybrid", 3, 100, hyb / 10, 300, h),
                 _row("importance", 3, 100, imp * 2, 299, h)]
    results = pd.DataFrame(rows)
    points = frontier.points(results).set_index(["budget_level", "method"])
    assert points.loc[(10, "beam"), "failed"] == 1  # a failed query scores RAE 1
    assert points.loc[(10, "beam"), "median_rae"] == pytest.approx(0.6)
    assert points.loc[(10, "hybrid"), "calls"] == 30
    table = frontier.winners(results).set_index("S")
    assert table.loc[10, "best_other"] == "importance" and table.loc[10, "winner"] == "importance"
    assert table.loc[10, "ratio_to_hybrid"] == pytest.approx(0.1 / 0.3)
    assert table.loc[100, "winner"] == "hybrid"
    assert table.loc[100, "ratio_to_hybrid"] == pytest.approx(0.2 / 0.03)
    mixed = results.assign(rae=results.rae.where(  # one history now favours the hybrid
        ~((results.history_id == 2) & (results.method == "importance")), 0.9))
    tie = frontier.winners(mixed).set_index("S").loc[10]
    assert tie.ratio_80_low < 1 < tie.ratio_80_high and tie.winner == frontier.TIE
    for S in (10, 100):  # a bootstrap over histories brackets the ratio of the medians
        assert table.loc[S, "ratio_80_low"] <= table.loc[S, "ratio_to_hybrid"]
        assert table.loc[S, "ratio_80_high"] >= table.loc[S, "ratio_to_hybrid"]


@pytest.mark.parametrize("low, high, named", [(0.2, 0.9, "importance"), (1.1, 3.0, "hybrid"),
                                               (0.5, 1.5, frontier.TIE), (1.0, 2.0, frontier.TIE)])
def test_a_winner_is_named_only_where_the_ratios_interval_excludes_one(low, high, named):
    assert frontier.winner("importance", low, high) == named


def test_the_ratio_interval_resamples_whole_histories():
    """Two histories, each with three repeats: one where the method is 10× better than the
    hybrid, one where it is equal. Resampling histories (not runs) gives ratios 0.1 and 1 only
    as the ends of the interval; an identical method gives exactly 1."""
    rows = [_row(m, 3, 10, rae, 30, h) | {"repeat": r, "label": "q"}
            for h, (hyb, imp) in enumerate([(0.5, 0.05), (0.2, 0.2)])
            for r in range(3) for m, rae in (("hybrid", hyb), ("importance", imp))]
    cell = pd.DataFrame(rows)
    low, high = frontier.ratio_interval(cell, "importance")
    assert low == pytest.approx(0.1) and high == pytest.approx(1.0)
    same = cell.assign(rae=cell.groupby(["history_id", "repeat"]).rae.transform("first"))
    assert frontier.ratio_interval(same, "importance") == (1.0, 1.0)


def test_preset_runs_every_budgeted_method_at_the_hybrids_budgets():
    cfg = compose_sweep(["preset=frontier", "dataset=shakespeare", "model=authors"])
    runs = {r.label: r for r in method_runs(cfg)}
    assert list(runs)[0] == "hybrid"
    # not exact (the truth) or coverage_beam (steered by alpha), which take no budget, nor the
    # methods for unions built by parts
    assert {r.method for r in runs.values()} == {name for name, m in METHODS.items()
                                                 if m.takes_budget and not m.by_part}
    for plain in ("smc", "randomized_beam"):  # each plain and twisted, one surrogate for all
        assert runs[plain].surrogate is None
        assert runs[f"{plain}_twisted"].method == plain
        assert runs[f"{plain}_twisted"].surrogate == runs["twisted"].surrogate == Surrogate(
            "distilled", None)
    assert list(cfg.sweep.ks) == [3, 4, 7, 11] and list(cfg.levels.S) == [10, 100, 1000]
    assert cfg.sweep.repeats == 3  # medians over three seeds per query
    assert cfg.ground_truth.exact_max_calls >= 1 + 67 + 67**2 + 67**3  # exact at K ≤ 4, V = 68
    paper = compose_sweep(["preset=frontier", "size=paper"])
    assert paper.sweep.histories == 1000 and paper.ground_truth.rule == "twisted"  # §43
    assert paper.sweep.repeats == 1
    assert paper.ground_truth.exact_max_calls >= 1 + 97 + 97**2 + 97**3  # and V = 98


@pytest.mark.slow
def test_report_draws_the_frontier_and_writes_the_table(tmp_path):
    """A tiny frontier sweep (Markov model, two budgets) through `seqq report`."""
    cfg = compose_sweep(tiny_overrides(tmp_path, "frontier", "preset=frontier",
                                       "estimator.methods=[hybrid,importance,beam]"))
    folder = sweep.run(cfg)
    report = build_report([folder / "results"], tmp_path / "report", figures=["frontier"])
    assert (report / "figures" / "frontier.png").stat().st_size > 0
    table = pd.read_csv(report / "tables" / "frontier.csv")
    assert len(table) == 2 * 2  # (K = 3, 5) × (S = 10, 30)
    assert set(table.best_other) <= {"importance", "beam"} and (table.ratio_to_hybrid > 0).all()
    assert "Estimator frontier" in (report / "summary.md").read_text()
