"""`seqq query-sweep`: sample queries, compute ground truth, run estimators, store results."""
