"""What every figure shares: the Agg backend, one colour per method, panel grids with room for
a figure-wide title and legend, integer horizon ticks, and saving as PNG + PDF."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    LogFormatterSciNotation,
    LogLocator,
    MaxNLocator,
    NullLocator,
)

from seqq.reports.presentation import colours  # noqa: E402

SPARE = ("C7", "C8", "C9", "indigo", "goldenrod", "teal", "black", "slategray", "lime",
         "saddlebrown", "magenta", "navy")  # distinct from each other and from the methods'
# own colours, except black (exact's), which only a seventh extra method gets: the frontier's, which
# plots no `exact`


def method_colors(methods: Iterable[str]) -> dict[str, str]:
    """One colour per method, the same in every panel of a figure: a method with its own
    colour (`seqq.reports.presentation`) keeps it; any other (a labelled variant such as
    `smc_twisted`, a method without one) takes a spare colour in name order."""
    style = colours()
    others = sorted(set(methods) - set(style))
    spare = [SPARE[i % len(SPARE)] for i in range(len(others))]
    return {**style, **dict(zip(others, spare, strict=True))}


class NotApplicable(Exception):
    """The results lack what a figure needs; the message says what that is."""


def grid(rows: int, cols: int, size: tuple[float, float] = (3.6, 2.9),
         **kw) -> tuple[Figure, np.ndarray]:
    """A rows × cols grid of panels under constrained layout, so titles, labels and the
    figure-wide legend (`legend`) never overlap."""
    return plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False,
                        layout="constrained", **kw)


def wrapped(panels: int, per_row: int, size: tuple[float, float] = (3.6, 2.9),
            **kw) -> tuple[Figure, np.ndarray]:
    """`panels` panels in rows of at most `per_row` (a `grid`, the axes past the last panel
    hidden): one long strip of many panels is unreadable. Panels fill it row by row
    (`axes.flat`)."""
    cols = max(1, min(panels, per_row))
    fig, axes = grid(-(-panels // cols), cols, size=size, **kw)
    for ax in axes.flat[panels:]:
        ax.set_visible(False)
    return fig, axes


def legend(fig: Figure, axes: Iterable[Axes] | np.ndarray, title: str | None = None,
           extra: Iterable[Artist] = ()) -> None:
    """One legend for the whole figure, below the panels (the top holds the figure's title),
    each label once; `extra` adds entries no panel has (e.g. what a shaded band means)."""
    handles: dict[str, object] = {}
    for ax in np.asarray(axes).flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    for artist in extra:
        handles[artist.get_label()] = artist
    if handles:
        entry_inches = 0.6 + 0.065 * max(map(len, handles))  # marker + 8 pt text, roughly
        ncol = max(1, min(len(handles), 4, int(fig.get_figwidth() // entry_inches)))
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncol=ncol, fontsize=8, title=title, title_fontsize=8)


def suptitle(fig: Figure, text: str) -> None:
    """The figure's title, wrapped to the figure's width (a one-panel figure is narrow)."""
    width = max(30, int(fig.get_figwidth() * 11))  # characters of 10 pt text per line
    lines = [textwrap.fill(line, width) for line in text.split("\n")]
    fig.suptitle("\n".join(lines), fontsize=10)


def panel_title(ax: Axes, *lines: str, width: int = 42) -> None:
    """A panel's title, wrapped at its " · " separators so that long names (dataset, model,
    temperature, query kind, budget rule) never run into the neighbouring panel."""
    wrapped = []
    for line in lines:
        current = ""
        for part in line.split(" · "):
            if current and len(current) + 3 + len(part) > width:
                wrapped.append(current)
                current = part
            else:
                current = f"{current} · {part}" if current else part
        wrapped.append(current)
    ax.set_title("\n".join(wrapped), fontsize=8)


def integer_ticks(ax: Axes) -> None:
    """Horizons and steps are integers: no ticks at 1.5, 2.5, ..."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def log_axes(ax: Axes) -> None:
    """Log–log axes with a few labelled ticks and no minor ones. Decades are labelled where at
    least two fall in view; a shorter range (a sweep whose budgets span less than a decade)
    gets labelled ticks at 1-2-5, or at every integer multiple, instead of none. Minor-tick
    labels are off: they collide on short ranges, and many decades are slow to lay out."""
    ax.set(xscale="log", yscale="log")
    ax.autoscale_view()
    for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        low, high = sorted(limits)
        for subs in LOG_TICK_TIERS:
            locator = LogLocator(subs=subs, numticks=4)
            if sum(low <= t <= high for t in locator.tick_values(low, high)) >= 2:
                break
        axis.set_major_locator(locator)
        axis.set_minor_locator(NullLocator())
        if len(subs) > 1:
            # label every tick: by default only some multiples get one on short ranges
            axis.set_major_formatter(LogFormatterSciNotation(
                labelOnlyBase=False, minor_thresholds=(math.inf, math.inf)))


LOG_TICK_TIERS = ((1.0,), (1.0, 2.0, 5.0), tuple(float(m) for m in range(1, 10)))


def empty(ax: Axes, text: str) -> None:
    """A panel with nothing to draw says so instead of showing blank axes."""
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=8, color="grey",
            transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def save(fig: Figure, out: Path, name: str) -> list[Path]:
    """Write `name`.png and `name`.pdf into `out` and release the figure. The PDF has no
    creation date: a rerun on the same results rewrites the same bytes (git stays quiet)."""
    out.mkdir(parents=True, exist_ok=True)
    png, pdf = out / f"{name}.png", out / f"{name}.pdf"
    fig.savefig(png, dpi=120)
    fig.savefig(pdf, dpi=120, metadata={"CreationDate": None})
    plt.close(fig)
    return [png, pdf]
