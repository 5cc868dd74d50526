"""Config stops at the entry points: models, estimators, ground truth, queries, data loaders and
training never import OmegaConf/Hydra or take a `DictConfig`; the entry points hand them typed,
frozen specs (`seqq/sweeps/specs.py`, `seqq/models/spec.py`). Sweeps and reports meet
only in the results package, which reads a results table without torch or any estimator."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, compose_sweep, compose_train, tiny_overrides

from seqq.models.spec import ModelSpec
from seqq.sweeps import sweep
from seqq.sweeps.specs import SweepSpec

# Everything below the entry points (seqq/commands/, the sweep engine seqq/sweeps/)
BELOW = ["seqq/models", "seqq/estimators", "seqq/queries", "seqq/data",
         "seqq/training", "seqq/results", "seqq/api.py", "seqq/answers.py", "seqq/paths.py"]
CONFIG_MODULES = ("omegaconf", "hydra")
CONFIG_TYPES = {"DictConfig", "ListConfig", "OmegaConf"}


def _modules() -> list[Path]:
    files = []
    for below in BELOW:
        path = REPO / below
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def _config_uses(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in CONFIG_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
                CONFIG_MODULES):
            found.append(f"from {node.module}")
        elif isinstance(node, ast.Name) and node.id in CONFIG_TYPES:
            found.append(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in CONFIG_TYPES:
            found.append(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and any(
                f"{t}" in node.value for t in ("DictConfig", "ListConfig")):
            found.append(f"string {node.value[:40]!r}")  # a quoted annotation, or a docstring
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_config_object_below_the_entry_points(path: Path) -> None:
    assert _config_uses(ast.parse(path.read_text(encoding="utf-8"))) == []


def test_the_check_finds_what_it_looks_for() -> None:
    source = ("from omegaconf import DictConfig\nimport hydra.utils\n"
              "def f(cfg: 'DictConfig') -> None: ...\n"
              "def g(cfg: omegaconf.DictConfig) -> None: ...\n")
    assert len(_config_uses(ast.parse(source))) == 4


# Sweeps write the results table, reports read it (seqq/results): neither imports the
# other, and only the command (seqq/commands/query_sweep.py) imports both.
APART = {"seqq.sweeps.sweep": ["seqq.reports"],
         "seqq.commands.report": ["seqq.sweeps"],
         "seqq.results.store": ["seqq.sweeps", "seqq.reports"]}


@pytest.mark.parametrize("module", APART)
def test_sweeps_and_reports_meet_only_in_results(module: str) -> None:
    code = ("import importlib, sys; importlib.import_module(sys.argv[1]); "
            "found = [m for m in sys.modules if m.startswith(tuple(sys.argv[2:]))]; "
            "assert not found, f'{sys.argv[1]} imports {found}'")
    subprocess.run([sys.executable, "-c", code, module, *APART[module]], cwd=REPO, check=True)


@pytest.mark.parametrize("module", ["seqq.results.schema", "seqq.results.store"])
def test_results_read_without_torch_or_the_estimators(module: str) -> None:
    code = ("import importlib, sys; importlib.import_module(sys.argv[1]); "
            "found = [m for m in ('torch', 'seqq.estimators') if m in sys.modules]; "
            "assert not found, f'{sys.argv[1]} imports {found}'")
    subprocess.run([sys.executable, "-c", code, module], cwd=REPO, check=True)


def test_a_sweep_config_becomes_one_frozen_spec(tmp_path: Path) -> None:
    spec = sweep.sweep_spec(compose_sweep(tiny_overrides(tmp_path)))
    assert isinstance(spec, SweepSpec) and isinstance(spec.model, ModelSpec)
    assert spec.horizons == (3, 5) and spec.levels == (10, 30) and spec.model.type == "markov"
    assert [r.label for r in spec.runs] == ["hybrid", "importance", "beam"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 1  # type: ignore[misc]


def test_a_train_config_becomes_one_frozen_spec() -> None:
    from seqq.commands.train import TrainSpec, check_config

    spec = check_config(compose_train("model=hpyp"))
    assert isinstance(spec, TrainSpec) and spec.hpyp.order == 5 and spec.lstm is None
    lstm = check_config(compose_train())
    assert lstm.lstm.hidden_size == 128 and lstm.trainer.batch_size == 64


def test_model_spec_of_a_mapping_keeps_what_loaders_read() -> None:
    spec = ModelSpec.of({"type": "lstm", "hidden_size": 128, "checkpoint": None, "order": 3})
    assert spec == ModelSpec(type="lstm", order=3)
    assert ModelSpec.of(spec) is spec


def test_every_kind_of_sweep_job_is_run_reported_and_read_by_its_folder() -> None:
    """The job kinds (`seqq.results.jobs`) are the one list the sweep engine, `seqq
    query-sweep`'s report and the reproduction experiments go by: each kind is reported, and
    each experiment that reads its own rows reads a kind's folder."""
    from seqq.commands.query_sweep import REPORTS
    from seqq.reports.reproduction.registry import OWN_ROWS
    from seqq.results.jobs import JOB_KINDS

    assert set(REPORTS) == set(JOB_KINDS)
    folders = {kind.folder for kind in JOB_KINDS.values()}
    assert {experiment.results for experiment in OWN_ROWS.values()} <= folders


