"""The paper's claims beside what seqq measured: per experiment, `Check`s (the claim, what the
paper says, what this panel's numbers say, the test that judges it and whether it holds), the
doc's claims table of a panel (`table`) and the summary table's verdict from every panel's
checks (`judge`), by the thresholds written here once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from seqq.reports.reproduction.panels import ModelRun
from seqq.reports.reproduction.significance import LEVEL, Tally
from seqq.reports.tables import to_markdown

# A claim holds (YES) when its test bears it out beyond the noise in every cell it is about,
# PARTLY in some, NO in none; UNKNOWN: these results cannot tell yet
YES, PARTLY, NO, UNKNOWN = "yes", "partly", "no", "–"
SIGN_TEST = (f"paired sign test of the per-query RAE per cell, two-sided, p < {LEVEL:g}")
MEAN_TEST = (f"paired difference of the per-query RAE per cell: its {1 - LEVEL:.0%} normal "
             "interval excludes 0")
SLOPE_TEST = (f"least-squares slope with its {1 - LEVEL:.0%} bootstrap interval over the "
              "histories")


@dataclass(frozen=True)
class Check:
    """One of the paper's claims beside seqq's numbers, the test that judges it, and whether
    they bear it out."""

    claim: str
    paper: str
    seqq: str
    holds: str  # YES, PARTLY, NO or UNKNOWN
    test: str = ""  # how `holds` is judged


Checks = Callable[[ModelRun], list[Check]]


def share(hits: int, of: int) -> str:
    """YES when every cell bears the claim out, NO when none does, else PARTLY; UNKNOWN of
    none."""
    if of == 0:
        return UNKNOWN
    return YES if hits == of else NO if hits == 0 else PARTLY


def tallied(tally: Tally) -> str:
    """`share` of the cells whose test supports the claim."""
    return share(tally.supports, tally.cells)


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
    """reproduced (every claim holds beyond the noise), partly (some part does not), differs
    (no claim does), not decided yet (those that can be told hold, others cannot be told yet)
    or not checkable yet (none can), naming the claims that do not hold, hold only in part, or
    cannot be told yet, with their datasets."""
    def named(status: str) -> str:
        where: dict[str, list[str]] = {}
        for dataset, check in found:
            if check.holds == status:
                where.setdefault(check.claim, []).append(dataset)
        return "; ".join(f"{claim} ({', '.join(d)})" for claim, d in where.items())

    told = [c for _, c in found if c.holds != UNKNOWN]
    if not told:
        word = "not checkable yet"
    elif all(c.holds == NO for c in told):
        word = "differs"
    elif any(c.holds != YES for c in told):
        word = "partly"
    else:  # all that can be told holds; while a claim cannot be told yet, that is not a verdict
        word = "reproduced" if len(told) == len(found) else "not decided yet"
    parts = [(f"not: {named(NO)}" if any(c.holds == NO for c in told) else ""),
             (f"in part: {named(PARTLY)}" if any(c.holds == PARTLY for c in told) else ""),
             (f"cannot tell yet: {named(UNKNOWN)}" if len(told) < len(found) else "")]
    detail = " · ".join(p for p in parts if p)
    return f"**{word}**" + (f" ({detail})" if detail else "")


def listed(items: Sequence[str], most: int = 4) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most
                                      else "")
