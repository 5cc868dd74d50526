"""What the experiments' figures share (each experiment draws its own, in its module under
`experiments/`): the quick-size report's figures (`seqq/reports/figures.py`) drawn on an
experiment's panels with N added to the title, and the markers of methods beyond the paper's.
The paper's figures are plots whose values its text does not give, so no paper values are
drawn."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
from matplotlib.figure import Figure

from seqq.reports.plotting import suptitle
from seqq.reports.reproduction.panels import ModelRun

# markers and colours of the non-paper methods, apart from the paper methods' registered colours
OTHER_STYLES = [("s", "C3"), ("^", "C4"), ("v", "C5"), ("D", "C6"), ("P", "C7"), ("X", "C8"),
                ("<", "C9"), (">", "black"), ("h", "darkgoldenrod"), ("*", "teal")]


def rows_of(runs: Sequence[ModelRun]) -> pd.DataFrame:
    return pd.concat([r.rows for r in runs])


def with_n(fig: Figure, runs: Sequence[ModelRun], what: str = "histories") -> Figure:
    """The figure with a last title line naming N per model."""
    suptitle(fig, fig.get_suptitle() + "\nN = " + ", ".join(f"{r.n:,} ({r.dataset})"
                                                             for r in runs) + f" {what}")
    return fig


def only(figures: dict[str, Figure]) -> Figure:
    (fig,) = figures.values()
    return fig


Drawn = Callable[[Sequence[ModelRun]], dict[str, Figure]]


def drawn(stem: str, draw: Callable[[pd.DataFrame], dict[str, Figure]]) -> Drawn:
    """An experiment's one figure: the report figure `draw` on its rows, N in the title."""
    return lambda runs: {stem: with_n(only(draw(rows_of(runs))), runs)}


def median_and_mean(stems: tuple[str, str],
                     draw: Callable[[pd.DataFrame, str], dict[str, Figure]]) -> Drawn:
    """Two figures of the same rows: `draw`'s median one and its mean one."""
    return lambda runs: {stem: with_n(only(draw(rows_of(runs), stat)), runs)
                         for stem, stat in zip(stems, ("median", "mean"), strict=True)}
