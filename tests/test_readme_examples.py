"""Every example in README.md run as printed there: each `console` block's commands, whose
printed numbers must equal the README's (times aside), and the Python blocks, which must run.
A README whose numbers drift from what seqq prints fails here (issue 61).

A `console` block is a shell session: a line starting with `$ ` is a command (continued over
lines ending in a backslash), and the lines up to the next command are what it printed. The
numbers depend on the seed (every example uses the default, 0) and on float rounding, which
differs across CPUs, library builds and thread counts: the README's outputs come from 2
threads, so the commands run on 2 (`SEQQ_THREADS`), and on another kind of machine this test
may fail by a last digit (README, "Asking questions", says so)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, requires_smollm2

README = REPO / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?")
TIMING = re.compile(r"\d+(?:\.\d+)? s after loading")  # wall time: differs run to run
THREADS = "2"  # the README's outputs were printed with this many torch threads


@dataclass(frozen=True)
class Example:
    """One command of a console block, the lines the README shows it printed, and the
    commands before it in its block that printed nothing (e.g. writing a history file)."""

    command: str
    printed: tuple[str, ...]
    setup: tuple[str, ...] = ()

    @property
    def uses_smollm2(self) -> bool:
        return "--model smollm2" in self.command


def blocks(text: str, language: str) -> list[str]:
    """The bodies of the README's fenced blocks in `language`, in order."""
    return [body for lang, body in FENCE.findall(text) if lang == language]


def examples(text: str) -> list[Example]:
    """Every command of every `console` block that printed something, with what it printed."""
    found: list[Example] = []
    for body in blocks(text, "console"):
        lines = body.splitlines()
        silent: list[str] = []
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                i += 1
                continue
            command = [lines[i][2:]]
            while command[-1].endswith("\\"):
                i += 1
                command.append(lines[i].strip())
            i += 1
            printed = []
            while i < len(lines) and not lines[i].startswith("$ "):
                printed.append(lines[i])
                i += 1
            printed = [p for p in printed if p]
            if printed:
                found.append(Example("\n".join(command), tuple(printed), tuple(silent)))
            else:
                silent.append("\n".join(command))
    return found


def numbers(lines: tuple[str, ...] | list[str]) -> list[str]:
    """The numbers printed, in order, wall times left out."""
    return [n for line in lines for n in NUMBER.findall(TIMING.sub("", line))]


def new_users_cache(tmp_path: Path) -> Path:
    """A cache as a new user's: no distilled surrogates, since one an earlier test kept would
    twist `auto`'s answer, which the README shows as a fresh install gives it, untwisted; but
    the session's converted language models, which change no answer and take a minute each."""
    cache, converted = tmp_path / "seqq-cache", Path(os.environ["SEQQ_CACHE"]) / "models"
    converted.mkdir(parents=True, exist_ok=True)
    cache.mkdir()
    (cache / "models").symlink_to(converted, target_is_directory=True)
    return cache


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """`command` run by bash in `cwd` with `seqq` (also as `.venv/bin/seqq`) being this
    checkout's command line, on THREADS threads, with a new user's cache."""
    command = command.replace(".venv/bin/seqq ", "seqq ")
    prelude = f'seqq() {{ "{sys.executable}" -m seqq.commands.cli "$@"; }}\n'
    env = {**os.environ, "PYTHONPATH": str(REPO), "SEQQ_THREADS": THREADS,
           "SEQQ_CACHE": str(new_users_cache(cwd))}
    return subprocess.run(["bash", "-c", prelude + command], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


ALL = examples(README.read_text())


def test_the_readme_layout_pairs_every_command_with_its_output() -> None:
    """The parser finds the README's examples (so the slow test below cannot pass by finding
    none): each `seqq ask` with the lines it printed, and no `seqq ask` left in a bash block
    where its output could not be paired."""
    asks = [e for e in ALL if "seqq ask" in e.command]
    assert len(asks) >= 7 and all(numbers(e.printed) for e in asks)
    for body in blocks(README.read_text(), "bash"):
        assert "seqq ask" not in body, body
    assert numbers(["p = 0.5 ± 0.012 (standard error), 1,998 model calls, 12.31 s after "
                    "loading (K = 10)"]) == ["0.5", "0.012", "1,998", "10"]


@pytest.mark.slow
@pytest.mark.parametrize("example", [
    pytest.param(e, id=e.command.split("'")[-2] if "'" in e.command else e.command[:40],
                 marks=[requires_smollm2] if e.uses_smollm2 else [])
    for e in ALL])
def test_every_readme_command_prints_the_numbers_the_readme_shows(
        example: Example, tmp_path: Path) -> None:
    run = shell("\n".join([*example.setup, example.command]), tmp_path)
    assert run.returncode == 0, run.stderr
    printed = run.stdout.splitlines()
    assert numbers(printed) == numbers(example.printed), (
        "README.md shows:\n" + "\n".join(example.printed) + "\nseqq printed:\n" + run.stdout)


@pytest.mark.slow
def test_the_readme_python_blocks_run(tmp_path: Path) -> None:
    """The Python blocks, in order in one session as a reader would type them (the second uses
    the first's imports), from a directory that is not the checkout."""
    code = "\n".join(blocks(README.read_text(), "python"))
    assert code.count("seqq.") >= 10
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(REPO), "SEQQ_THREADS": THREADS})
    assert run.returncode == 0, run.stderr
