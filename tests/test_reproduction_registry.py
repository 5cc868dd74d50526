"""The experiments of docs/reproduction.md are found in `seqq/reports/reproduction/experiments/`,
one module each (`registry.py`): a module dropped in there is an experiment, with its own CSVs,
figure, doc section (its markers added by its first export) and summary row; `make paper-sweeps`
runs its sweep, `make reproduction` exports it from there and `make reproduction-claims` judges
it again from its CSVs, no other file edited."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from conftest import REPO
from reproduction_doc import DOC, summary_line

import seqq.reports.reproduction.experiments as experiment_modules
from seqq.reports.reproduction import registry
from seqq.reports.reproduction.markdown import SUMMARY_BLOCK, begin, end
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
    columns=("history_id", "K", "method", "S", "estimate", "twice"),
    own_columns={"twice": lambda rows: 2 * rows.estimate}, figure=figure,
    caption=lambda runs: "*the toy caption*",
    section=lambda run, csv: [f"toy rows in {csv}", ""],
    claims=table(checks, "Fig. 16"), verdict=verdict(checks))
'''
NOT_RUN = '''
from seqq.reports.reproduction.reproduce import NotRun

EXPERIMENT = NotRun(title="Table 7", models="a toy LLM", why="not run: waits for a GPU")
'''


def _drop_in(folder: Path) -> None:
    (folder / "toy16.py").write_text(NEW_EXPERIMENT)
    (folder / "table7.py").write_text(NOT_RUN)


@pytest.fixture
def dropped_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list:
    """The registry's experiments with two more modules in the experiments package."""
    folder = tmp_path / "more_experiments"
    folder.mkdir()
    _drop_in(folder)
    monkeypatch.setattr(experiment_modules, "__path__", [*experiment_modules.__path__,
                                                         str(folder)])
    yield registry.discover()
    plt.close("all")


@pytest.fixture
def copied_package(tmp_path: Path) -> dict[str, str]:
    """The environment of a process that imports a copy of seqq with the two modules dropped
    into its experiments package (`python -P`: not the checkout's seqq from the working
    directory), for the Makefile's and `python -m`'s paths."""
    copy = tmp_path / "package"
    shutil.copytree(REPO / "seqq", copy / "seqq",
                    ignore=shutil.ignore_patterns("__pycache__", "resources"))
    (copy / "seqq" / "resources").symlink_to(REPO / "seqq" / "resources")
    _drop_in(copy / "seqq" / "reports" / "reproduction" / "experiments")
    return {**os.environ, "PYTHONPATH": str(copy)}


def _python(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-P", *args], env=env, cwd=REPO, text=True,
                          capture_output=True, check=True)
    return done.stdout


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
    doc = tmp_path / "doc.md"  # a summary table, no markers of its own: its export adds them
    doc.write_text(f"# Doc\n\n{begin(SUMMARY_BLOCK)}\nold\n{end(SUMMARY_BLOCK)}\n\nhand-written\n")
    written = export(toy, load_results([tiny_sweep / "results"]), tmp_path / "out", doc, (),
                     rows)
    assert [p.name for p in written] == ["toy16_synthetic_reviews_markov.csv",
                                         "toy16_markov.png", "toy16_markov.pdf", "doc.md"]
    assert (tmp_path / "out" / "toy16_synthetic_reviews_markov.csv").read_text().startswith(
        "history_id,K,method,S,estimate,twice\n")
    text = doc.read_text()
    assert f"hand-written\n\n## Fig. 16\n\n{begin('toy16')}" in text and text.endswith(
        f"{end('toy16')}\n")
    assert "*the toy caption*" in text and "toy rows in [`toy16_synthetic_reviews_markov" in text
    assert "| the toy claim | the toy paper | N = 6 | a toy test | supported |" in text
    assert re.search(r"\| Fig\. 16 \| synthetic_reviews \(markov\) \| N = 6 .*\*\*reproduced\*\*",
                     text)
    assert "| Table 7 | a toy LLM | – | not run: waits for a GPU |" in text
    export(toy, load_results([tiny_sweep / "results"]), tmp_path / "out", doc, (), rows)
    assert doc.read_text() == text  # the second export rewrites the block the first added


