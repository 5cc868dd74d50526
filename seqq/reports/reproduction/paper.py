"""The paper's experiments that seqq reproduces, by name (`seqq report --reproduction DIR
--experiment NAME`). Adding one (Figs 4–15, Tables 2–6) is its figure (`figure.py`), its doc
caption and section (`markdown.py`), its claim checks (`claims.py`) and one entry here."""

from __future__ import annotations

from seqq.reports.reproduction import claims, figure, markdown
from seqq.reports.reproduction.panels import PAPER_METHODS
from seqq.reports.reproduction.reproduce import Experiment

FIG3 = Experiment(
    name="fig3", title="Fig. 3", sweep="fig3", query="hitting_time", methods=PAPER_METHODS,
    level=100,  # the hybrid's calls with S = 100 tail samples
    block="reproduction",  # docs/reproduction.md's block, named before there were others
    figure=figure.fig3, caption=markdown.fig3_caption, section=markdown.fig3_section,
    claims=claims.fig3)

EXPERIMENTS = {e.name: e for e in (FIG3,)}
