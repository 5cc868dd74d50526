"""summary.md and the tables say what was computed and never pool panels: N, K, what S costs,
the ground-truth rule, RAE's definition, the KL table, Table 2 only for its layout, and the
unaccounted probability exactly as plotted."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from oracles import random_markov
from result_frames import RULE, panel_rows, results

import seqq
from seqq import queries as Q
from seqq.reports import tables
from seqq.reports.build import RAE_DEFINITION, write_report
from seqq.reports.figures import FIGURES
from seqq.reports.tables import OTHER_REASON, flag_reason
from seqq.results.schema import BUDGET_FROM_SAMPLES


def _summary(table: pd.DataFrame, out: Path, **kw) -> str:
    return (write_report(table, out, figures=[], **kw) / "summary.md").read_text()


def test_summary_says_what_was_computed(tmp_path: Path) -> None:
    text = _summary(results(panel_rows(histories=7, ks=(3, 4, 5, 6), levels=(10, 100))),
                    tmp_path)
    overview = text[text.index("## What was computed"):text.index("## RAE per panel")]
    assert ("| toy | m | 1 | hitting_time | hybrid | test | 7 | 28 | 3–6 | 10, 100 | "
            "beam, hybrid, importance | 28 exact |") in overview
    assert "N = 7 histories · K = 3, 4, 5, 6 · S = 10, 100" in text
    assert "budget: hybrid" in overview and "model calls" in overview
    assert "Mean model-call budget per query" in overview
    assert "| toy | 6 | 51 | 501 |" in overview  # 1 + S·(K − 1) calls at K = 6
    assert RULE in overview and "relative standard error is below 0.05" in RULE
    assert RAE_DEFINITION in overview and "|p̂ − p| / p" in RAE_DEFINITION


def test_summary_keeps_two_models_apart(tmp_path: Path) -> None:
    text = _summary(results(panel_rows(model="lstm@1"), panel_rows(model="gpt2")), tmp_path)
    assert "### toy · gpt2" in text and "### toy · lstm@1" in text


def test_table2_only_for_the_large_lm_layout(tmp_path: Path) -> None:
    lstm = results(panel_rows(model="lstm@abc"))  # hybrid, importance, beam: Fig. 3's layout
    assert "Table 2" not in _summary(lstm, tmp_path / "lstm")
    assert not (tmp_path / "lstm" / "tables" / "large_lm.md").exists()
    large = results(panel_rows(model="gpt2", methods=("importance", "beam", "uniform"),
                               budget_rule=BUDGET_FROM_SAMPLES, levels=(100,)))
    assert "## Table 2" in _summary(large, tmp_path / "lm")
    table = pd.read_csv(tmp_path / "lm" / "tables" / "large_lm.csv")
    assert {"importance", "beam", "uniform", "entropy", "entropy_pct"} <= set(table.columns)


def test_unaccounted_table_is_what_the_figure_plots(tmp_path: Path) -> None:
    def estimate(method: str, level: int, k: int, h: int) -> float:
        return 0.2 + 0.01 * h + 0.02 * k

    table = results(panel_rows(query="a_before_b", methods=("importance",), levels=(100,),
                               labels=("ab", "ba"), estimate=estimate, truth_kind="none",
                               budget_rule=BUDGET_FROM_SAMPLES, ks=(2, 4, 6)))
    text = _summary(table, tmp_path)
    assert "## Fig. 14" in text and "ci99_low" in text
    stats = pd.read_csv(tmp_path / "tables" / "unaccounted.csv")
    (fig,) = FIGURES["unaccounted_vs_k"](table).values()
    (ax,) = [a for a in fig.axes if a.get_title()]
    (curve,) = ax.get_lines()
    band = ax.collections[0].get_paths()[0].vertices
    plt.close(fig)
    assert np.allclose(curve.get_ydata(), stats["mean"])
    assert np.allclose(band[:, 1].min(), stats.ci99_low.min())
    assert np.allclose(band[:, 1].max(), stats.ci99_high.max())
    assert (stats.histories == 8).all() and (stats["sem"] > 0).all()
    assert np.allclose(stats.ci99_high - stats["mean"], tables.Z99 * stats["sem"])


def test_summary_names_figures_it_could_not_draw(tmp_path: Path) -> None:
    out = write_report(results(panel_rows(ks=(3,))), tmp_path, figures=["rae_vs_k_median"])
    assert "`rae_vs_k_median` not drawn: it needs the RAE at two or more horizons K" in (
        out / "summary.md").read_text()


def test_unknown_figure_names_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown figures"):
        write_report(results(panel_rows()), tmp_path, figures=["nope"])


def test_panel_names_spell_out_what_differs_within_a_dataset() -> None:
    own_models = results(panel_rows(dataset="x", model="lstm@1"),
                         panel_rows(dataset="y", model="lstm@2"))
    assert sorted(p.title for p in tables.panels(own_models).values()) == ["x", "y"]
    two_models = results(panel_rows(dataset="x", model="lstm@1"),
                         panel_rows(dataset="x", model="gpt2"), panel_rows(dataset="y"))
    names = sorted((p.title, p.slug) for p in tables.panels(two_models).values())
    assert names == [("x · gpt2", "x_gpt2"), ("x · lstm@1", "x_lstm_1"), ("y · m", "y_m")]


def test_markdown_cells() -> None:
    table = pd.DataFrame({"calls": [19001.0, np.nan], "rae": [0.123456, 2.0], "m": ["a", "b"]})
    assert tables.to_markdown(table).splitlines()[2:] == ["| 19001 | 0.1235 | a |",
                                                          "| – | 2 | b |"]


def test_summary_states_the_truths_noise_floor_and_marks_medians_below_it(tmp_path: Path) -> None:
    """Against estimated truths with 20 % relative SE, a median RAE of ~2 % cannot be told from
    a perfect estimator's (floor 0.674·0.2 = 0.135): it is marked; a 60 % one is not."""
    rows = panel_rows(truth_kind="estimated", ks=(3,), levels=(10,),
                      estimate=lambda m, s, k, h: 0.05 * (1.02 if m == "hybrid" else 1.6))
    table = results(rows).assign(truth_rel_stderr=0.2)
    text = _summary(table, tmp_path)
    assert "noise floor" in text and "K=3: 0.13" in text
    median = text[text.index("**median RAE**"):text.index("**mean RAE**")]
    assert "| hybrid | 3 | 0.02† |" in median and "| importance | 3 | 0.6 |" in median