def _imported(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append(node.module or "")
    return found


@pytest.mark.parametrize("path", sorted((REPO / "seqq/data").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_data_imports_no_model(path: Path) -> None:
    """Datasets name symbols; models read them. A loader that needs a model's file (SmolLM2's
    tokenizer) finds it through `seqq.paths`, not through `seqq.models`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert [m for m in _imported(tree) if m.startswith("seqq.models")] == []


def test_the_bos_rule_and_text_histories_load_without_the_loaders() -> None:
    """`seqq ask` and the estimators read `seqq.data.symbols` without pandas or torch: the
    package imports its loaders only when one is named."""
    code = ("import sys, seqq.data.symbols; "
            "found = [m for m in ('pandas', 'torch', 'seqq.data.base') if m in sys.modules]; "
            "assert not found, f'seqq.data.symbols imports {found}'")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


def _walk(names: set[str], value: str | None, run) -> list[list[str]]:
    """Every call receiving one of `names` (with `value`, when given: a method's name) while
    `run()` runs, as the seqq modules on the stack then, from the outermost down."""
    package = str(REPO / "seqq")
    walks = []

    def tracer(frame, event, arg):
        code = frame.f_code
        carried = names & set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
        if event != "call" or not carried or value is not None and all(
                str(getattr(frame.f_locals[n], "name", frame.f_locals[n])) != value
                for n in carried):
            return None
        modules, f = [], frame
        while f is not None:
            if f.f_code.co_filename.startswith(package):
                modules.append(str(Path(f.f_code.co_filename).relative_to(package)))
            f = f.f_back
        walks.append([m for m, _ in itertools.groupby(reversed(modules))])  # runs merged
        return None

    sys.settrace(tracer)
    try:
        run()
    finally:
        sys.settrace(None)
    return walks


def _back_and_forth(walk: list[str]) -> list[str]:
    return sorted({m for m in walk if walk.count(m) > 1})


@pytest.mark.parametrize("names, value, args", [
    ({"budget", "budgets"}, None, ["--method", "wor"]),
    ({"budget", "budgets"}, None, []),
    ({"method"}, "wor", ["--method", "wor"]),
    ({"method"}, "smc", []),  # auto's pick past K = 10
])
def test_a_parameters_walk_from_seqq_ask_enters_each_module_once(
        tmp_path: Path, names: set[str], value: str | None, args: list[str]) -> None:
    """From the command line down to the engine, no module hands work to one below that calls
    back into it (docs/decisions.md §37)."""
    from oracles import tiny_lstm

    from seqq.commands import cli
    from seqq.models.checkpoint import save_checkpoint

    save_checkpoint(tmp_path / "lstm.pt", tiny_lstm(V=4).net, ["<BOS>", "a", "b", " "])
    status = []
    walks = _walk(names, value, lambda: status.append(cli.main([
        "ask", "--model", str(tmp_path / "lstm.pt"), "--history", "ab", "--budget", "600",
        "--surrogate", "none", *args, 'tau("a") <= 12'])))
    assert status == [0]
    assert walks[-1][:3] == ["commands/cli.py", "commands/plumbing.py", "commands/ask.py"]
    assert any("estimators/driver.py" in w for w in walks), walks
    assert [(w, _back_and_forth(w)) for w in walks if _back_and_forth(w)] == []


def test_the_walk_finds_a_callback() -> None:
    assert _back_and_forth(["commands/cli.py", "commands/plumbing.py", "commands/cli.py"]) == [
        "commands/cli.py"]


@pytest.mark.slow
def test_a_budgets_walk_through_a_sweep_enters_each_module_once(tmp_path: Path) -> None:
    """Below the Hydra entry (a command's job, which Hydra calls back), a sweep's level S
    reaches the methods without back and forth."""
    config = compose_sweep(tiny_overrides(tmp_path))
    walks = _walk({"budget", "budgets"}, None, lambda: sweep.run(config))
    assert any("estimators/driver.py" in w for w in walks)
    assert [(w, _back_and_forth(w)) for w in walks if _back_and_forth(w)] == []
