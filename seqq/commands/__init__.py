"""The `seqq` commands, one module each (`train`, `query_sweep`, `report`, `ask`, `cache`), the
console script that dispatches to them (`cli.py`, also run as `python -m seqq.commands.cli`),
and what they share (`plumbing.py`: one-line errors, Hydra runs, `--help`). Everything below
(the sweep engine, estimators, models, reports) imports nothing from here."""
