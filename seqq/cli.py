"""`seqq <command> [hydra overrides]`: one console script, one module per command.

Each command is a Hydra app; the CLI only picks the module and hands it the remaining argv.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "train": ("seqq.train", "Train an LSTM (or check a pretrained LM) on a dataset"),
    "query-sweep": ("seqq.experiments.sweep", "Run estimators over many queries; write results"),
    "report": ("seqq.reports.cli", "Tables and figures from a results file"),
}


def _usage() -> str:
    lines = ["usage: seqq <command> [key=value ...]", "", "commands:"]
    lines += [f"  {name:<12} {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"seqq: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    sys.argv = [f"seqq {command}", *rest]
    result = module.main()
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
