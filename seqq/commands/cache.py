"""`seqq cache`: what seqq keeps in its user cache (language models converted from GGUF files,
`seqq.models.lm_cache`), where, and how large; `seqq cache --clear` removes it.

    seqq cache            # one line per converted model: folder, size, source file
    seqq cache --clear    # remove them all (the next load converts again)
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from seqq.errors import ConfigError


class _Parser(argparse.ArgumentParser):
    """argparse whose usage mistakes reach `run_command` as one-line `ConfigError`s."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message}; see seqq cache --help")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="seqq cache", description=__doc__.split("\n\n")[0],
                     epilog="SEQQ_CACHE moves the cache (default: the platform's user cache "
                            "directory, ~/.cache/seqq on Linux)")
    parser.add_argument("--clear", action="store_true", help="remove every cached model")
    return parser


def size(n: int) -> str:
    """Bytes as a person reads them: 541.6 MB."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    from seqq.models import lm_cache  # imports torch: only once the arguments are good

    folder = lm_cache.models_dir()
    if args.clear:
        freed = lm_cache.clear()
        print(f"removed {folder} ({size(freed)})" if freed else f"nothing cached in {folder}")
        return 0
    found = lm_cache.entries()
    if not found:
        print(f"nothing cached in {folder} (SEQQ_CACHE moves it)")
        return 0
    print(f"{folder} (SEQQ_CACHE moves it):")
    for entry in found:
        print(f"  {entry.path.name}  {size(entry.size_bytes)}  from {entry.source} "
              f"({entry.created})")
    total = sum(e.size_bytes for e in found)
    print(f"{len(found)} model{'s' * (len(found) != 1)}, {size(total)}; seqq cache --clear "
          "removes them")
    return 0
