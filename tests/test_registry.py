"""The method registry is the one place a method is declared: every method is held against the
oracles through it (a new method is tested with no test edit), the README's table is its, the
layout keeps methods apart from each other and from the reports, a module placed in `methods/`
is found, and a toy method registered from outside runs through the API, a sweep and a report."""

from __future__ import annotations

import ast
import math
import shutil
import sys
from pathlib import Path

import pytest
from conftest import REPO, compose_sweep, tiny_overrides
from toy_method import TOY

import seqq
import seqq.estimators.methods as method_modules
from seqq import queries as Q
from seqq.commands import query_sweep
from seqq.estimators import METHODS, Guarantee, register, unregister
from seqq.estimators.registry import discover
from seqq.readme import regenerate
from seqq.reports.presentation import PRESENTATION, UNLISTED, presentation
from seqq.reports.tables import load_results
from seqq.results.schema import BUDGET_SETTER, LEVEL_OPTION
from tests.oracles import random_markov

ESTIMATORS = REPO / "seqq" / "estimators"
COPIES = 200  # independent estimates of one query, in one batch


def _case(method):
    """(model, history, query, exact answer, options) every registered method can answer: a
    union built without compiling for the methods that estimate unions by parts, a count
    otherwise."""
    model, history = random_markov(V=5, seed=3), [0, 4]
    if method.by_part:
        parts = (Q.event_at(1, K=2), Q.occurs_within(3, K=4))
        query, compiled = Q.union(*parts, compile=False), Q.union(*parts)
    else:
        query = compiled = Q.count(2, n=2, K=4, op=">=")
    options = {"surrogate": random_markov(V=5, seed=11)} if method.surrogate == "required" else {}
    return model, history, query, seqq.exact(model, history, compiled), options


