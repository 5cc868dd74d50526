"""The tests that judge the paper's claims, and their thresholds, written once: a claim that "A
beats B" is judged per cell by a paired test on the per-query RAE, a trend ("grows with K",
"3× per 10× the level S") by its fitted slope with a bootstrap interval over the histories. Each
cell's test gives a `Cell`: which way its estimate points and its two-sided p-value. A claim's
cells are one family: a cell supports the claim when its test says so beyond the noise after
Holm's step-down correction over the claim's cells (`holm`, family-wise level `LEVEL`),
contradicts it when the test says the opposite beyond the noise, and is undecided otherwise
(`Tally`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest, norm

# the family-wise level of a claim's cells (Holm's correction over them), the two-sided level of
# a claim about one cell, and 1 − the coverage of every interval shown
LEVEL = 0.05
MULTIPLE_COMPARISONS = (f"Holm's step-down correction over each claim's cells, family-wise "
                        f"level {LEVEL:g}")
RESAMPLES = 400  # bootstrap resamples of the histories behind an interval of a slope
SEED = 0  # the resamples are drawn alike at every run: the doc is regenerated unchanged
SUPPORTS, UNDECIDED, CONTRADICTS = 1, 0, -1
Z = float(norm.ppf(1 - LEVEL / 2))


@dataclass(frozen=True)
class Cell:
    """One cell's test of a claim: which way its estimate points (SUPPORTS or CONTRADICTS;
    UNDECIDED when exactly neither) and the two-sided p-value of "neither way"."""

    way: int
    p: float


def holm(p_values: Sequence[float], level: float = LEVEL) -> list[bool]:
    """Holm's step-down correction: which of a family's hypotheses are rejected at family-wise
    level `level` (the smallest p against level/m, the next against level/(m − 1), …, stopping
    at the first that is not below its bound). NaN is never rejected."""
    ps = [1.0 if not np.isfinite(p) else float(p) for p in p_values]
    rejected = [False] * len(ps)
    for rank, i in enumerate(sorted(range(len(ps)), key=ps.__getitem__)):
        if ps[i] >= level / (len(ps) - rank):
            break
        rejected[i] = True
    return rejected


def sign_test(a: np.ndarray, b: np.ndarray) -> tuple[int, int, float]:
    """Paired sign test of A's against B's per-query values (lower is better): how many
    queries A is lower, B is lower (ties dropped), and the two-sided exact binomial p."""
    wins, losses = int((a < b).sum()), int((a > b).sum())
    p = binomtest(wins, wins + losses).pvalue if wins + losses else 1.0
    return wins, losses, float(p)


def sign_lead(a: np.ndarray, b: np.ndarray) -> Cell:
    """The cell's `sign_test`: SUPPORTS when A is lower on more queries, CONTRADICTS when B is,
    with its p-value."""
    wins, losses, p = sign_test(a, b)
    return Cell(int(np.sign(wins - losses)), p)


def mean_lead(a: np.ndarray, b: np.ndarray) -> Cell:
    """The paired mean difference B − A: SUPPORTS when A's mean is the lower, CONTRADICTS when
    higher, with the two-sided p-value of its normal approximation (the `LEVEL` interval
    excludes 0 exactly when p < LEVEL)."""
    diff = np.asarray(b, float) - np.asarray(a, float)
    if len(diff) < 2:
        return Cell(UNDECIDED, 1.0)
    se = diff.std(ddof=1) / math.sqrt(len(diff))
    if se == 0:
        return Cell(int(np.sign(diff.mean())), 0.0 if diff.mean() else 1.0)
    return Cell(int(np.sign(diff.mean())), float(2 * norm.sf(abs(diff.mean()) / se)))


def outcome(low: float, high: float, above: float = 0.0) -> int:
    """SUPPORTS when the interval lies above `above`, CONTRADICTS when below, else UNDECIDED."""
    return SUPPORTS if low > above else CONTRADICTS if high < above else UNDECIDED


def slope(x: Sequence[float], y: Sequence[float]) -> float:
    """The least-squares slope of y against x over the finite points (NaN below two)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    return float(np.polyfit(x[keep], y[keep], 1)[0]) if keep.sum() >= 2 else math.nan


