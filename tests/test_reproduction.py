"""`seqq report --reproduction` (`make reproduction`, docs/reproduction.md): the Fig. 3 CSV per
model with its columns and RAE arithmetic, the figure, and the generated block of the doc."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import compose_sweep, tiny_overrides

from seqq.commands import report
from seqq.errors import ConfigError, ResultsError
from seqq.reports import tables
from seqq.reports.reproduction.experiments.fig3 import EXPERIMENT as FIG3
from seqq.reports.reproduction.markdown import begin, end, fmt
from seqq.reports.reproduction.panels import PAPER_METHODS, model_slug, select
from seqq.reports.reproduction.reproduce import reproduce
from seqq.reports.reproduction.stats import median_ci
from seqq.reports.tables import load_results
from seqq.sweeps import sweep

BEGIN, END = begin(FIG3.block), end(FIG3.block)
SUMMARY = f"{begin('summary')}\n{end('summary')}"
DOC = (f"# Reproduction\n\n{SUMMARY}\n\nhand-written intro\n\n{BEGIN}\nold\n{END}\n\n"
       "hand-written end\n")


def _export(results: Path, out: Path, *extra: str) -> Path:
    doc = out / "reproduction.md"
    out.mkdir(parents=True, exist_ok=True)
    if not doc.exists():
        doc.write_text(DOC)
    assert report.main([str(results), "--reproduction", str(out / "reproduction"), "--doc",
                     str(doc), "--level", "10", *extra]) == 0
    return doc


def test_export_writes_the_csv_figure_and_doc_block(tmp_path: Path, tiny_sweep: Path) -> None:
    doc = _export(tiny_sweep / "results", tmp_path)
    folder = tmp_path / "reproduction"
    csv = pd.read_csv(folder / "fig3_synthetic_reviews_markov.csv")
    assert list(csv.columns) == ["history_id", "K", "method", "S", "budget_calls", "model_calls",
                                 "estimate", "truth", "truth_kind", "truth_rel_stderr", "rae"]
    # every history at every K by each of the paper's three methods, at the one level asked for
    assert set(csv.method) == set(PAPER_METHODS) and set(csv.S) == {10}
    cells = csv.groupby("history_id").size()
    assert (cells == 3 * csv.K.nunique()).all() and len(cells) == 6
    # RAE = |estimate − truth| / truth, to the CSV's 6 significant digits
    expected = (csv.estimate - csv.truth).abs() / csv.truth
    np.testing.assert_allclose(csv.rae, expected, rtol=1e-4, atol=1e-5)
    assert set(csv.truth_kind) == {"exact"} and (csv.truth_rel_stderr == 0).all()
    # the hybrid's calls are every method's budget; no method spends more than it
    hybrid = csv[csv.method == "hybrid"].set_index(["history_id", "K"]).model_calls
    for method in ("importance", "beam"):
        rows = csv[csv.method == method].set_index(["history_id", "K"])
        assert (rows.budget_calls == hybrid.loc[rows.index]).all()
    assert (folder / "fig3_markov.png").stat().st_size > 0
    assert (folder / "fig3_markov.pdf").stat().st_size > 0
    # the block between the markers is replaced; the hand-written text around it is kept
    text = doc.read_text()
    assert "\n\nhand-written intro\n\n" + BEGIN in text and text.startswith("# Reproduction")
    assert text.endswith(END + "\n\nhand-written end\n") and "\nold\n" not in text
    block = text[text.index(BEGIN):]
    assert "N = 6 of 1000 histories" in block and "(reproduction/fig3_markov.png)" in block
    assert "[`fig3_synthetic_reviews_markov.csv`](reproduction/" in block
    # the table's medians are the CSV's
    median = csv[(csv.method == "hybrid") & (csv.K == 3)].rae.median()
    assert f"| 3 | exact | 6 | {fmt(median)} [" in block
    # the summary table at the top: Fig. 3's row written, every other experiment's by default
    summary = text[:text.index("hand-written intro")]
    assert "| Fig. 3 | synthetic_reviews (markov) | N = 6 (synthetic_reviews); K = 3, 5; S = 10 |" \
        in summary
    assert "| Table 3 | Amazon Reviews | – | blocked: needs the Reviews data" in summary
    assert summary.index("| Fig. 1 |") < summary.index("| Fig. 3 |") < summary.index("| Fig. 12 |")
    # a rerun regenerates the same files
    before = (folder / "fig3_synthetic_reviews_markov.csv").read_text(), text
    _export(tiny_sweep / "results", tmp_path)
    assert ((folder / "fig3_synthetic_reviews_markov.csv").read_text(), doc.read_text()) == before


def test_export_refuses_a_missing_level_model_or_markers(tmp_path: Path, tiny_sweep: Path) -> None:
    with pytest.raises(ResultsError, match="S = 10, 30"):
        report.main([str(tiny_sweep / "results"), "--reproduction", str(tmp_path)])  # S = 100
    with pytest.raises(ResultsError, match="authors_lstm"):
        _export(tiny_sweep / "results", tmp_path, "--models", "authors_lstm")
    bare = tmp_path / "bare.md"
    bare.write_text("# no markers\n")
    with pytest.raises(ResultsError, match="markers"):
        report.main([str(tiny_sweep / "results"), "--reproduction", str(tmp_path / "r"),
                  "--doc", str(bare), "--level", "30"])
    assert bare.read_text() == "# no markers\n"
    with pytest.raises(ConfigError, match="invalid choice: 'fig99'"):
        report.main([str(tiny_sweep / "results"), "--reproduction", str(tmp_path / "r"),
                  "--experiment", "fig99"])


def test_an_experiment_is_one_declaration(tmp_path: Path, tiny_sweep: Path) -> None:
    """Another experiment reuses every job: its own file names, its own block of the doc."""
    toy = dataclasses.replace(FIG3, name="toy", title="Toy", block="toy", levels=(10,))
    doc = tmp_path / "doc.md"
    doc.write_text(f"{begin('toy')}\n{end('toy')}\n{BEGIN}\nkept\n{END}\n")
    written = reproduce(toy, [tiny_sweep / "results"], tmp_path / "out", doc)
    assert [p.name for p in written] == ["toy_synthetic_reviews_markov.csv", "toy_markov.png",
                                         "toy_markov.pdf", "doc.md"]
    text = doc.read_text()
    assert "![Toy reproduction](out/toy_markov.png)" in text and f"{BEGIN}\nkept\n" in text


@pytest.mark.slow
def test_other_methods_get_their_own_table_not_the_csv(tmp_path: Path) -> None:
    overrides = tiny_overrides(tmp_path, "extra", "levels.S=[10]",
                               "estimator.methods=[hybrid,importance,beam,wor]")
    results = sweep.run(compose_sweep(overrides)) / "results"
    doc = _export(results, tmp_path / "out")
    csv = pd.read_csv(tmp_path / "out" / "reproduction" / "fig3_synthetic_reviews_markov.csv")
    assert "wor" not in set(csv.method)
    block = doc.read_text()
    assert "Other methods at the same calls" in block and "| K | wor | best of these |" in block
    assert "histories that every one of them has run at every K" in block
    # the figure gets a second row: the other methods and the hybrid on the same histories
    runs = select(load_results([str(results)]), PAPER_METHODS, "hitting_time", 10)
    axes = FIG3.figure(runs)["fig3"].axes
    assert len(axes) == 2 and "other methods at the same calls · N = 6" in axes[1].get_title()
    assert {line.get_label() for line in axes[1].get_lines()} == {"wor", "hybrid"}
    # a model that no other method ran on leaves an empty panel before the next model's, and
    # that next panel still has its scale and label
    table = load_results([str(results)])
    paper_only = table[table.method.isin(PAPER_METHODS)].assign(model="a_model")
    runs = select(pd.concat([paper_only, table]), PAPER_METHODS, "hitting_time", 10)
    fig = FIG3.figure(runs)["fig3"]
    fig.canvas.draw()
    empty, frontier = fig.axes[2:4]  # the second row: a_model's, then the sweep's model's
    assert not empty.axison and frontier.get_ylabel() == "median RAE"
    assert any(t.get_visible() and t.get_text() for t in frontier.get_yticklabels())


def test_median_interval_and_noise_floor() -> None:
    low, high = median_ci(np.arange(1.0, 101.0))
    assert low < 50.5 < high and (low, high) == (40.0, 61.0)
    assert median_ci(np.array([]))[0] != median_ci(np.array([]))[0]
    # every truth with relative SE σ: a perfect estimator's median RAE is 0.6745·σ
    assert tables.noise_floor(np.full(50, 0.01)) == pytest.approx(0.0067449, rel=1e-4)
    assert tables.noise_floor(np.zeros(5)) == 0.0
    assert model_slug("authors_lstm") == "authors"
    assert model_slug("lstm@1a2b3c4d") == "lstm"
