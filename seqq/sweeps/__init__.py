"""The sweep engine: sample queries, compute ground truth, run estimators, store results (the
work of `seqq query-sweep`, whose command is `seqq/commands/query_sweep.py`). A *preset*
(`preset=<name>`, `seqq/conf/preset/`) is a named sweep: each of the paper's experiments has
one (reported by `seqq/reports/reproduction/experiments/`), and `demo` and `frontier` are
presets that are no experiment of the paper; an *experiment* is only ever one of the paper's."""