@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_against_the_exact_answer(name: str) -> None:
    """Exact methods are exact; lower bounds stay below; unbiased ones average to the truth
    (mean of COPIES independent estimates within 4 standard errors, at a budget where the method
    takes one); certain bounds hold."""
    method = METHODS[name]
    model, history, query, truth, options = _case(method)
    budget = 60 if method.takes_budget else None
    estimates = seqq.estimate_many(model, [history] * COPIES, query, name, budget=budget, seed=0,
                                   **options)
    values = [e.value for e in estimates]
    if method.guarantee is Guarantee.EXACT:
        assert values[0] == pytest.approx(truth, rel=1e-6)
    elif method.guarantee is Guarantee.LOWER_BOUND:
        assert max(values) <= truth * (1 + 1e-6)
    else:
        mean = sum(values) / len(values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        assert abs(mean - truth) <= 4 * sd / math.sqrt(len(values)) + 1e-9, (mean, truth, sd)
    if method.certain_bounds:
        for e in estimates:
            assert e.lower <= truth * (1 + 1e-6) and truth <= e.upper * (1 + 1e-6) + 1e-12


def test_the_readme_is_as_make_readme_writes_it() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert regenerate(readme) == readme, "README.md is stale: run make readme"


def test_a_module_placed_in_methods_is_found_after_the_others(monkeypatch, tmp_path) -> None:
    """Adding a method is one file: `tests/toy_method.py` beside the method modules (here, in a
    folder added to the package's path) is found after them, which keep the README's order, and
    `make readme` gives it the table's last row, in the words of an unlisted method."""
    shutil.copy(REPO / "tests" / "toy_method.py", tmp_path / "toy_method.py")
    monkeypatch.setattr(method_modules, "__path__", [*method_modules.__path__, str(tmp_path)])
    try:
        found = discover()
    finally:
        sys.modules.pop(f"{method_modules.__name__}.toy_method", None)
    assert [m.name for m in found] == [*METHODS, TOY.name]
    monkeypatch.setitem(METHODS, TOY.name, found[-1])
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = regenerate(readme).split("<!-- generated from the registry")[1].split("\n\n")[0]
    assert rows.splitlines()[-1] == f"| `{TOY.name}` |  | yes |  | `pairs` |"


def test_every_method_has_a_presentation_and_every_row_a_method() -> None:
    """The reports' table (`seqq.reports.presentation`) shows every built-in method and no
    method that is gone; a method registered elsewhere is shown as `UNLISTED`."""
    assert list(PRESENTATION) == list(METHODS)
    assert all(p.computes for p in PRESENTATION.values())
    assert presentation(TOY.name) is UNLISTED


def test_the_sweeps_budget_setter_is_a_method_taking_the_level() -> None:
    """The results schema names the budget setter without importing the registry: it must be a
    registered method whose `LEVEL_OPTION` a sweep's level S sets."""
    assert LEVEL_OPTION in METHODS[BUDGET_SETTER].option_names()



def test_discover_refuses_a_role_held_by_two_methods(monkeypatch, tmp_path) -> None:
    """A second exact method beside `exact` would leave `seqq.exact` and ground truth to pick
    one by order: discover names both instead."""
    (tmp_path / "twin_exact.py").write_text(
        "import dataclasses\nfrom seqq.estimators.registry import exact_method\n"
        "METHODS = (dataclasses.replace(exact_method(), name='exact_twin'),)\n")
    monkeypatch.setattr(method_modules, "__path__", [*method_modules.__path__, str(tmp_path)])
    try:
        with pytest.raises(ValueError, match="exactly one method must have the exact role; "
                                             "exact, exact_twin have it"):
            discover()
    finally:
        sys.modules.pop(f"{method_modules.__name__}.twin_exact", None)

def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_no_method_module_imports_another_and_the_engine_imports_none() -> None:
    methods = sorted((ESTIMATORS / "methods").glob("*.py"))
    for path in [*methods, *sorted((ESTIMATORS / "engine").rglob("*.py"))]:
        imported = {n for n in _imports(path) if n.startswith("seqq.estimators.methods")}
        assert imported == set(), f"{path.relative_to(REPO)} imports {sorted(imported)}"


def test_the_estimators_import_nothing_from_the_reports() -> None:
    """Estimators compute; how their answers are shown is the reports' (`presentation.py`)."""
    for path in sorted(ESTIMATORS.rglob("*.py")):
        imported = {n for n in _imports(path) if n.startswith("seqq.reports")}
        assert imported == set(), f"{path.relative_to(REPO)} imports {sorted(imported)}"


def test_estimator_modules_stay_small() -> None:
    for path in sorted(ESTIMATORS.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        assert lines <= 400, f"{path.relative_to(REPO)} has {lines} lines; split it"


@pytest.fixture
def toy():
    register(TOY)  # the one line that adds a method from outside seqq
    yield TOY
    unregister(TOY.name)


@pytest.mark.slow
def test_a_registered_toy_method_runs_through_api_sweep_and_report(toy, tmp_path: Path) -> None:
    model = random_markov(V=5, seed=3)
    query = Q.hitting_time(2, K=3)
    truth = seqq.exact(model, [0], query)
    one = seqq.estimate(model, [0], query, toy.name, pairs=500, seed=1)
    assert one.method == toy.name and one.stderr > 0
    assert abs(one.value - truth) < 5 * one.stderr
    many = seqq.estimate_many(model, [[0], [1]], query, toy.name, budget=40, seed=1)
    assert [e.model_calls <= 40 for e in many] == [True, True]
    with pytest.raises(seqq.QueryError, match="takes no option 'samples'"):
        seqq.estimate(model, [0], query, toy.name, samples=3)
    out = query_sweep.run(compose_sweep(tiny_overrides(tmp_path, "toy",
                                                       f"estimator.methods=[{toy.name}]")))
    table = load_results([str(out / "results")])
    assert set(table.method) == {toy.name} and table.rae.notna().all()
    summary = (out / "report" / "summary.md").read_text()
    assert toy.name in summary
