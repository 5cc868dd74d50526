"""A sweep's work: sample queries, compute ground truth, run estimators, store results
(`seqq query-sweep`, whose command is `seqq/query_sweep.py`)."""
