"""Every preset composes (quick and paper size) into a sweep the runner accepts,
and every figure target of the Makefile names a preset that exists."""

from __future__ import annotations

import re
import subprocess

import pandas as pd
import pytest
from conftest import REPO, compose_sweep, compose_train
from omegaconf import DictConfig, OmegaConf

from seqq.estimators import METHODS
from seqq.paths import CONF, default_checkpoint_dir
from seqq.reports.figures import FIGURES
from seqq.sweeps import sweep
from seqq.sweeps.method_runs import method_runs
from seqq.sweeps.query_specs import KINDS

GT_SAVED = REPO / "docs" / "reproduction" / "ground_truth"  # committed paper-size truths
PRESETS = sorted(p.stem for p in (CONF / "preset").glob("*.yaml"))


@pytest.mark.parametrize("size", ["quick", "paper"])
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_composes(preset: str, size: str) -> None:
    cfg = compose_sweep([f"preset={preset}", f"size={size}"])
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert resolved["sweep"]["name"] and resolved["query"]["kind"] in KINDS
    runs = method_runs(cfg)  # every label a method or a variant of one, options checked
    assert [r.label for r in runs] == resolved["estimator"]["methods"]
    assert {r.method for r in runs} <= set(METHODS)
    assert set(resolved["estimator"]["options"]) <= set(resolved["estimator"]["methods"])
    assert set(resolved["estimator"].get("variants", {})) <= set(resolved["estimator"]["methods"])
    assert all(isinstance(x, int) for x in resolved["levels"]["S"])
    assert sweep.horizons(cfg) and min(sweep.horizons(cfg)) >= 1


def test_paper_size_uses_the_papers_protocol() -> None:
    cfg = OmegaConf.to_container(compose_sweep(["preset=fig3", "size=paper"]), resolve=True)
    assert cfg["sweep"]["histories"] == 1000 and sweep.horizons(
        compose_sweep(["preset=fig3"])) == list(range(3, 12))
    assert cfg["ground_truth"]["s_low"] == 10_000 and cfg["ground_truth"]["s_high"] == 100_000
    assert cfg["ground_truth"]["exact_max_calls"] == 2_000_000
    # Fig. 3 and its frontier panel keep the paper's estimated truths at paper size (§40)
    for preset in ("fig3", "fig3_frontier"):
        assert compose_sweep([f"preset={preset}", "size=paper"]).sweep.refine_truth is None
        assert compose_sweep([f"preset={preset}"]).sweep.refine_truth == 0.2


def test_fig3_at_paper_size_keeps_the_rule_its_saved_truths_were_computed_with() -> None:
    """docs/reproduction/ground_truth/ holds App. F.3 truths keyed by the options' digest: Fig. 3,
    its frontier panel and the sweeps that ask Fig. 3's queries again (horizons: Figs 5–9,
    budgets: Figs 10/11) at size=paper must keep exactly those options, so they reuse them;
    everything else (quick runs, other paper-size sweeps) judges with the twisted rule
    (docs/decisions.md §43), enumerating only where that costs at most 50,000 calls."""
    from seqq.sweeps.sweep_config import sweep_spec
    from seqq.sweeps.truth_store import digest

    saved = {"exact_max_calls": 2_000_000, "rule": "absolute", "delta": 1e-7, "rel_tol": 0.01,
             "s_low": 10_000, "s_step": 1_000, "s_high": 100_000}
    for preset in ("fig3", "fig3_frontier", "horizons", "budgets"):
        cfg = compose_sweep([f"preset={preset}", "size=paper", "dataset=shakespeare",
                             "model=authors"])
        options = dict(sweep_spec(cfg).ground_truth.options)
        assert options == saved and digest(options) == "ca656a196466"
        assert compose_sweep([f"preset={preset}"]).ground_truth.rule == "twisted"
    for overrides in ([], ["size=paper"], ["preset=temperature", "size=paper"]):
        cfg = compose_sweep(overrides)
        assert cfg.ground_truth.rule == "twisted" and cfg.ground_truth.exact_max_calls == 50_000
    # Figs 4b/13's committed truths (the twisted judge's, at every temperature) are keyed so
    temperature = compose_sweep(["preset=temperature", "size=paper"])
    assert digest(dict(sweep_spec(temperature).ground_truth.options)) == "a9e09a0e7443"
    saved = pd.concat(pd.read_parquet(f, columns=["gt_options", "temperature"])
                      for f in GT_SAVED.glob("*.parquet"))
    assert set(saved[saved.gt_options == "a9e09a0e7443"].temperature) == {
        0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0}
    assert compose_sweep(["preset=frontier", "size=paper"]).ground_truth.rule == "twisted"


def test_a_ground_truth_rule_is_checked_before_anything_loads() -> None:
    from seqq.errors import ConfigError
    from seqq.sweeps.sweep_config import sweep_spec

    with pytest.raises(ConfigError, match="ground_truth.rule must be one of absolute, relative, "
                                          "twisted"):
        sweep_spec(compose_sweep(["ground_truth.rule=twist"]))
    with pytest.raises(ConfigError, match="ground_truth.rel_tol"):
        sweep_spec(compose_sweep(["ground_truth.rel_tol=0"]))
    with pytest.raises(ConfigError, match="ground_truth.surrogate is not a ground-truth setting"):
        sweep_spec(compose_sweep(["+ground_truth.surrogate=hpyp"]))


