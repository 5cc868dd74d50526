"""The tests that judge the paper's claims, and their thresholds, written once: a claim that "A
beats B" is judged per cell by a paired test on the per-query RAE, a trend ("grows with K",
"3× per 10× the budget") by its fitted slope with a bootstrap interval over the histories. A
cell supports a claim when its test says so beyond the noise, contradicts it when the test
says the opposite beyond the noise, and is undecided otherwise (`Tally`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest, norm

LEVEL = 0.05  # two-sided level of every per-cell test, and 1 − the intervals' coverage
RESAMPLES = 400  # bootstrap resamples of the histories behind an interval of a slope
SEED = 0  # the resamples are drawn alike at every run: the doc is regenerated unchanged
SUPPORTS, UNDECIDED, CONTRADICTS = 1, 0, -1
Z = float(norm.ppf(1 - LEVEL / 2))


def sign_test(a: np.ndarray, b: np.ndarray) -> tuple[int, int, float]:
    """Paired sign test of A's against B's per-query values (lower is better): how many
    queries A is lower, B is lower (ties dropped), and the two-sided exact binomial p."""
    wins, losses = int((a < b).sum()), int((a > b).sum())
    p = binomtest(wins, wins + losses).pvalue if wins + losses else 1.0
    return wins, losses, float(p)


def sign_lead(a: np.ndarray, b: np.ndarray) -> int:
    """SUPPORTS when A is lower than B on significantly more queries (`sign_test`),
    CONTRADICTS when B is, UNDECIDED otherwise."""
    wins, losses, p = sign_test(a, b)
    return 0 if p >= LEVEL else SUPPORTS if wins > losses else CONTRADICTS


def mean_lead(a: np.ndarray, b: np.ndarray) -> int:
    """SUPPORTS when A's mean is below B's beyond the noise (the normal interval of the paired
    mean difference at `LEVEL` excludes 0), CONTRADICTS when above, UNDECIDED otherwise."""
    diff = np.asarray(b, float) - np.asarray(a, float)
    if len(diff) < 2:
        return UNDECIDED
    half = Z * diff.std(ddof=1) / math.sqrt(len(diff))
    return outcome(diff.mean() - half, diff.mean() + half)


def outcome(low: float, high: float, above: float = 0.0) -> int:
    """SUPPORTS when the interval lies above `above`, CONTRADICTS when below, else UNDECIDED."""
    return SUPPORTS if low > above else CONTRADICTS if high < above else UNDECIDED


def slope(x: Sequence[float], y: Sequence[float]) -> float:
    """The least-squares slope of y against x over the finite points (NaN below two)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    return float(np.polyfit(x[keep], y[keep], 1)[0]) if keep.sum() >= 2 else math.nan


def bootstrap(statistic: Callable[[np.ndarray], float], n: int) -> tuple[float, float, float]:
    """`statistic` of all n histories, and its (1 − LEVEL) percentile interval over
    `RESAMPLES` resamples of them (`statistic` takes the rows' indices)."""
    rng = np.random.default_rng(SEED)
    values = [statistic(rng.integers(0, n, n)) for _ in range(RESAMPLES)]
    low, high = np.nanpercentile(values, [100 * LEVEL / 2, 100 * (1 - LEVEL / 2)])
    return statistic(np.arange(n)), float(low), float(high)


def per_history(rows: pd.DataFrame, columns: Sequence[str], value: str = "rae") -> pd.DataFrame:
    """`value` per history (rows) and combination of `columns` (columns), e.g. RAE per history
    and (method, K): the paired table the tests resample."""
    return rows.pivot_table(index="history_id", columns=list(columns), values=value,
                            aggfunc="first")


def median_slope(table: np.ndarray, x: Sequence[float],
                 transform: Callable[[np.ndarray], np.ndarray] = np.log
                 ) -> tuple[float, float, float]:
    """The slope of transform(median over histories) of `table`'s columns against `x`, with
    its bootstrap interval (`bootstrap`); `table` is histories × len(x)."""
    with np.errstate(divide="ignore"):
        return bootstrap(lambda idx: slope(x, transform(np.nanmedian(table[idx], 0))),
                         len(table))


