"""The paper's figures and tables beside seqq's, from a sweep's results alone
(`seqq report <results> --reproduction docs/reproduction --doc docs/reproduction.md`,
`make reproduction`; issue 33).

Per experiment (`paper.EXPERIMENTS`) and per (dataset, model) in the results, at one budget
level S: a CSV of the panel's rows (`export.py`), one figure over all panels (`figure.py`), and,
with `--doc`, the Markdown between that experiment's `BEGIN`/`END` markers rewritten
(`markdown.py`): per panel its tables and the paper's claims checked on them (`claims.py`).
`panels.py` selects the rows, `stats.py` computes what is shown, `reproduce.py` runs the jobs.

Only repeat 0 and temperature T = 1 are used. Rows of any other method at the same S (e.g. the
frontier methods of `experiment=fig3_frontier`, run into the same sweep folder) get their own
table and panel row beside the budget setter's, not the CSV.
"""
