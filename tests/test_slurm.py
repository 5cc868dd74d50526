"""A tiny sweep sent through `hydra/launcher=slurm` (hydra-submitit-launcher) to a real SLURM
cluster: one job per level S × shard of histories, merged by `seqq report`.

Skips where no cluster answers `sinfo`; under CI (CI=true, where `.ci/run` starts a one-node
cluster with scripts/slurm_local.sh) a missing cluster or launcher is a failure instead.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, tiny_overrides

from seqq.commands import report
from seqq.reports.tables import load_results
from seqq.results.schema import KEY

IN_CI = os.environ.get("CI", "").lower() == "true"


def _cluster_problem() -> str | None:
    if importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None:
        return "hydra-submitit-launcher is not installed (pip install hydra-submitit-launcher)"
    if shutil.which("sinfo") is None:
        return "no SLURM client (sinfo) on PATH"
    state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    if state.returncode != 0 or not {"idle", "mixed", "allocated"} & set(state.stdout.split()):
        return f"no SLURM node is up: {state.stdout.strip() or state.stderr.strip()}"
    return None


@pytest.fixture(scope="module")
def slurm() -> None:
    problem = _cluster_problem()
    if problem and IN_CI:
        pytest.fail(f"CI must run the SLURM test: {problem}")
    if problem:
        pytest.skip(problem)


@pytest.mark.slow
def test_multirun_through_slurm_merges_to_one_row_per_key(slurm: None, tmp_path: Path) -> None:
    overrides = [o for o in tiny_overrides(tmp_path, "slurm") if not o.startswith("levels.")]
    command = [
        sys.executable, "-m", "seqq.commands.cli", "query-sweep", "-m", "hydra/launcher=slurm",
        *overrides, "levels.S=[10],[30]", "sweep.shards=2", "sweep.shard=0,1",
        "sweep.report=false", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1",
        "hydra.launcher.timeout_min=10",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    job_logs = list((tmp_path / "slurm" / "logs").rglob(".submitit/*/*_log.out"))
    assert len(job_logs) == 4  # 2 levels S × 2 shards, each its own SLURM job
    results = tmp_path / "slurm" / "results"
    assert report.main([str(results), "--out", str(tmp_path / "report")]) == 0
    table = load_results([str(results)])
    assert len(table) == 6 * 2 * 3 * 2  # histories × K × methods × levels S
    assert not table.duplicated(KEY).any() and (table.rae >= 0).all()
    assert (tmp_path / "report" / "summary.md").exists()