@dataclass(frozen=True)
class Tally:
    """A claim's cells by their test's outcome."""

    supports: int
    contradicts: int
    cells: int

    @classmethod
    def of(cls, outcomes: Sequence[int]) -> Tally:
        return cls(sum(o == SUPPORTS for o in outcomes),
                   sum(o == CONTRADICTS for o in outcomes), len(outcomes))

    def said(self, unit: str = "cells") -> str:
        """"beyond the noise in 8 of 18 cells, the opposite in 1"."""
        return (f"beyond the noise in {self.supports} of {self.cells} {unit}"
                + (f", the opposite in {self.contradicts}" if self.contradicts else ""))


def beats(rows: pd.DataFrame, cells: Sequence[str], winner: str, rivals: Sequence[str],
          lead: Callable[[np.ndarray, np.ndarray], int] = sign_lead) -> dict[tuple, int]:
    """Per cell (a combination of `cells`' values): SUPPORTS when `winner`'s per-query RAE is
    lower than every rival's beyond the noise (`lead` on the queries both ran), CONTRADICTS
    when some rival's is lower beyond it, UNDECIDED otherwise."""
    wide = per_history(rows, ["method", *cells])
    out = {}
    for key in wide[winner].columns:
        key = key if isinstance(key, tuple) else (key,)
        leads = []
        for rival in rivals:
            both = wide[[(winner, *key), (rival, *key)]].dropna().to_numpy()
            leads.append(lead(both[:, 0], both[:, 1]))
        out[key] = (CONTRADICTS if CONTRADICTS in leads else
                    SUPPORTS if all(o == SUPPORTS for o in leads) else UNDECIDED)
    return out


def cell_name(cells: Sequence[str], key: tuple) -> str:
    """"S = 10, K = 3" for the cell `key` of `cells` (budget_level named S)."""
    names = ["S" if c == "budget_level" else c for c in cells]
    return ", ".join(f"{n} = {v:g}" for n, v in zip(names, key, strict=True))


def where(outcomes: dict[tuple, int], cells: Sequence[str], wanted: int) -> str:
    """The cells whose outcome is `wanted`, named, or "none"."""
    keys = [k for k, o in outcomes.items() if o == wanted]
    if not keys:
        return "none"
    if len(cells) == 1:
        name = "S" if cells[0] == "budget_level" else cells[0]
        return f"{name} = " + ", ".join(f"{k[0]:g}" for k in keys)
    return "; ".join(cell_name(cells, k) for k in keys)


def median_trends(rows: pd.DataFrame, by: Sequence[str], along: str,
                  x: Callable[[float], float] = float,
                  transform: Callable[[np.ndarray], np.ndarray] = np.log
                  ) -> dict[tuple, tuple[float, float, float]]:
    """Per combination of `by` (e.g. method and K): `median_slope` of the median RAE against
    x(`along`) (e.g. log10 of the budget S), on the histories that ran every value of it."""
    out = {}
    for key, block in rows.groupby(list(by), sort=True):
        table = per_history(block, [along]).dropna()
        out[key if isinstance(key, tuple) else (key,)] = median_slope(
            table.to_numpy(), [x(v) for v in table.columns], transform)
    return out


def trend_said(trends: dict[tuple, tuple[float, float, float]], unit: str) -> str:
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


def majority(hits: np.ndarray) -> int:
    """SUPPORTS when more than half of the queries are hits beyond the noise (exact binomial
    test of the share against one half, two-sided, p < LEVEL: the sign test of a median against
    a threshold), CONTRADICTS when fewer than half, UNDECIDED otherwise."""
    hits = np.asarray(hits, bool)
    if not len(hits) or binomtest(int(hits.sum()), len(hits)).pvalue >= LEVEL:
        return UNDECIDED
    return SUPPORTS if 2 * hits.sum() > len(hits) else CONTRADICTS


def ratio_slope(a: np.ndarray, b: np.ndarray, x: Sequence[float]
                ) -> tuple[float, float, float]:
    """The slope of log(median of A / median of B) against `x`, with its bootstrap interval
    over the histories (`a` and `b` histories × len(x), the same histories in the same rows):
    how fast A falls behind B."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return bootstrap(lambda idx: slope(x, np.log(np.nanmedian(a[idx], 0)
                                                     / np.nanmedian(b[idx], 0))), len(a))
