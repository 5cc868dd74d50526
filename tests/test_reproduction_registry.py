"""The experiments of docs/reproduction.md are found in `seqq/reports/reproduction/experiments/`,
one module each (`registry.py`): a module dropped in there is an experiment, with its own CSVs,
figure, doc section and summary row, and `make reproduction` exports it from its sweep."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from conftest import REPO

import seqq.reports.reproduction.experiments as experiment_modules
from seqq.reports.reproduction import registry
from seqq.reports.reproduction.markdown import begin, end
from seqq.reports.reproduction.reproduce import Experiment, NotRun, export
from seqq.reports.tables import load_results

# Two experiments a later session might add: one with results, one not run yet
NEW_EXPERIMENT = '''
from matplotlib.figure import Figure

from seqq.reports.reproduction.claims import YES, Check, table, verdict
from seqq.reports.reproduction.reproduce import Experiment


def figure(runs):
    fig = Figure()
    fig.add_subplot().plot([1, 2], [3, 4])
    return {"tokens": fig}


def checks(run):
    return [Check("the toy claim", "the toy paper", f"N = {run.n}", YES, "a toy test")]


EXPERIMENT = Experiment(
    name="toy16", title="Fig. 16", sweep="toy_sweep", query="hitting_time",
    methods=("hybrid", "importance", "beam"), levels=(10,), block="toy16",
    columns=("history_id", "K", "method", "estimate"), figure=figure,
    caption=lambda runs: "*the toy caption*",
    section=lambda run, csv: [f"toy rows in {csv}", ""],
    claims=table(checks, "Fig. 16"), verdict=verdict(checks))
'''
NOT_RUN = '''
from seqq.reports.reproduction.reproduce import NotRun

EXPERIMENT = NotRun(title="Table 7", models="a toy LLM", why="not run: waits for a GPU")
'''


@pytest.fixture
def dropped_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list:
    """The registry's experiments with two more modules in the experiments package."""
    folder = tmp_path / "more_experiments"
    folder.mkdir()
    (folder / "toy16.py").write_text(NEW_EXPERIMENT)
    (folder / "table7.py").write_text(NOT_RUN)
    monkeypatch.setattr(experiment_modules, "__path__", [*experiment_modules.__path__,
                                                         str(folder)])
    yield registry.discover()
    plt.close("all")


def test_a_module_dropped_in_is_an_experiment(dropped_in: list, tmp_path: Path,
                                              tiny_sweep: Path) -> None:
    titles = [e.title for e in dropped_in]
    # in the paper's order: after Fig. 15, before the tables; the not-run one after Table 6
    assert titles.index("Fig. 15") + 1 == titles.index("Fig. 16") < titles.index("Table 2")
    assert titles[-1] == "Table 7"
    rows = registry.summary_rows(dropped_in)
    assert rows["Table 7"] == ("a toy LLM", "–", "not run: waits for a GPU")
    assert rows["Fig. 16"] == ("–", "–", "not run yet at paper size")
    assert "toy_sweep:results:toy16:authors_lstm" in registry.make_entries(dropped_in)
    # its export: its own CSV columns and names, its figure, its section, its summary row
    toy = next(e for e in dropped_in if e.title == "Fig. 16")
    doc = tmp_path / "doc.md"
    doc.write_text("\n".join(f"{begin(b)}\nold\n{end(b)}" for b in ("summary", "toy16")))
    written = export(toy, load_results([tiny_sweep / "results"]), tmp_path / "out", doc, (),
                     rows)
    assert [p.name for p in written] == ["toy16_synthetic_reviews_markov.csv",
                                         "toy16_markov.png", "toy16_markov.pdf", "doc.md"]
    assert (tmp_path / "out" / "toy16_synthetic_reviews_markov.csv").read_text().startswith(
        "history_id,K,method,estimate\n")
    text = doc.read_text()
    assert "*the toy caption*" in text and "toy rows in [`toy16_synthetic_reviews_markov" in text
    assert "| the toy claim | the toy paper | N = 6 | a toy test | supported |" in text
    assert re.search(r"\| Fig\. 16 \| synthetic_reviews \(markov\) \| N = 6 .*\*\*reproduced\*\*",
                     text)
    assert "| Table 7 | a toy LLM | – | not run: waits for a GPU |" in text


def test_every_module_declares_one_experiment() -> None:
    modules = sorted(p.stem for p in Path(experiment_modules.__path__[0]).glob("*.py")
                     if p.stem != "__init__")
    assert len(registry.DECLARED) == len(modules)
    assert all(isinstance(e, Experiment | NotRun) or e.name in registry.OWN_ROWS
               for e in registry.DECLARED)
    assert list(registry.SUMMARY) == [
        "Fig. 1", "Fig. 3", "Fig. 4a", "Figs 4b, 13", "Figs 5, 6", "Figs 7–9", "Figs 10, 11",
        "Fig. 12", "Fig. 14", "Fig. 15", "Table 2", "Table 3", "Tables 4, 5", "Table 6"]


def test_make_reproduction_exports_what_the_registry_lists() -> None:
    """The Makefile names no experiment: it runs the registry's entries, one per sweep, the
    experiments owning CSVs before those linking them."""
    text = (REPO / "Makefile").read_text()
    assert "-m seqq.reports.reproduction.registry" in text
    entries = registry.make_entries(registry.DECLARED)
    named = [name for entry in entries for name in entry.split(":")[2].split(",")]
    assert sorted(named) == sorted([*registry.EXPERIMENTS, *registry.OWN_ROWS])
    assert "horizons:results:fig5,fig4a,fig7-9:authors_lstm" in entries
    assert "kl:kl:tables4-5:authors_lstm" in entries
    assert "large_lm:results:table2:smollm2" in entries  # each keeps the models it runs on
    assert "fig1:sentence_end:fig1:smollm2" in entries
    for entry in entries:
        names = entry.split(":")[2].split(",")
        for name in names:
            owner = registry.EXPERIMENTS.get(name, None)
            if owner is not None and owner.csv:
                assert names.index(owner.csv) < names.index(name)
