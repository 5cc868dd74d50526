"""Every experiment preset composes (quick and paper size) into a sweep the runner accepts,
and every figure target of the Makefile names a preset that exists."""

from __future__ import annotations

import re
import subprocess

import pytest
from conftest import REPO, compose_sweep
from omegaconf import OmegaConf

from seqq.experiments import sweep
from seqq.experiments.query_specs import KINDS
from seqq.reports.figures import FIGURES

PRESETS = sorted(p.stem for p in (sweep.CONF / "experiment").glob("*.yaml"))
METHODS = {"exact", "naive", "uniform", "importance", "beam", "coverage_beam", "tail_beam",
           "hybrid"}


@pytest.mark.parametrize("size", ["quick", "paper"])
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_composes(preset: str, size: str) -> None:
    cfg = compose_sweep([f"experiment={preset}", f"size={size}"])
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert resolved["sweep"]["name"] and resolved["query"]["kind"] in KINDS
    assert set(resolved["estimator"]["methods"]) <= METHODS
    assert set(resolved["estimator"]["options"]) <= set(resolved["estimator"]["methods"])
    assert all(isinstance(x, int) for x in resolved["budget"]["levels"])
    assert sweep.horizons(cfg) and min(sweep.horizons(cfg)) >= 1


def test_paper_size_uses_the_papers_protocol() -> None:
    cfg = OmegaConf.to_container(compose_sweep(["experiment=fig3", "size=paper"]), resolve=True)
    assert cfg["sweep"]["histories"] == 1000 and sweep.horizons(
        compose_sweep(["experiment=fig3"])) == list(range(3, 12))
    assert cfg["ground_truth"]["s_low"] == 10_000 and cfg["ground_truth"]["s_high"] == 100_000
    assert cfg["ground_truth"]["exact_max_calls"] == 2_000_000


def test_makefile_targets_use_existing_presets_and_figures() -> None:
    text = (REPO / "Makefile").read_text()
    used = set(re.findall(r"call (?:sweep|report),(\w+)", text))
    used |= set(re.findall(r"experiment=(\w+)", text))
    assert used and used <= set(PRESETS)
    for names in re.findall(r"--figures ([\w,]+)", text):
        assert set(names.split(",")) <= set(FIGURES), names
    dry = subprocess.run(["make", "-n", "-C", str(REPO), "paper"], capture_output=True,
                         text=True)
    assert dry.returncode == 0, dry.stderr
    for target in ("fig3", "fig4", "fig5", "fig6", "fig7-9", "fig10", "fig11", "fig12",
                   "fig13", "fig14", "fig15", "table2", "tables3-6", "demo"):
        assert re.search(rf"^{re.escape(target)}\b.*:", text, re.M), target
