"""The paper's claims beside what seqq measured, one function per experiment: a panel in, a
Markdown table out (the claim, what the paper says, what this panel's numbers say). Beyond
Fig. 3, each experiment's claims are `Check`s that also say whether they hold, and the summary
table's verdict is judged from them (`judge`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from seqq.reports.reproduction.panels import ModelRun
from seqq.reports.tables import to_markdown

# ---- the other experiments: each claim checked, `holds` judged, the verdict from all of them

YES, MOSTLY, NO, UNKNOWN = "yes", "mostly", "no", "–"  # UNKNOWN: these results cannot tell yet


@dataclass(frozen=True)
class Check:
    """One of the paper's claims beside seqq's numbers, and whether they bear it out."""

    claim: str
    paper: str
    seqq: str
    holds: str  # YES, MOSTLY (in at least 3 of 4 cases), NO or UNKNOWN


Checks = Callable[[ModelRun], list[Check]]


def share(hits: int, of: int) -> str:
    """YES when every case agrees, MOSTLY when at least 3 of 4 do, else NO; UNKNOWN of none."""
    if of == 0:
        return UNKNOWN
    return YES if hits == of else MOSTLY if hits >= 0.75 * of else NO


def table(checks: Checks, title: str) -> Callable[[ModelRun], str]:
    """A panel's checks as the doc's claims table, `title` naming the paper's figure."""
    def claims(run: ModelRun) -> str:
        rows = [(c.claim, c.paper, c.seqq, c.holds) for c in checks(run)]
        return (f"The paper's {title} claims beside seqq's numbers:\n\n"
                + to_markdown(pd.DataFrame(rows, columns=[f"{title} claim", "the paper",
                                                          "seqq, these N histories",
                                                          "holds"])))
    return claims


def verdict(checks: Checks) -> Callable[[Sequence[ModelRun]], str]:
    """The summary table's verdict from every panel's checks (`judge`)."""
    return lambda runs: judge([(run.dataset, c) for run in runs for c in checks(run)])


def judge(found: Sequence[tuple[str, Check]]) -> str:
    """reproduced (every claim holds, at least mostly), partly (some do not), differs (none
    does), not decided yet (those that can be told hold, others cannot be told yet) or not
    checkable yet (none can), naming the claims that do not hold, hold only mostly, or cannot be
    told yet, with their datasets."""
    def named(status: str) -> str:
        where: dict[str, list[str]] = {}
        for dataset, check in found:
            if check.holds == status:
                where.setdefault(check.claim, []).append(dataset)
        return "; ".join(f"{claim} ({', '.join(d)})" for claim, d in where.items())

    told = [c for _, c in found if c.holds != UNKNOWN]
    failing = [c for c in told if c.holds == NO]
    if not told:
        word = "not checkable yet"
    elif failing:
        word = "differs" if len(failing) == len(told) else "partly"
    else:  # all that can be told holds; while a claim cannot be told yet, that is not a verdict
        word = "reproduced" if len(told) == len(found) else "not decided yet"
    parts = [(f"not: {named(NO)}" if failing else ""),
             (f"only mostly: {named(MOSTLY)}" if any(c.holds == MOSTLY for c in told) else ""),
             (f"cannot tell yet: {named(UNKNOWN)}" if len(told) < len(found) else "")]
    detail = " · ".join(p for p in parts if p)
    return f"**{word}**" + (f" ({detail})" if detail else "")


def listed(items: Sequence[str], most: int = 4) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most
                                      else "")
