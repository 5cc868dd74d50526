"""The docs a newcomer reads first stay true to the tree: decisions.md's sections run in number
order and name only files that exist; the README shows where things are right after its quick
start and names only presets that exist."""

from __future__ import annotations

import re
import subprocess

from conftest import REPO

from seqq.paths import CONF

DECISIONS = (REPO / "docs" / "decisions.md").read_text(encoding="utf-8")
README = (REPO / "README.md").read_text(encoding="utf-8")


def _tracked() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, text=True, check=True)
    return listed.stdout.split()


def test_decisions_sections_run_in_number_order() -> None:
    numbers = [int(n) for n in re.findall(r"(?m)^## (\d+)", DECISIONS)]
    assert numbers and numbers == sorted(numbers) and len(set(numbers)) == len(numbers)


def test_decisions_name_only_files_that_exist() -> None:
    """Every backticked path or module file (`seqq/estimators/horizons.py`, `allowance.py`,
    `engine/trie/`) is some tracked file's path or the end of one."""
    files = _tracked()
    named = {m.rstrip("/") for m in re.findall(r"`([\w./-]+(?:\.py|/))`", DECISIONS)}
    missing = [m for m in sorted(named)
               if not any(f == m or f.startswith(f"{m}/") or f"/{m}" in f for f in files)]
    assert not missing, f"docs/decisions.md names {missing}, which no file is"


def test_the_readme_says_where_things_are_after_its_quick_start() -> None:
    sections = re.findall(r"(?m)^## (.+)$", README)
    assert sections[:2] == ["Two commands", "Where things are"]


def test_the_readme_names_only_presets_that_exist() -> None:
    presets = {p.stem for p in (CONF / "preset").glob("*.yaml")}
    named = set(re.findall(r"preset=(\w+)", README))
    for row in re.findall(r"(?m)^\| `make [^\n]+", README):  # the targets table's preset column
        named |= set(re.findall(r"`(\w+)`", row.split("|")[3]))
    assert named and named <= presets, sorted(named - presets)
