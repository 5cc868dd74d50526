"""The sweep engine: sample queries, compute ground truth, run estimators, store results (the
work of `seqq query-sweep`, whose command is `seqq/commands/query_sweep.py`). An *experiment*
in seqq is one of the paper's (an `experiment=` preset of `seqq/conf/experiment/`, reported by
`seqq/reports/reproduction/experiments/`); a sweep is what runs one."""
