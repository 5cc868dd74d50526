"""README.md's generated blocks, rewritten by `make readme` (`python -m seqq.readme README.md`).

A block is a line `<!-- generated from <source>: make readme -->` and the lines after it up to
the first blank one; `BLOCKS` says what each source writes there. A test checks that README.md
equals its regeneration, so a new method's row is never pasted by hand, nor forgotten.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from seqq.estimators import METHODS, Guarantee, Method
from seqq.reports.presentation import presentation

# how the table's "unbiased" column words each guarantee
UNBIASED = {Guarantee.UNBIASED: "yes", Guarantee.EXACT: "exact",
            Guarantee.LOWER_BOUND: "lower bound"}


def methods_table() -> str:
    """The table of methods, one row per registered method, in the registry's order: what it
    guarantees and takes from the registry, its words from the reports' presentation table."""
    head = ("| method | what it computes | unbiased | bounds `lower`/`upper` | options |\n"
            "|---|---|---|---|---|")
    return "\n".join([head, *(_row(m) for m in METHODS.values())])


def _row(method: Method) -> str:
    options = ", ".join(f"`{n}`" for n in method.option_names())
    shown = presentation(method.name)
    return (f"| `{method.name}` | {shown.computes} | {UNBIASED[method.guarantee]} | "
            f"{shown.bounds} | {options} |")


BLOCKS: dict[str, Callable[[], str]] = {"the registry": methods_table}
BLOCK = re.compile(r"^<!-- generated from (.+): make readme -->\n(?:.+\n)*", re.MULTILINE)


def regenerate(text: str) -> str:
    """`text` with every generated block rewritten from its source."""
    def rewritten(block: re.Match) -> str:
        source = block[1]
        if source not in BLOCKS:
            raise ValueError(f"README block generated from {source!r}: no such source; "
                             f"known: {', '.join(BLOCKS)}")
        return f"<!-- generated from {source}: make readme -->\n{BLOCKS[source]()}\n"

    return BLOCK.sub(rewritten, text)


def main(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    new = regenerate(text)
    path.write_text(new, encoding="utf-8")
    print(f"{path}: {'regenerated' if new != text else 'already up to date'}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "README.md"))