@pytest.mark.slow
def test_a_module_dropped_in_is_swept_and_judged_again(dropped_in: list, copied_package: dict,
                                                      tmp_path: Path, tiny_sweep: Path) -> None:
    """The same two modules in a copy of the package, nothing else edited: `make paper-sweeps`
    runs the new experiment's sweep, and `make reproduction-claims`'s module judges it again
    from its committed CSVs (its claims and summary row, written over here, come back)."""
    planned = subprocess.run(["make", "-n", "paper-sweeps", "SIZE=paper",
                              f"PY={sys.executable} -P"], env=copied_package, cwd=REPO,
                             text=True, capture_output=True, check=True).stdout
    assert re.search(r"query-sweep -m \w+=toy_sweep size=paper dataset=shakespeare", planned)
    assert "=fig3 size=paper" in planned and "=large_lm size=paper" in planned  # and the rest
    toy = next(e for e in dropped_in if e.title == "Fig. 16")
    doc, out = tmp_path / "doc.md", tmp_path / "out"
    doc.write_text(f"{begin(SUMMARY_BLOCK)}\n{end(SUMMARY_BLOCK)}\n")
    export(toy, load_results([tiny_sweep / "results"]), out, doc, (),
           registry.summary_rows(dropped_in))
    judged = doc.read_text()
    doc.write_text(judged.replace("a toy test | supported |", "a toy test | contradicted |")
                   .replace("**reproduced**", "**differs**"))
    said = _python(copied_package, "-m", "seqq.reports.reproduction.committed", str(doc), str(out))
    assert "claims judged from" in said and ": Fig. 16" in said
    assert doc.read_text() == judged


def test_a_csv_column_nobody_declares_is_refused(tmp_path: Path, tiny_sweep: Path) -> None:
    toy = dataclasses.replace(registry.EXPERIMENTS["fig3"], name="toy", levels=(10,),
                              columns=("history_id", "nowhere"))
    with pytest.raises(ValueError, match=r"toy's CSV columns \['nowhere'\] are neither"):
        export(toy, load_results([tiny_sweep / "results"]), tmp_path / "out")


def test_every_module_declares_one_experiment() -> None:
    modules = sorted(p.stem for p in Path(experiment_modules.__path__[0]).glob("*.py")
                     if p.stem != "__init__")
    assert len(registry.DECLARED) == len(modules)
    assert all(isinstance(e, Experiment | NotRun) or e.name in registry.OWN_ROWS
               for e in registry.DECLARED)
    titles = list(registry.SUMMARY)  # in the paper's order, each a row of the committed doc
    assert titles == sorted(titles, key=registry.paper_order)
    assert [summary_line(DOC, title).split(" | ")[0] for title in titles] == [
        f"| {title}" for title in titles]


def test_make_paper_sweeps_runs_what_the_registry_lists() -> None:
    """The Makefile names no sweep of an experiment: `paper-sweeps` runs the registry's, one
    line per sweep as its experiments declare it; two that declare one sweep two ways fail."""
    text = (REPO / "Makefile").read_text()
    assert "-m seqq.reports.reproduction.registry --sweeps" in text
    entries = registry.sweep_entries(registry.DECLARED)
    assert sorted(e.split()[0] for e in entries) == sorted(
        {e.sweep for e in registry.DECLARED if not isinstance(e, NotRun)})
    assert "fig3 authors sweep.refine_truth=null" in entries
    assert ("coverage shakespeare model=authors sweep.refine_truth=null "
            "estimator.options.coverage_beam.alpha=0.95,0.75,0.5") in entries
    assert "large_lm wikitext model=smollm2" in entries
    fig5 = registry.EXPERIMENTS["fig5"]
    other = dataclasses.replace(fig5, name="other", title="Fig. 99", sweep_args="")
    with pytest.raises(ValueError, match="horizons sweep declare it run two ways"):
        registry.sweep_entries([fig5, other])


def test_make_paper_sweeps_takes_the_large_lm_users_choose() -> None:
    """The language-model experiments declare SmolLM2; LARGE_LM=gpt2 runs theirs on GPT-2, as
    it does for make fig1 and make table2 (the registry's list had dropped that choice)."""
    def planned(*args: str) -> str:
        return subprocess.run(["make", "-n", "paper-sweeps", "SIZE=paper", *args], cwd=REPO,
                              capture_output=True, text=True, check=True).stdout

    def language_model_sweeps(*args: str) -> list[str]:
        return [line for line in planned(*args).splitlines() if "dataset=wikitext" in line]

    assert len(language_model_sweeps()) == 2  # Fig. 1 and Table 2
    assert all("model=smollm2" in line for line in language_model_sweeps())
    assert all("model=gpt2" in line and "smollm2" not in line
               for line in language_model_sweeps("LARGE_LM=gpt2"))


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
