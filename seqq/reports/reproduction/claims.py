"""The paper's claims beside what seqq measured: per experiment, `Check`s (the claim, what the
paper says, what this panel's numbers say, the test that judges it and whether it holds), the
doc's claims table of a panel (`table`) and the summary table's verdict from every panel's
checks (`judge`), by the thresholds written here once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from seqq.reports.reproduction.panels import ModelRun
from seqq.reports.reproduction.significance import (
    CONTRADICTS,
    LEVEL,
    MULTIPLE_COMPARISONS,
    SUPPORTS,
    Cell,
    Tally,
    significant,
)
from seqq.reports.tables import to_markdown

# What a claim's cells say, by the shares of them beyond the noise each way (after Holm's
# correction over them, `significance.Tally`): YES (supported) in every cell, MOSTLY in more
# than MOST of them, NO (contradicted) in every cell, MOSTLY_NOT in more than MOST the
# opposite way, NOT_SHOWN in none either way, MIXED otherwise; UNKNOWN: these results cannot
# tell yet. A claim about one cell is YES, NO or NOT_SHOWN.
YES, MOSTLY, MIXED, NOT_SHOWN, MOSTLY_NOT, NO, UNKNOWN = (
    "supported", "mostly supported", "mixed", "not shown", "mostly contradicted",
    "contradicted", "–")
MOST = 0.5
HOLDS = (YES, MOSTLY, MIXED, NOT_SHOWN, MOSTLY_NOT, NO)  # the words, best first
# "about x" claims: the (1 − LEVEL) interval of the ratio inside [x / BAND, x · BAND]
BAND = 2.0
SIGN_TEST = (f"paired sign test of the per-query RAE per cell, two-sided, p < {LEVEL:g} "
             "(Holm over the cells)")
MEAN_TEST = ("paired difference of the per-query RAE per cell: its normal-approximation "
             f"p < {LEVEL:g} (Holm over the cells)")
SLOPE_TEST = (f"least-squares slope with its {1 - LEVEL:.0%} bootstrap interval over the "
              "histories")


@dataclass(frozen=True)
class Check:
    """One of the paper's claims beside seqq's numbers, the test that judges it, and whether
    they bear it out."""

    claim: str
    paper: str
    seqq: str
    holds: str  # one of HOLDS, or UNKNOWN
    test: str = ""  # how `holds` is judged


Checks = Callable[[ModelRun], list[Check]]


def share(supports: int, contradicts: int, of: int) -> str:
    """The claim's word from how many of its `of` cells support it and contradict it beyond the
    noise (the rule above); UNKNOWN of none."""
    if of == 0:
        return UNKNOWN
    if supports == of:
        return YES
    if contradicts == of:
        return NO
    if supports > MOST * of:
        return MOSTLY
    if contradicts > MOST * of:
        return MOSTLY_NOT
    return MIXED if supports or contradicts else NOT_SHOWN


def tallied(tally: Tally) -> str:
    """`share` of a claim's cells after Holm's correction over them."""
    return share(tally.supports, tally.contradicts, tally.cells)


def one(found: Cell | int) -> str:
    """A claim about one cell: YES when its test supports it beyond the noise, NO when it says
    the opposite beyond it, NOT_SHOWN otherwise (`found`: the cell's test, or its outcome
    already judged, e.g. `significance.outcome` of an interval)."""
    if isinstance(found, Cell):
        (found,) = significant([found])
    return YES if found == SUPPORTS else NO if found == CONTRADICTS else NOT_SHOWN


def band(x: float) -> tuple[float, float]:
    """The band of "about x": [x / BAND, x · BAND]."""
    return x / BAND, x * BAND


ABOUT_TEST = (f"the ratio's {1 - LEVEL:.0%} bootstrap interval inside the band "
              f"[x / {BAND:g}, x · {BAND:g}] around the paper's x (an equivalence test)")


def rules() -> str:
    """The statistical rules of every claims table and verdict, stated once (the doc's
    summary), from the constants above and `significance`'s."""
    return (f"**Statistical rules** (`seqq/reports/reproduction/significance.py` and "
            f"`claims.py`, each written there once). Every test is at level {LEVEL:g}, "
            f"two-sided unless it says otherwise, every interval shown a {1 - LEVEL:.0%} one. "
            f"A claim about several "
            f"cells (values of K, S, T, methods, prefixes) counts its cells after "
            f"{MULTIPLE_COMPARISONS}. A claim is **{YES}** when its test bears it out beyond "
            f"the noise in every cell it is about, **{MOSTLY}** in more than {MOST:.0%} of "
            f"them, **{NO}** when the test says the opposite beyond the noise in every cell, "
            f"**{MOSTLY_NOT}** in more than {MOST:.0%}, **{NOT_SHOWN}** when no cell is beyond "
            f"the noise either way, and **{MIXED}** otherwise. A claim of \"about x\" is "
            f"judged by {ABOUT_TEST} (6×: [{band(6)[0]:g}, {band(6)[1]:g}]); it is {NO} where "
            f"the interval lies wholly outside. A band written beside a claim's test replaces "
            f"this one (Figs 10/11's \"roughly three times\" per decade), and Tables 4/5, "
            f"which compare cells with the paper's numbers, state their rule and its band in "
            f"their row. An experiment"
            f" is **reproduced** when every claim is {YES}, **mostly reproduced** when every "
            f"claim is {YES} or {MOSTLY}, **differs** when none is, **partly reproduced** "
            "otherwise.")


