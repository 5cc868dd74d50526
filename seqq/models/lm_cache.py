"""Language models read from GGUF files (SmolLM2, ...), converted once and cached.

Reading a GGUF file through `transformers` de-quantises every tensor in Python and builds the
tokenizer from the file's metadata: tens of seconds, every time. The first load here does that
once and writes what it produced, the float32 weights (safetensors), the config and the
tokenizer, into an entry of the user's cache directory (`SEQQ_CACHE`, default the platform's
cache directory: ~/.cache/seqq on Linux); every later load reads that entry, which takes
seconds. An entry's folder and key: `seqq.paths.gguf_conversion`; the WikiText tokenised for
the model reads its tokenizer from there too. `seqq cache` lists the entries and clears them.

During the conversion the file is parsed once: `transformers` reads it separately for the
config, the tokenizer and the weights, and all three reads share one `gguf.GGUFReader`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch

from seqq.errors import ModelLoadError
from seqq.models.hf import HFCausalLM
from seqq.models.user_cache import CacheEntry, clear_folder, described, disk_size
from seqq.paths import CONVERSION_FORMAT, CONVERSION_MANIFEST, converted_models_dir, gguf_conversion

WEIGHTS = "model.safetensors"


def entries() -> list[CacheEntry]:
    """Every complete entry in the cache, by name."""
    folder = converted_models_dir()
    found = [described(path, path / CONVERSION_MANIFEST, disk_size(path))
             for path in (sorted(folder.iterdir()) if folder.is_dir() else [])]
    return [entry for entry in found if entry is not None]


def clear() -> int:
    """Remove every entry (and leftovers of interrupted conversions); returns the bytes freed."""
    return clear_folder(converted_models_dir())


def load_gguf(gguf_file: str | Path, device: str | torch.device | None = None,
              dtype: torch.dtype = torch.float32, verbose: bool = False) -> HFCausalLM:
    """The causal LM in a GGUF file, from its cache entry (converted first if there is none;
    `verbose` shows the conversion's own progress bar)."""
    gguf_file = Path(gguf_file)
    if not gguf_file.is_file():
        raise ModelLoadError(f"GGUF file {gguf_file} not found")
    entry = gguf_conversion(gguf_file)
    if not (entry / CONVERSION_MANIFEST).is_file():
        model, tokenizer = convert(gguf_file, entry, verbose)  # used as converted: no re-read
        return HFCausalLM(model.to(dtype), tokenizer, device)
    try:
        model, tokenizer = _read(entry, dtype)
    except (OSError, ValueError) as damaged:  # e.g. a file removed or truncated by hand
        print(f"seqq: the cached conversion in {entry} cannot be read ({_first_line(damaged)}); "
              "converting again", file=sys.stderr)
        shutil.rmtree(entry, ignore_errors=True)
        model, tokenizer = convert(gguf_file, entry, verbose)
        model = model.to(dtype)
    return HFCausalLM(model, tokenizer, device)


def _read(entry: Path, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(entry), dtype=dtype, local_files_only=True)
    return model, AutoTokenizer.from_pretrained(str(entry), local_files_only=True)


def convert(gguf_file: Path, entry: Path, verbose: bool = False):
    """De-quantise the GGUF file once into `entry` (float32 safetensors, config, tokenizer) and
    return the (model, tokenizer) written. The entry is written into a temporary folder and
    renamed into place, so a killed conversion leaves no entry behind and two processes
    converting at once both end with a complete one; a cache that cannot be written costs only
    the caching. Unless `verbose`, what transformers prints meanwhile (a progress bar no
    setting turns off) is dropped: seqq's one line says what is happening."""
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    print(f"seqq: converting {gguf_file.name} to float32 once, into {entry} (later loads read "
          "it from there)", file=sys.stderr)
    quiet = contextlib.nullcontext() if verbose else contextlib.redirect_stderr(io.StringIO())
    with _parsed_once(), quiet:
        try:
            model = AutoModelForCausalLM.from_pretrained(str(gguf_file.parent),
                                                         gguf_file=gguf_file.name,
                                                         dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(str(gguf_file.parent),
                                                      gguf_file=gguf_file.name)
        except ImportError as e:  # transformers reads GGUF through the `gguf` package
            raise ModelLoadError(f"reading {gguf_file.name} needs the `gguf` package: "
                                 "pip install gguf") from e
        except (OSError, ValueError) as e:
            raise ModelLoadError(f"{gguf_file} cannot be read as a causal LM: "
                                 f"{_first_line(e)}") from e
    if hasattr(model.config, "quantization_config"):  # the weights written are plain float32
        del model.config.quantization_config
    partial = entry.parent / f".{entry.name}.{os.getpid()}.partial"
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        model.config.save_pretrained(str(partial))
        save_model(model, str(partial / WEIGHTS), metadata={"format": "pt"})
        tokenizer.save_pretrained(str(partial))
        (partial / CONVERSION_MANIFEST).write_text(json.dumps({
            "source": str(gguf_file.resolve()), "format": CONVERSION_FORMAT,
            "created": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=1))
        try:
            partial.rename(entry)
        except OSError:  # another process finished first: its entry is as good as ours
            if not (entry / CONVERSION_MANIFEST).is_file():
                raise
    except OSError as e:
        print(f"seqq: cannot cache the conversion in {entry.parent} ({e.strerror or e}); set "
              "SEQQ_CACHE to a writable folder", file=sys.stderr)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return model, tokenizer


@contextlib.contextmanager
def _parsed_once() -> Iterator[None]:
    """`gguf.GGUFReader` returning one reader per file while the block runs: `transformers`
    reads a GGUF file once for its config, once for its tokenizer and once for its weights, and
    each read parses all of the file's metadata (tens of thousands of vocabulary entries)."""
    try:
        import gguf
    except ImportError:  # transformers will say what to install
        yield
        return
    original, readers = gguf.GGUFReader, {}

    def shared_reader(path, *args, **kwargs):
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = original(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader = shared_reader
    try:
        yield
    finally:
        gguf.GGUFReader = original


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
