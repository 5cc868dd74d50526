"""`seqq <command> [options]`: one console script, one module per command.

A command module is imported only when it runs (by name, from `COMMANDS`), so `seqq --version`
and `seqq --help` answer at once; each module's `main(argv)` runs under `run_command`, which
sizes torch's threads and turns every mistake into one line. The process is tuned first
(`seqq.process`), before any command loads torch.
"""

from __future__ import annotations

import importlib
import os
import sys
from importlib import metadata

from seqq.commands.plumbing import EXIT_BUG, EXIT_MISTAKE, run_command
from seqq.process import tune_process

COMMANDS = {
    "train": ("seqq.commands.train", "train an LSTM (or score a pretrained LM) on a dataset"),
    "query-sweep": ("seqq.commands.query_sweep", "run estimators over many queries; write results "
                    "and a report"),
    "report": ("seqq.commands.report", "tables and figures from sweep results"),
    "ask": ("seqq.commands.ask", "one question about one model's continuation of one history"),
    "cache": ("seqq.commands.cache", "list or clear the converted language models seqq keeps"),
}


def usage() -> str:
    lines = ["usage: seqq <command> [options]", "       seqq <command> --help", "", "commands:"]
    lines += [f"  {name:<12} {summary}" for name, (_, summary) in COMMANDS.items()]
    lines += ["", "  --version    print the version and exit"]
    return "\n".join(lines)


def version() -> str:
    try:
        return metadata.version("seqq")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    tune_process()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(usage(), file=sys.stderr)
        return EXIT_MISTAKE
    command, rest = argv[0], argv[1:]
    if command in ("-h", "--help"):
        print(usage())
        return 0
    if command in ("-V", "--version"):
        print(f"seqq {version()}")
        return 0
    if command not in COMMANDS:
        print(f"seqq: unknown command {command!r}; run one of: {', '.join(COMMANDS)} "
              "(seqq --help)", file=sys.stderr)
        return EXIT_MISTAKE
    module = importlib.import_module(COMMANDS[command][0])
    try:
        return run_command(command, module.main, rest)
    except BrokenPipeError:  # output piped into `head`: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
