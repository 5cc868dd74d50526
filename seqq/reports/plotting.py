"""What every figure shares: the Agg backend, one colour per method, panel grids with room for
a figure-wide title and legend, integer horizon ticks, and saving as PNG + PDF."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

STYLE = {"hybrid": "C0", "importance": "C1", "beam": "C2", "uniform": "C3", "naive": "C4",
         "coverage_beam": "C5", "tail_beam": "C6", "exact": "k"}


class NotApplicable(Exception):
    """The results lack what a figure needs; the message says what that is."""


def grid(rows: int, cols: int, size: tuple[float, float] = (3.6, 2.9),
         **kw) -> tuple[Figure, np.ndarray]:
    """A rows × cols grid of panels under constrained layout, so titles, labels and the
    figure-wide legend (`legend`) never overlap."""
    return plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False,
                        layout="constrained", **kw)


def legend(fig: Figure, axes: Iterable[Axes] | np.ndarray, title: str | None = None) -> None:
    """One legend for the whole figure, outside the panels at the top, each label once."""
    handles: dict[str, object] = {}
    for ax in np.asarray(axes).flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside upper center",
                   ncol=min(len(handles), 4), fontsize=8, title=title, title_fontsize=8)


def integer_ticks(ax: Axes) -> None:
    """Horizons and steps are integers: no ticks at 1.5, 2.5, ..."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def empty(ax: Axes, text: str) -> None:
    """A panel with nothing to draw says so instead of showing blank axes."""
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=8, color="grey",
            transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def save(fig: Figure, out: Path, name: str) -> list[Path]:
    """Write `name`.png and `name`.pdf into `out` and release the figure."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    for path in paths:
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return paths
