"""What a run folder records so a result can be traced: resolved config, seed, versions, commit,
host and command line; `seqq train` and `seqq query-sweep` both write it through this module."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("seqq", "torch", "numpy", "pandas", "pyarrow", "hydra-core", "omegaconf",
            "transformers", "matplotlib", "submitit", "hydra-submitit-launcher")


def git_commit(cwd: Path | None = None) -> str | None:
    """HEAD of the source tree, with `+dirty` when it has uncommitted changes."""
    cwd = cwd or Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=cwd, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty.strip() else "")


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": sys.version.split()[0],
                                    "platform": platform.platform()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def write_provenance(folder: str | Path, config: dict[str, Any], seed: int,
                     name: str = "provenance.json", **facts: Any) -> Path:
    """Write `name` (config, seed, versions, commit, host, argv, and any run-specific `facts`
    such as a training run's scores) into `folder`."""
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {**facts, "seed": seed, "git_commit": git_commit(), "versions": versions(),
              "host": platform.node(), "argv": sys.argv, "config": config}
    path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    return path
