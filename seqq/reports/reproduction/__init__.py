"""The paper's figures and tables beside seqq's, from a sweep's results alone
(`seqq report <results> --reproduction docs/reproduction --doc docs/reproduction.md
--experiment NAME`, `make reproduction`; issues 33, 41 and 49).

One module per experiment of the paper under `experiments/` (found by `registry.py`): its
declaration (`reproduce.Experiment`: which sweep, query, methods, levels S and cells it
reads, its CSVs' columns), its figure, caption, per-panel section and claims. Per experiment and
per (dataset, model) in the results: the CSVs of the panel's rows (`export.py`), its figures
over all panels, and, with `--doc`, the Markdown between that experiment's `BEGIN`/`END`
markers rewritten (`markdown.py`): per panel its tables and the paper's claims checked on them
(`claims.py`), and the experiment's row of the summary table at the top. `panels.py` selects
the rows (histories done in every cell), `stats.py` computes what is shown, `reproduce.py` runs
the jobs.

Only repeat 0 is used, and temperature T = 1 unless an experiment reads several. Rows of any
other method at the same S (e.g. the frontier methods of `preset=fig3_frontier`, run into the
same sweep folder) get their own table and panel row beside the budget setter's, not the CSV.
"""
