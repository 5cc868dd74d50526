"""The sweep engine: sample queries, compute ground truth, run estimators, store results
(`seqq query-sweep`, whose command is `seqq/query_sweep.py`). "Experiment" in seqq means one of
the paper's (an `experiment=` preset of `seqq/conf/experiment/`, reported by
`seqq/reports/reproduction/experiments/`); a sweep is what runs one."""
