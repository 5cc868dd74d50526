"""A panel's rows as CSV, `<experiment>_<dataset>_<model>.csv`: small enough for git (about
2 MB per 27,000 rows), and the very rows behind the figure and the doc's tables, so medians
taken from the CSV are theirs. An experiment declares its columns (`COLUMNS` names those that
experiments share and says where each comes from; an experiment's own columns are its
module's) and may split its rows over several files (`split`) to keep each under about 5 MB."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from seqq.reports.reproduction.panels import ModelRun

Column = Callable[[pd.DataFrame], pd.Series]  # a CSV column's values from a panel's rows


def _column(name: str) -> Column:
    return lambda rows: rows[name]


# CSV column -> its values from a panel's rows
COLUMNS: dict[str, Column] = {
    "history_id": _column("history_id"),
    "K": _column("K"),
    # a method run with several option sets (coverage α) is named once; `alpha` tells them apart
    "method": lambda rows: rows.method.str.split(" ", n=1).str[0],
    "S": _column("budget_level"),
    "budget_calls": _column("budget_calls"),
    "model_calls": _column("model_calls"),
    "estimate": _column("estimate"),
    "truth": _column("truth"),
    "truth_kind": _column("truth_kind"),
    "truth_rel_stderr": _column("truth_rel_stderr"),
    "truth_rule": _column("truth_rule"),  # the judge, in words (Table 2's truths were re-judged)
    "rae": _column("rae"),
    "temperature": _column("temperature"),
    "entropy": _column("entropy"),  # H(q), the restricted entropy of the ground truth (Fig. 4a)
    "vocab_size": _column("vocab_size"),  # V, for H(q)'s share of K·ln V (Table 2)
    "query": _column("label"),  # which of a pair's two orders (Fig. 14)
}
ESTIMATE_COLUMNS = ("history_id", "K", "method", "S", "budget_calls", "model_calls", "estimate")
FIG3_COLUMNS = (*ESTIMATE_COLUMNS, "truth", "truth_kind", "truth_rel_stderr", "rae")


def csv_names(run: ModelRun, experiment: str, columns: Sequence[str],
              split: str = "", own: Mapping[str, Column] | None = None) -> list[str]:
    """The file names `to_csv` writes for the run: one, or one per value of `split`."""
    return [name for name, _ in _tables(run, experiment, columns, split, own)]


def to_csv(run: ModelRun, folder: Path, experiment: str,
           columns: Sequence[str] = FIG3_COLUMNS, split: str = "",
           own: Mapping[str, Column] | None = None) -> list[Path]:
    """The run's rows as `<experiment>_<dataset>_<model>.csv` (with `split`, one file
    `…_<split><value>.csv` per value of that column), numbers to 6 significant digits;
    `columns` are named in `COLUMNS` or in the experiment's `own`."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, table in _tables(run, experiment, columns, split, own):
        table.to_csv(folder / name, index=False, float_format="%.6g")
        paths.append(folder / name)
    return paths


def _tables(run: ModelRun, experiment: str, columns: Sequence[str], split: str,
            own: Mapping[str, Column] | None) -> list[tuple[str, pd.DataFrame]]:
    known = {**COLUMNS, **(own or {})}
    unknown = [name for name in columns if name not in known]
    if unknown:
        raise ValueError(f"{experiment}'s CSV columns {unknown} are neither export.COLUMNS nor "
                         "its own_columns; declare them in its module")
    table = pd.DataFrame({name: known[name](run.rows) for name in columns})
    stem = f"{experiment}_{run.slug}"
    if not split:
        return [(f"{stem}.csv", table)]
    return [(f"{stem}_{split}{value:g}.csv", part)
            for value, part in table.groupby(split, sort=True)]