@dataclass(frozen=True)
class Boot:
    """A statistic, its (1 − LEVEL) percentile interval and the resampled values behind it;
    unpacks and indexes as (value, low, high). Its p-values invert the percentile interval: twice the share
    of resamples on the far side of the threshold (the interval at level p just touches it)."""

    value: float
    low: float
    high: float
    draws: np.ndarray

    @classmethod
    def of(cls, value: float, draws: Sequence[float]) -> Boot:
        draws = np.asarray(draws, float)
        if not np.isfinite(draws).any():
            return cls(float(value), math.nan, math.nan, draws)
        low, high = np.nanpercentile(draws, [100 * LEVEL / 2, 100 * (1 - LEVEL / 2)])
        return cls(float(value), float(low), float(high), draws)

    def __iter__(self):
        return iter((self.value, self.low, self.high))

    def __getitem__(self, i: int) -> float:
        return (self.value, self.low, self.high)[i]

    def map(self, f: Callable[[np.ndarray], np.ndarray]) -> Boot:
        """f of the statistic and of every resample (a monotone f: the interval follows)."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return Boot.of(float(f(np.float64(self.value))), f(self.draws))

    def _share(self, below: bool, threshold: float) -> float:
        d = self.draws[np.isfinite(self.draws)]
        return float(np.mean(d <= threshold if below else d >= threshold)) if len(d) else 1.0

    def cell(self, threshold: float = 0.0, falls: bool = False) -> Cell:
        """SUPPORTS when the statistic lies above `threshold` (below it with `falls`),
        CONTRADICTS on the other side, with the p-value of "on neither side"."""
        if not np.isfinite(self.value):
            return Cell(UNDECIDED, 1.0)
        way = int(np.sign(self.value - threshold)) * (-1 if falls else 1)
        far = self._share(self.value > threshold, threshold)
        return Cell(way, min(1.0, 2 * far))

    def cell_within(self, band: tuple[float, float]) -> Cell:
        """An equivalence test of "about x": SUPPORTS when the statistic lies inside `band`,
        p-value twice the larger share of resamples beyond either edge (p < LEVEL: the interval
        lies inside); CONTRADICTS outside it, p-value twice the share on the band's side of
        the near edge (p < LEVEL: the interval lies wholly outside)."""
        if not np.isfinite(self.value):
            return Cell(UNDECIDED, 1.0)
        if band[0] <= self.value <= band[1]:
            return Cell(SUPPORTS, min(1.0, 2 * max(self._share(True, band[0]),
                                                   self._share(False, band[1]))))
        far = (self._share(False, band[0]) if self.value < band[0]
               else self._share(True, band[1]))
        return Cell(CONTRADICTS, min(1.0, 2 * far))


def bootstrap(statistic: Callable[[np.ndarray], float], n: int) -> Boot:
    """`statistic` of all n histories, and its (1 − LEVEL) percentile interval over
    `RESAMPLES` resamples of them (`statistic` takes the rows' indices)."""
    rng = np.random.default_rng(SEED)
    values = [statistic(rng.integers(0, n, n)) for _ in range(RESAMPLES)]
    return Boot.of(statistic(np.arange(n)), values)


def per_history(rows: pd.DataFrame, columns: Sequence[str], value: str = "rae") -> pd.DataFrame:
    """`value` per history (rows) and combination of `columns` (columns), e.g. RAE per history
    and (method, K): the paired table the tests resample."""
    return rows.pivot_table(index="history_id", columns=list(columns), values=value,
                            aggfunc="first")


def median_slope(table: np.ndarray, x: Sequence[float],
                 transform: Callable[[np.ndarray], np.ndarray] = np.log) -> Boot:
    """The slope of transform(median over histories) of `table`'s columns against `x`, with
    its bootstrap interval (`bootstrap`); `table` is histories × len(x)."""
    with np.errstate(divide="ignore"):
        return bootstrap(lambda idx: slope(x, transform(np.nanmedian(table[idx], 0))),
                         len(table))


def significant(cells: Sequence[Cell]) -> list[int]:
    """Each cell's outcome after Holm's correction over them all (`holm`): its way where its
    p-value is rejected, UNDECIDED elsewhere. The one place a claim's cells are counted from."""
    rejected = holm([c.p for c in cells])
    return [c.way if r else UNDECIDED for c, r in zip(cells, rejected, strict=True)]


@dataclass(frozen=True)
class Tally:
    """A claim's cells by their test's outcome after Holm's correction over them
    (`significant`), and before it (`uncorrected`: each cell at `LEVEL` alone)."""

    supports: int
    contradicts: int
    cells: int
    uncorrected: tuple[int, int] = (0, 0)

    @classmethod
    def of(cls, cells: Sequence[Cell]) -> Tally:
        found = significant(cells)
        raw = [c.way if c.p < LEVEL else UNDECIDED for c in cells]
        return cls(found.count(SUPPORTS), found.count(CONTRADICTS), len(cells),
                   (raw.count(SUPPORTS), raw.count(CONTRADICTS)))

    def said(self, unit: str = "cells") -> str:
        """"beyond the noise in 6 of 18 cells, the opposite in 1 (Holm; uncorrected 8, 1)"."""
        raw = self.uncorrected
        return (f"beyond the noise in {self.supports} of {self.cells} {unit}"
                + (f", the opposite in {self.contradicts}" if self.contradicts else "")
                + (f" (Holm; each cell alone: {raw[0]}"
                   + (f", the opposite {raw[1]}" if raw[1] else "") + ")"
                   if raw != (self.supports, self.contradicts) else ""))


def beats(rows: pd.DataFrame, cells: Sequence[str], winner: str, rivals: Sequence[str],
          lead: Callable[[np.ndarray, np.ndarray], Cell] = sign_lead) -> dict[tuple, Cell]:
    """Per cell (a combination of `cells`' values) a `Cell`: SUPPORTS when `winner`'s per-query
    RAE is the lower against every rival (`lead` on the queries both ran; p the largest of
    theirs: all must hold), else CONTRADICTS with the smallest p of the rivals that are lower,
    times the number of rivals (Bonferroni within the cell)."""
    wide = per_history(rows, ["method", *cells])
    out = {}
    for key in wide[winner].columns:
        key = key if isinstance(key, tuple) else (key,)
        leads = []
        for rival in rivals:
            both = wide[[(winner, *key), (rival, *key)]].dropna().to_numpy()
            leads.append(lead(both[:, 0], both[:, 1]))
        if all(c.way == SUPPORTS for c in leads):
            out[key] = Cell(SUPPORTS, max(c.p for c in leads))
        else:
            worst = min(c.p for c in leads if c.way != SUPPORTS)
            out[key] = Cell(CONTRADICTS if any(c.way == CONTRADICTS for c in leads)
                            else UNDECIDED, min(1.0, worst * len(leads)))
    return out


def cell_name(cells: Sequence[str], key: tuple) -> str:
    """"S = 10, K = 3" for the cell `key` of `cells` (budget_level named S)."""
    names = ["S" if c == "budget_level" else c for c in cells]
    return ", ".join(f"{n} = {v:g}" for n, v in zip(names, key, strict=True))


def where(outcomes: dict[tuple, Cell], cells: Sequence[str], wanted: int) -> str:
    """The cells whose outcome after Holm's correction over them all is `wanted`, named, or
    "none"."""
    keys = [k for k, o in zip(outcomes, significant(list(outcomes.values())), strict=True)
            if o == wanted]
    if not keys:
        return "none"
    if len(cells) == 1:
        name = "S" if cells[0] == "budget_level" else cells[0]
        return f"{name} = " + ", ".join(f"{k[0]:g}" for k in keys)
    return "; ".join(cell_name(cells, k) for k in keys)


def median_trends(rows: pd.DataFrame, by: Sequence[str], along: str,
                  x: Callable[[float], float] = float,
                  transform: Callable[[np.ndarray], np.ndarray] = np.log
                  ) -> dict[tuple, Boot]:
    """Per combination of `by` (e.g. method and K): `median_slope` of the median RAE against
    x(`along`) (e.g. log10 of the level S), on the histories that ran every value of it."""
    out = {}
    for key, block in rows.groupby(list(by), sort=True):
        table = per_history(block, [along]).dropna()
        out[key if isinstance(key, tuple) else (key,)] = median_slope(
            table.to_numpy(), [x(v) for v in table.columns], transform)
    return out


def trend_said(trends: dict[tuple, Boot], unit: str) -> str:
    """The range of the fitted slopes: "−0.40 … −0.21 per decade"."""
    slopes = [b for b, _, _ in trends.values()]
    return f"{min(slopes):+.2f} … {max(slopes):+.2f} {unit}"


def within(low: float, high: float, band: tuple[float, float]) -> int:
    """SUPPORTS when the interval lies inside `band` (a claim of "about x", judged as an
    equivalence test), CONTRADICTS when it lies wholly outside, UNDECIDED when it straddles an
    edge."""
    if band[0] <= low and high <= band[1]:
        return SUPPORTS
    return CONTRADICTS if high < band[0] or low > band[1] else UNDECIDED


def majority(hits: np.ndarray) -> Cell:
    """SUPPORTS when more than half of the queries are hits, CONTRADICTS when fewer, with the
    p-value of the exact binomial test of the share against one half (two-sided: the sign test
    of a median against a threshold)."""
    hits = np.asarray(hits, bool)
    if not len(hits):
        return Cell(UNDECIDED, 1.0)
    return Cell(int(np.sign(2 * int(hits.sum()) - len(hits))),
                float(binomtest(int(hits.sum()), len(hits)).pvalue))


def ratio_slope(a: np.ndarray, b: np.ndarray, x: Sequence[float]) -> Boot:
    """The slope of log(median of A / median of B) against `x`, with its bootstrap interval
    over the histories (`a` and `b` histories × len(x), the same histories in the same rows):
    how fast A falls behind B."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return bootstrap(lambda idx: slope(x, np.log(np.nanmedian(a[idx], 0)
                                                     / np.nanmedian(b[idx], 0))), len(a))