@pytest.mark.parametrize("warning, reason", [
    ("the weights are heavy-tailed (Pareto k̂ = 2.89 > 0.7), so the estimate ...", "heavy weights"),
    ("only 70 paths were drawn, too few for the interval to be trusted", "few draws"),
    ("the smc replicates disagree (relative standard error 0.63); try ...", "replicates disagree"),
    ("its 95% interval [0.00197, 1] spans a factor of 507, so the answer ...", "wide interval"),
    ("none of the 40 draws reached the query, so only p ≤ 0.09 is known", "zero draws"),
    ("all of the 40 draws reached the query, so only p ≥ 0.91 is known", "every draw hit"),
    ("the budget was too small to split into replicates, so smc gives no interval",
     "no interval"),
    ("something new", OTHER_REASON),
])
def test_each_warning_has_its_reason(warning: str, reason: str) -> None:
    assert flag_reason(warning) == reason


def test_every_warning_the_estimators_write_has_a_reason() -> None:
    """The summary's breakdown reads the estimators' own words: every warning a few small runs
    write (few draws, no interval, wide intervals, disagreeing replicates) has a reason, not
    OTHER_REASON; a new kind of warning fails here until FLAG_REASONS names it."""
    model = random_markov(V=6, seed=2)
    warnings = [e.warning for q in (Q.count(1, n=5, K=8, op=">="), Q.hitting_time(1, K=6))
                for method in ("importance", "smc", "randomized_beam", "wor")
                for budget in (30, 300)
                for e in [seqq.estimate(model, [0], q, method, budget=budget, seed=0)]
                if e.warning]
    assert len(warnings) >= 3
    assert [w for w in warnings if flag_reason(w) == OTHER_REASON] == []


def test_summary_counts_flagged_estimates_per_method(tmp_path: Path) -> None:
    table = results(panel_rows(histories=4, ks=(3,), levels=(10,)))
    flagged = (table.method == "importance") & (table.history_id < 3)
    table.loc[flagged, "warning"] = "the weights are heavy-tailed"
    table.loc[flagged & (table.history_id == 0), "warning"] = (
        "its 95% interval [0.01, 0.5] spans a factor of 50, so the answer is not known")
    text = _summary(table, tmp_path)
    assert ("Flagged estimates (their `warning` says why; treat their intervals as unreliable): "
            "importance 3 of 4 (heavy weights 2, wide interval 1)") in text
    assert "hybrid 0" not in text
    assert "| 3 of 12 |" in text  # the overview's column for the panel


def test_runs_that_drew_too_few_paths_are_counted_by_level(tmp_path: Path) -> None:
    """The few-draws flag reads no weights (issue 58), so a level that buys fewer than
    MIN_DRAWS paths flags nearly every run there: the summary counts those by level, apart
    from the flags that tell runs apart, which "800 of 800" hid (make demo)."""
    table = results(panel_rows(histories=4, ks=(3,), levels=(10, 100)))
    few = "only 9 paths were drawn, too few for the interval to be trusted"
    table.loc[(table.method == "importance") & (table.budget_level == 10), "warning"] = few
    table.loc[(table.method == "importance") & (table.budget_level == 100)
              & (table.history_id == 0), "warning"] = few
    table.loc[(table.method == "importance") & (table.budget_level == 100)
              & (table.history_id == 1), "warning"] = "the weights are heavy-tailed"
    table.loc[(table.method == "hybrid") & (table.history_id == 1), "warning"] = (
        "the weights are heavy-tailed")
    text = _summary(table, tmp_path)
    assert ("hybrid 2 of 8 (heavy weights 2); importance 1 of 3 (heavy weights 1); importance "
            "drew too few paths for an interval at S = 10 (all 4), S = 100 (1 of 4)") in text
    assert "| 3 of 19 (+5 with too few paths) |" in text
