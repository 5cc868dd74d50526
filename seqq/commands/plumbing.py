"""What every `seqq` command shares: one line per mistake, Ctrl-C without a traceback, a report of
every failed job of a Hydra multirun, and `--help` that lists the command's own options.

`run_command` is the one wrapper around each command's `main(argv)`: it sizes torch's threads
by the CPUs the process may use (`seqq.threads`; not for `--help`, which needs no torch), and a
`SeqqError` (or a Hydra config mistake: an unknown group option, a malformed override) prints
`seqq <command>: <what is wrong and how to fix it>` and exits 2; Ctrl-C exits 130; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.types import RunMode

from seqq.errors import Interrupted, SeqqError
from seqq.paths import CONF

EXIT_MISTAKE = 2
EXIT_BUG = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
MISTAKES = (SeqqError, HydraException)


class JobFailed(SeqqError):
    """A job of a multirun failed; its error was printed when it happened, and the other jobs
    still ran."""


class _Escape(BaseException):
    """Carries a single run's exception past Hydra's job runner (which would add its own
    'Error executing job' line) to `run_command`, which reports it."""

    def __init__(self, error: Exception):
        super().__init__(error)
        self.error = error


@dataclass
class _Multirun:
    """The multirun jobs this process ran, and for each failure whether it was a mistake.
    `pid`: the process that runs the command. Jobs run in it (Hydra's basic launcher) count
    their failures here rather than raise them to the launcher (which would add its own line
    about the first one); jobs in other processes (SLURM) raise them."""

    pid: int | None = None
    jobs: int = 0
    failures: list[bool] = field(default_factory=list)


MULTIRUN = _Multirun()


def one_line(error: BaseException) -> str:
    """An error message on one line; Hydra's indented option lists become comma lists and its
    config search path (no help to a user) is dropped. A query error located in its text
    (`language.located`) keeps its two lines that show the text and a caret under the place."""
    if getattr(error, "column", None) is not None:
        message, *shown = str(error).strip().split("\n")
        return "\n".join([message, *shown])
    text = str(error).strip().split("\nConfig search path")[0]
    text = re.sub(r"\n\t+", ", ", re.sub(r":\s*\n\t+", ": ", text))
    line = ""
    for part in (p.strip() for p in text.splitlines()):
        if part:
            line += part if not line else (" " if line[-1] in ".:;," else "; ") + part
    return line


def _unescaped(main: Callable[[list[str]], int | None], argv: list[str]) -> int:
    """`main(argv)` with its threads sized, a single run's error re-raised as itself (its
    traceback and causes intact, no trace of the carrier)."""
    try:
        if not wants_help(argv):
            from seqq.threads import configure_threads  # imports torch

            configure_threads()
        return int(main(argv) or 0)
    except _Escape as escape:
        error = escape.error
    raise error


def run_command(command: str, main: Callable[[list[str]], int | None], argv: list[str]) -> int:
    """Run `main(argv)`; return the exit status, reporting mistakes and Ctrl-C in one line."""
    prefix = f"seqq {command}:"
    try:
        return _unescaped(main, argv)
    except Interrupted as stop:
        print(stop, file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print(f"{prefix} interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except JobFailed as failed:
        if not MULTIRUN.failures:  # jobs ran elsewhere (a SLURM launcher): the first is known
            print(f"{prefix} {failed}; every job's log has its error", file=sys.stderr)
            return EXIT_BUG
        print(f"{prefix} {failed}", file=sys.stderr)
        return EXIT_MISTAKE if all(MULTIRUN.failures) else EXIT_BUG
    except MISTAKES as mistake:
        print(f"{prefix} {with_suggestion(one_line(mistake))}", file=sys.stderr)
        return EXIT_MISTAKE


def with_suggestion(message: str) -> str:
    """Hydra's "Could not override 'x.y'" for a key no config has, with the nearest known key
    ("did you mean ...") instead of its advice to append the typo as a new key."""
    unknown = re.match(r"Could not override '([\w.]+)'\. To append to your config use \+", message)
    if unknown is None:
        return message
    key = unknown.group(1)
    near = difflib.get_close_matches(key, known_keys(), n=1, cutoff=0.75)
    hint = f"; did you mean {near[0]}?" if near else ""
    return (f"no config key {key!r}{hint} (`--cfg job` prints every key; a new key is added "
            f"with +{key}=<value>)")


@functools.cache
def known_keys() -> list[str]:
    """Every dotted key of the shipped configs: the commands' own files at the top level, each
    group's options under the group's name."""
    from omegaconf import OmegaConf

    def walk(node: Any, prefix: str) -> list[str]:
        if not isinstance(node, dict):
            return [prefix] if prefix else []
        return [k for name, value in node.items()
                for k in [f"{prefix}{name}", *walk(value, f"{prefix}{name}.")]]

    keys = set()
    for path in CONF.rglob("*.yaml"):
        group = path.parent.relative_to(CONF).as_posix()
        top = group in (".", "preset") or path.read_text().startswith("# @package _global_")
        tree = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        keys.update(walk(tree, "" if top else f"{group.replace('/', '.')}."))
    return sorted(keys)


def hydra_job(command: str) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Decorate a Hydra task function. A single run's error goes to `run_command`; in a
    multirun each failed job prints its error at once (a bug with its traceback) and the others
    still run, and the command then exits non-zero."""

    def decorate(task: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(task)
        def job(cfg: Any) -> Any:
            hydra = HydraConfig.get()
            if hydra.mode != RunMode.MULTIRUN:
                try:
                    return task(cfg)
                except Exception as error:
                    raise _Escape(error) from None
            MULTIRUN.jobs += 1
            try:
                return task(cfg)
            except Exception as error:
                mistake = isinstance(error, MISTAKES)
                MULTIRUN.failures.append(mistake)
                report = f"{_job_name(hydra)} failed: {one_line(error)}"
                if not mistake:
                    traceback.print_exception(error)
                print(f"seqq {command}: {report}", file=sys.stderr)
                if MULTIRUN.pid != os.getpid():
                    raise JobFailed(report) from error
                return None

        return job

    return decorate


def _job_name(hydra: Any) -> str:
    """`job #N (key=value ...)` with the values this job was given by the multirun's sweep
    (all its overrides where the command line is not at hand, as in a SLURM job)."""
    given = list(hydra.overrides.task)
    try:
        swept = {o.key_or_group for o in OverridesParser.create().parse_overrides(
            [a for a in sys.argv[1:] if not a.startswith("-")]) if o.is_sweep_override()}
    except HydraException:
        swept = set()
    shown = [o for o in given if o.split("=")[0].lstrip("+~") in swept] or given
    return f"job #{hydra.job.num} ({' '.join(shown)})"


def run_hydra(app: Callable[[], None], usage: Help, argv: list[str]) -> int:
    """Run a `@hydra.main` app on `argv` (or print the command's `usage` for -h/--help).
    HYDRA_FULL_ERROR hands Hydra's own config errors to `run_command` instead of Hydra printing
    them with a hint about this very variable."""
    if wants_help(argv):
        print(usage.text())
        return 0
    os.environ["HYDRA_FULL_ERROR"] = "1"
    sys.argv = [f"seqq {usage.command}", *argv]
    MULTIRUN.pid, MULTIRUN.jobs, MULTIRUN.failures = os.getpid(), 0, []
    app()
    if MULTIRUN.failures:
        raise JobFailed(f"{len(MULTIRUN.failures)} of {MULTIRUN.jobs} multirun jobs failed "
                        "(errors above); the others finished")
    return 0


@dataclass(frozen=True)
class Help:
    """The `--help` of a Hydra command: its config groups and keys, one line each."""

    command: str
    summary: str
    groups: Sequence[tuple[str, str]]  # (group, what it picks); options listed from conf/
    options: Sequence[tuple[str, str]]  # (dotted key, what it sets)
    multirun: bool = True

    def text(self) -> str:
        multirun = " [-m]" if self.multirun else ""
        lines = [f"usage: seqq {self.command}{multirun} [group=option ...] [key=value ...]", "",
                 self.summary, "", "config groups (group=option):"]
        for group, what in self.groups:
            choices = sorted(p.stem for p in (CONF / group).glob("*.yaml"))
            lines.append(f"  {group + '=':<22} {what}: {', '.join(choices)}")
        lines += ["", "options (key=value):"]
        lines += [f"  {key + '=':<22} {what}" for key, what in self.options]
        lines += ["", "flags:"]
        if self.multirun:
            lines.append(f"  {'-m, --multirun':<22} one job per combination of comma-separated "
                         "values, e.g. dataset=apps,moocs")
        lines.append(f"  {'--cfg job':<22} print the composed config and exit")
        return "\n".join(lines)


def wants_help(argv: Sequence[str]) -> bool:
    return any(a in ("-h", "--help") for a in argv)