def table(checks: Checks, title: str) -> Callable[[ModelRun], str]:
    """A panel's checks as the doc's claims table, `title` naming the paper's figure."""
    def claims(run: ModelRun) -> str:
        rows = [(c.claim, c.paper, c.seqq, c.test or "–", c.holds) for c in checks(run)]
        return (f"The paper's {title} claims beside seqq's numbers, each judged by the test "
                "beside it:\n\n"
                + to_markdown(pd.DataFrame(rows, columns=[f"{title} claim", "the paper",
                                                          "seqq, these N histories", "test",
                                                          "holds"])))
    return claims


def verdict(checks: Checks, analogue: str | None = None
            ) -> Callable[[Sequence[ModelRun]], str]:
    """The summary table's verdict from every panel's checks (`judge`); an analogue of the
    paper's experiment (other data, symbols or model: `analogue` says which, "" for none to
    name) reads "analogue" whatever its checks say."""
    def verdict(runs: Sequence[ModelRun]) -> str:
        judged = judge([(run.dataset, c) for run in runs for c in checks(run)])
        if analogue is None:
            return judged
        return f"**analogue{f' ({analogue})' if analogue else ''}**, its claims {judged}"
    return verdict


def judge(found: Sequence[tuple[str, Check]]) -> str:
    """reproduced (every claim supported), mostly reproduced (every claim supported or mostly
    supported), differs (none is), partly reproduced (otherwise), not decided yet (those that
    can be told are supported, others cannot be told yet) or not checkable yet (none can),
    naming per word the claims short of supported, with their datasets."""
    def named(status: str) -> str:
        where: dict[str, list[str]] = {}
        for dataset, check in found:
            if check.holds == status:
                where.setdefault(check.claim, []).append(dataset)
        return "; ".join(f"{claim} ({', '.join(d)})" for claim, d in where.items())

    told = [c for _, c in found if c.holds != UNKNOWN]
    good = [c for c in told if c.holds in (YES, MOSTLY)]
    if not told:
        word = "not checkable yet"
    elif not good:
        word = "differs"
    elif all(c.holds == YES for c in told):  # while a claim cannot be told yet, no verdict
        word = "reproduced" if len(told) == len(found) else "not decided yet"
    elif len(good) == len(told):
        word = "mostly reproduced"
    else:
        word = "partly reproduced"
    parts = [f"{status}: {named(status)}" for status in (*HOLDS[1:], UNKNOWN)
             if any(c.holds == status for _, c in found)]
    detail = " · ".join(p.replace(f"{UNKNOWN}:", "cannot tell yet:", 1) for p in parts)
    return f"**{word}**" + (f" ({detail})" if detail else "")


def listed(items: Sequence[str], most: int = 4) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most
                                      else "")
