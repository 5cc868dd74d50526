"""Tables and figures from sweep results (the work of `seqq report`, whose command is
`seqq/commands/report.py`, and of `seqq query-sweep`'s report)."""