def test_makefile_targets_use_existing_presets_and_figures() -> None:
    text = (REPO / "Makefile").read_text()
    used = set(re.findall(r"call (?:sweep|report),(\w+)", text))
    used |= set(re.findall(r"preset=(\w+)", text))
    assert used and used <= set(PRESETS)
    for names in re.findall(r"--figures ([\w,]+)", text):
        assert set(names.split(",")) <= set(FIGURES), names
    dry = subprocess.run(["make", "-n", "-C", str(REPO), "paper"], capture_output=True,
                         text=True)
    assert dry.returncode == 0, dry.stderr
    for target in ("fig3", "fig4", "fig5", "fig6", "fig7-9", "fig10", "fig11", "fig12",
                   "fig13", "fig14", "fig15", "table2", "tables3-6", "demo"):
        assert re.search(rf"^{re.escape(target)}\b.*:", text, re.M), target


def _make_dry_run(*args: str) -> str:
    dry = subprocess.run(["make", "-n", "-B", "-C", str(REPO), *args], capture_output=True,
                         text=True)
    assert dry.returncode == 0, dry.stderr
    return dry.stdout


def test_the_frontier_panel_runs_on_both_authors_models_into_fig3s_folder() -> None:
    script = _make_dry_run("fig3-frontier", "SIZE=paper")
    sweeps = [command for command in script.replace("&&", "\n").splitlines()
              if "query-sweep" in command]
    assert len(sweeps) == 2 and all("preset=fig3_frontier" in line and "size=paper" in line
                                    and "model=authors" in line for line in sweeps)
    assert {re.search(r"dataset=(\w+)", line)[1] for line in sweeps} == {"shakespeare", "moocs"}
    assert compose_sweep(["preset=fig3_frontier"]).sweep.name == "fig3"


@pytest.mark.parametrize("size", ["quick", "paper"])
def test_make_and_the_cli_share_one_checkpoint_folder(size: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`make` trains where `seqq query-sweep` looks by default (run from the project root, as
    `make` runs it), so README commands find the LSTMs that `make demo` trained; quick LSTMs
    train as the missing-checkpoint hint says."""
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("SEQQ_DATA", raising=False)
    script = _make_dry_run("fig3", f"SIZE={size}")
    folders = set(re.findall(r"checkpoint_dir=(\S+)", script))
    default = compose_sweep([f"size={size}"]).checkpoint_dir
    assert folders == {default}
    trains = [line for line in script.splitlines() if " train " in line]
    assert trains and all((sweep.QUICK_TRAINING in line) == (size == "quick") for line in trains)
    if size == "quick":
        assert default == str(default_checkpoint_dir()) == compose_train().checkpoint_dir


def _readme_commands(command: str) -> list[list[str]]:
    """`seqq <command> ...` lines of the README's Query sweeps section, as override lists (a
    multirun's comma lists reduced to their first value)."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Query sweeps"):text.index("### Configuration reference")]
    found = []
    for line in section.splitlines():
        if line.startswith(f"seqq {command} "):
            words = line.split("#")[0].split()[2:]
            found.append([re.sub(r"^([^=\[]+=)([^,\[]+),.*$", r"\1\2", w) for w in words
                          if w != "-m"])
    return found


def test_readme_query_sweep_commands_compose_and_pass_the_checks() -> None:
    from seqq.commands.train import check_config as check_train

    sweeps, trains = _readme_commands("query-sweep"), _readme_commands("train")
    assert len(sweeps) >= 3 and trains
    for overrides in sweeps:
        sweep.check_config(compose_sweep(overrides))
    for overrides in trains:
        check_train(compose_train(*overrides))


def _leaves(node: DictConfig, prefix: str = "") -> set[str]:
    return {key for k, v in node.items() for key in (
        _leaves(v, f"{prefix}{k}.") if isinstance(v, DictConfig) else {f"{prefix}{k}"})}


@pytest.mark.parametrize("command", ["query-sweep", "train"])
def test_help_names_every_setting_and_only_real_ones(command: str) -> None:
    from seqq.commands import query_sweep
    from seqq.commands.train import HELP as TRAIN_HELP

    help_, cfg = ((query_sweep.HELP, compose_sweep([])) if command == "query-sweep"
                  else (TRAIN_HELP, compose_train()))
    variants = [cfg] + ([compose_sweep([f"query={q}"]) for q in ("count", "a_before_b", "expr")]
                        if command == "query-sweep" else [])
    listed = {key for key, _ in help_.options if re.fullmatch(r"[\w.]+", key)}
    for key in listed:
        assert any(OmegaConf.select(c, key, default="<missing>") != "<missing>"
                   for c in variants), key
    settings = {k for k, v in cfg.items() if k != "hydra" and not isinstance(v, DictConfig)}
    settings |= _leaves(cfg.sweep, "sweep.") if "sweep" in cfg else set()
    assert settings <= listed, settings - listed
    for group, _ in help_.groups:
        assert (CONF / group).is_dir(), group


@pytest.mark.parametrize("model", sorted(p.stem for p in (CONF / "model").glob("*.yaml")))
def test_every_model_follows_the_top_level_device(model: str) -> None:
    """`device=cpu` must reach every model: the authors' LSTMs once ignored it and took the GPU."""
    cfg = OmegaConf.to_container(compose_sweep([f"model={model}", "device=cpu"]), resolve=True)
    assert cfg["model"].get("device", "cpu") == "cpu"  # the HPYP counts on the CPU, always
