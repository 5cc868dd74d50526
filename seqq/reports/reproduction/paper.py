"""The paper's experiments that seqq reproduces, by name (`seqq report --reproduction DIR
--experiment NAME`), and the summary table's rows for those it does not (yet). Adding one is its
figure (`figure.py`), its doc caption and section (`markdown.py`), its claim checks
(`claims.py`) and one entry here (and in the Makefile's `REPRODUCE`).

Experiments that read the same rows share one CSV (`csv=`, the same selection): Figs 7–9 and
Fig. 4a read Figs 5/6's (the horizons sweep: S = 10, 100, 1000, its S = 100 rows Fig. 3's
protocol, with H(q)); Figs 5/6, 10/11 and 13/4b are one entry each, since each pair plots the
same rows.
"""

from __future__ import annotations

import dataclasses

from seqq.reports.reproduction import claims, figure, markdown
from seqq.reports.reproduction.export import ESTIMATE_COLUMNS, FIG3_COLUMNS
from seqq.reports.reproduction.panels import PAPER_METHODS
from seqq.reports.reproduction.reproduce import Experiment

FIG3 = Experiment(
    name="fig3", title="Fig. 3", sweep="fig3", query="hitting_time", methods=PAPER_METHODS,
    levels=(100,),  # the hybrid's calls with S = 100 tail samples
    block="reproduction",  # docs/reproduction.md's block, named before there were others
    figure=figure.fig3, caption=markdown.fig3_caption, section=markdown.fig3_section,
    claims=claims.fig3, verdict=claims.verdict(claims.fig3_checks))

FIG5 = Experiment(
    name="fig5", title="Figs 5, 6", sweep="horizons", query="hitting_time",
    methods=PAPER_METHODS, levels=(10, 100, 1000), block="fig5", cells=("budget_level",),
    columns=(*FIG3_COLUMNS, "entropy"), split="S",  # ~2 MB per level at N = 1000
    figure=figure.fig5, caption=markdown.fig5_caption, section=markdown.fig5_section,
    claims=claims.table(claims.fig5, "Figs 5, 6"), verdict=claims.verdict(claims.fig5))

FIG4A = dataclasses.replace(
    FIG5, name="fig4a", title="Fig. 4a", block="fig4a", csv=FIG5.name,
    figure=figure.fig4a, caption=markdown.fig4a_caption, section=markdown.fig4a_section,
    claims=claims.table(claims.fig4a, "Fig. 4a"), verdict=claims.verdict(claims.fig4a))

FIG7_9 = dataclasses.replace(
    FIG5, name="fig7-9", title="Figs 7–9", block="fig7-9", csv=FIG5.name, datasets=("moocs",),
    figure=figure.fig7_9, caption=markdown.fig7_9_caption, section=markdown.fig7_9_section,
    claims=claims.table(claims.fig7_9, "Figs 7–9"), verdict=claims.verdict(claims.fig7_9))

FIG10 = Experiment(
    name="fig10", title="Figs 10, 11", sweep="budgets", query="hitting_time",
    methods=(*PAPER_METHODS, "uniform", "naive"), levels=None, block="fig10",
    cells=("budget_level",), split="K",  # ~3.6 MB per K at N = 1000
    figure=figure.fig10, caption=markdown.fig10_caption, section=markdown.fig10_section,
    claims=claims.table(claims.fig10, "Figs 10, 11"), verdict=claims.verdict(claims.fig10))

FIG12 = Experiment(
    name="fig12", title="Fig. 12", sweep="coverage", query="event_at",
    methods=("coverage_beam",), levels=None, block="fig12",
    columns=("history_id", "K", "method", "alpha", "model_calls", "estimate", "beam_sizes"),
    figure=figure.fig12, caption=markdown.fig12_caption, section=markdown.fig12_section,
    claims=claims.table(claims.fig12, "Fig. 12"), verdict=claims.verdict(claims.fig12))

FIG13 = Experiment(
    name="fig13", title="Figs 4b, 13", sweep="temperature", query="hitting_time",
    methods=PAPER_METHODS, levels=(100,), block="fig13", temperatures=None,
    cells=("temperature",), columns=(*FIG3_COLUMNS, "temperature"),
    figure=figure.fig13, caption=markdown.fig13_caption, section=markdown.fig13_section,
    claims=claims.table(claims.fig13, "Figs 4b, 13"), verdict=claims.verdict(claims.fig13))

FIG14 = Experiment(
    name="fig14", title="Fig. 14", sweep="unaccounted", query="a_before_b",
    methods=("importance",), levels=(1000,), block="fig14",
    cells=("budget_level",),  # both orders of each pair: as many queries per cell as the fullest
    columns=(*ESTIMATE_COLUMNS, "query"),
    figure=figure.fig14, caption=markdown.fig14_caption, section=markdown.fig14_section,
    claims=claims.table(claims.fig14, "Fig. 14"), verdict=claims.verdict(claims.fig14))

FIG15 = Experiment(
    name="fig15", title="Fig. 15", sweep="case_study", query="a_before_b",
    methods=("importance",), levels=(1000,), block="fig15",
    columns=(*ESTIMATE_COLUMNS, "share"),
    figure=figure.fig15, caption=markdown.fig15_caption, section=markdown.fig15_section,
    claims=claims.table(claims.fig15, "Fig. 15"), verdict=claims.verdict(claims.fig15))

EXPERIMENTS = {e.name: e for e in (FIG3, FIG4A, FIG13, FIG5, FIG7_9, FIG10, FIG12, FIG14,
                                   FIG15)}

# The summary table at the top of docs/reproduction.md, in the paper's order: a reproduced
# experiment's row until its first export, and the rows of those not reproduced here, with why
NOT_EXPORTED = ("–", "–", "not run yet at paper size")
SUMMARY: dict[str, tuple[str, str, str]] = {
    "Fig. 1": ("GPT-2 (seqq: SmolLM2-135M)", "–",
               "not run: it needs no ground truth, but SmolLM2 steps ~100 rows/s on one CPU "
               "thread here, ~1 h per run of IS and naive sampling over K ≤ 30 on 4 prefixes "
               "and tens of runs for a variance; the protocol (end-of-sentence hitting time) "
               "waits for a GPU"),
    FIG3.title: NOT_EXPORTED,
    FIG4A.title: NOT_EXPORTED,
    FIG13.title: NOT_EXPORTED,
    FIG5.title: NOT_EXPORTED,
    FIG7_9.title: NOT_EXPORTED,
    FIG10.title: NOT_EXPORTED,
    FIG12.title: NOT_EXPORTED,
    FIG14.title: NOT_EXPORTED,
    FIG15.title: NOT_EXPORTED,
    "Table 2": ("GPT-2 medium on WikiText (seqq: SmolLM2-135M)", "–",
                "not run: the first ground truth (App. F.3 rule) took over 7 min on one CPU "
                "thread, so N = 100 × K = 3, 4, 5 needs over 35 h here; the twisted judge "
                "has no surrogate for V = 49,152 and had not finished its first 4 truths at "
                "K = 3 in 4.6 min; the weights (93 MB) exceed what travels to a lent GPU "
                "(64 MiB); `make table2 SIZE=paper LARGE_LM=smollm2` on a GPU"),
    "Table 3": ("Amazon Reviews", "–", "blocked: needs the Reviews data, which is not here"),
    "Tables 4, 5": ("Shakespeare, MOOCs (authors' LSTMs)", "–",
                    "not run yet at paper size: `make paper SIZE=paper` (the `kl` preset)"),
    "Table 6": ("Mobile Apps", "–", "blocked: needs the Mobile Apps data, which is not here"),
}
