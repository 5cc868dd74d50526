"""seqq runs from anywhere: the wheel (`pip install .`, not editable) carries the configs and
what seqq ships, and `seqq train` / `seqq ask` work from a directory with no checkout in it,
keeping user data under the data root (here the user data dir, `$XDG_DATA_HOME/seqq`).

The fresh venv gets seqq's dependencies (torch, hydra, …) from the running interpreter's
site-packages through a `.pth` line, so nothing is downloaded: the wheel is built with the local
setuptools (`--no-build-isolation`) when it is recent enough, and installed with `--no-deps`.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

WHEEL_LIMIT = 8 * 2**20  # about 4 MB today (tiny Shakespeare, WikiText-2 samples, two LSTMs)


def _setuptools_builds_here() -> bool:
    """Whether the local setuptools meets pyproject's `setuptools>=77` (SPDX licence string)."""
    try:
        major = int(importlib.metadata.version("setuptools").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return major >= 77


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: int = 300
         ) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(args)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh venv's bin folder, the wheel) after building seqq from a copy of the source
    tree (so the build leaves no `build/` in the checkout) and installing the wheel."""
    root = tmp_path_factory.mktemp("install")
    source = root / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "seqq", source / "seqq",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SEQQ_DATA")}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    isolation = ["--no-build-isolation"] if _setuptools_builds_here() else []
    _run([*pip, "wheel", "--no-deps", *isolation, "-q", "-w", str(root / "dist"), str(source)],
         root, env)
    wheel = next((root / "dist").glob("seqq-*.whl"))
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], root, env)
    site = Path(_run([str(venv / "bin" / "python"), "-c",
                      "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     root, env).stdout.strip())
    (site / "_seqq_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps", "-q",
          str(wheel)], root, env)
    return venv / "bin", wheel


def test_the_wheel_carries_configs_and_shipped_data_and_stays_small(installed) -> None:
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for shipped in ("seqq/conf/sweep.yaml", "seqq/conf/model/authors.yaml",
                    "seqq/resources/shakespeare/tinyshakespeare_input.txt",
                    "seqq/resources/wikitext2/wiki.test.tokens",
                    "seqq/resources/gpt2_tokenizer/vocab.json",
                    "seqq/resources/models/authors/authors_shakespeare_lstm.pt",
                    "seqq/resources/models/authors/LICENSE-authors",
                    "seqq/resources/SOURCES.md"):
        assert shipped in names, shipped
    assert wheel.stat().st_size < WHEEL_LIMIT, wheel.stat().st_size


@pytest.mark.slow
def test_train_and_ask_run_from_any_directory(installed, tmp_path: Path) -> None:
    bin_dir, _ = installed
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SEQQ_DATA")}
    env.update(XDG_DATA_HOME=str(tmp_path / "xdg"), OMP_NUM_THREADS="1")
    where = _run([str(bin_dir / "python"), "-c", "import seqq; print(seqq.__file__)"],
                 elsewhere, env).stdout
    assert Path(where.strip()).is_relative_to(bin_dir.parent), where  # the wheel's, not REPO's
    _run([str(bin_dir / "seqq"), "train", "dataset=shakespeare", "model=hpyp"], elsewhere, env)
    data_root = tmp_path / "xdg" / "seqq"
    assert (data_root / "checkpoints" / "shakespeare_hpyp.pt").is_file()
    assert list((data_root / "cache").glob("shakespeare-*.npz"))
    assert not (elsewhere / "data").exists()
    answer = _run([str(bin_dir / "seqq"), "ask", "--model", "authors-shakespeare", "--history",
                   "ROMEO:", 'tau(" ") <= 3', "--json"], elsewhere, env).stdout
    result = json.loads(answer)
    assert result["exact"] and 0 < result["estimate"] < 1 and result["history_tokens"] == 7
