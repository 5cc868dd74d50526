"""The data root: `data_root=`, else $SEQQ_DATA, else ./data when present, else the user data
dir; shipped files are found wherever seqq runs, and a copy under the data root wins."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import compose_sweep, compose_train

from seqq.paths import SHIPPED, data_root, default_checkpoint_dir, find_data, user_data_dir


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with no `data/`, no $SEQQ_DATA, and a private user data dir."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEQQ_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path


def test_the_data_root_rule(elsewhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert data_root() == user_data_dir() == elsewhere / "xdg" / "seqq"
    (elsewhere / "data").mkdir()
    assert data_root() == Path("data")  # a project checkout: relative, as typed
    monkeypatch.setenv("SEQQ_DATA", str(elsewhere / "env"))
    assert data_root() == elsewhere / "env"
    assert data_root(elsewhere / "given") == elsewhere / "given"
    assert default_checkpoint_dir() == elsewhere / "env" / "checkpoints"


def test_shipped_files_are_found_and_a_users_copy_wins(elsewhere: Path) -> None:
    relative = Path("shakespeare") / "tinyshakespeare_input.txt"
    assert find_data(None, relative) == SHIPPED / relative and (SHIPPED / relative).is_file()
    mine = data_root() / relative
    mine.parent.mkdir(parents=True)
    mine.write_text("mine")
    assert find_data(None, relative) == mine
    assert find_data(None, "moocs/mooc.csv") == data_root() / "moocs" / "mooc.csv"  # put it here


def test_configs_default_to_the_data_root(elsewhere: Path) -> None:
    root = str(elsewhere / "xdg" / "seqq")
    train = compose_train()
    assert train.data_root == root and train.checkpoint_dir == f"{root}/checkpoints"
    paper = compose_sweep(["size=paper", "model=authors"])
    assert paper.checkpoint_dir == f"{root}/checkpoints/paper"
    assert paper.model.root == str(SHIPPED / "models" / "authors")
    moved = compose_sweep([f"data_root={elsewhere / 'mine'}"])
    assert moved.checkpoint_dir == f"{elsewhere / 'mine'}/checkpoints"
