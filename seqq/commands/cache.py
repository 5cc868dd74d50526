"""`seqq cache`: what seqq keeps in its user cache (language models converted from GGUF files,
`seqq.models.lm_cache`, and surrogates distilled from models, `seqq.models.surrogate_cache`),
where, and how large; `seqq cache --clear` removes it.

    seqq cache            # one line per entry: where, size, what it was made from, when
    seqq cache --clear    # remove them all (the next load converts again, the next twisted
                          # answer distils again)
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
    parser.add_argument("--clear", action="store_true",
                        help="remove every converted model and distilled surrogate")
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
    # imports torch: only once the arguments are good
    from seqq.models import lm_cache, surrogate_cache
    from seqq.paths import cache_root

    root = cache_root()
    models, surrogates = lm_cache.entries(), surrogate_cache.entries()
    counted = f"{_count(len(models), 'model')}, {_count(len(surrogates), 'surrogate')}"
    if args.clear:
        freed = lm_cache.clear() + surrogate_cache.clear()
        print(f"removed {counted} from {root} ({size(freed)})" if freed
              else f"nothing cached in {root}")
        return 0
    if not models and not surrogates:
        print(f"nothing cached in {root} (SEQQ_CACHE moves it)")
        return 0
    print(f"{root} (SEQQ_CACHE moves it):")
    for entry in [*models, *surrogates]:
        print(f"  {entry.path.relative_to(root)}  {size(entry.size_bytes)}  from {entry.source} "
              f"({entry.created})")
    total = sum(e.size_bytes for e in [*models, *surrogates])
    print(f"{counted}, {size(total)}; seqq cache --clear removes them")
    return 0


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"
