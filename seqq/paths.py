"""Where seqq finds data: what it ships, and the data root for everything else.

What seqq ships (tiny Shakespeare, the WikiText-2 samples, the GPT-2 tokenizer files, the paper
authors' LSTMs and their licence) lives in `seqq/resources/`, and the commands' Hydra configs in
`seqq/conf/` (`CONF`), inside the package, so an installed seqq finds them from any directory,
with no project checkout. Everything a user adds or seqq generates (downloaded raw data,
processed caches, trained checkpoints) goes under the *data root*: `data_root=` on the command
line, else `$SEQQ_DATA`, else `./data` when the current directory has one (a project checkout),
else the user's data directory (`$XDG_DATA_HOME/seqq`, `~/.local/share/seqq`;
`~/Library/Application Support/seqq` on macOS, `%LOCALAPPDATA%\\seqq` on Windows). Readers look
under the data root first and fall back to the shipped file of the same relative path, so a
user's own copy always wins.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SHIPPED = Path(__file__).resolve().parent / "resources"
CONF = Path(__file__).resolve().parent / "conf"  # every command's Hydra configs, shipped too
ENV = "SEQQ_DATA"
LOCAL = Path("data")  # a project checkout's data root, relative to where seqq runs


def user_data_dir() -> Path:
    """The platform's per-user data folder for seqq (not created here)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "seqq"


def data_root(given: str | Path | None = None) -> Path:
    """The data root: `given`, else `$SEQQ_DATA`, else `./data` if it is a folder, else the user
    data folder. `./data` stays relative, so commands and provenance read as they are typed."""
    if given is not None and str(given):
        return Path(given).expanduser()
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    return LOCAL if LOCAL.is_dir() else user_data_dir()


def default_checkpoint_dir(root: str | Path | None = None) -> Path:
    """Where `seqq train` writes checkpoints and sweeps look for them: `<data root>/checkpoints`."""
    return data_root(root) / "checkpoints"


def shipped(relative: str | Path) -> Path:
    """A file or folder shipped with seqq (it may not exist: the caller says what is missing)."""
    return SHIPPED / relative


def find_data(root: str | Path | None, relative: str | Path) -> Path:
    """`<root>/<relative>` when it exists, else the shipped file of that path when seqq ships
    one, else `<root>/<relative>` again (where a missing file should be put)."""
    mine = data_root(root) / relative
    if mine.exists():
        return mine
    ours = shipped(relative)
    return ours if ours.exists() else mine
