"""The rows a reproduction reads: one panel per (dataset, model) of a sweep's results, its
methods' rows on the histories that every one of them finished at every K."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from seqq.errors import ResultsError
from seqq.reports.presentation import paper_methods
from seqq.results.schema import BUDGET_SETTER

SETTER = BUDGET_SETTER  # the method whose calls are every other method's budget
# The paper's three methods, the budget setter first: the order of every table and legend
PAPER_METHODS = (SETTER, *(m for m in paper_methods() if m != SETTER))
PAPER_N = 1000  # histories per dataset in the paper's protocol (§5, App. G)


@dataclass(frozen=True)
class ModelRun:
    """One panel of a reproduction: one dataset's model, its complete histories' rows."""

    dataset: str
    model: str  # the results' `model` column
    slug: str  # `<dataset>_<model name>` in file names
    histories_from: str  # test, or "sampled from <model>"
    rows: pd.DataFrame  # the experiment's methods, complete histories only
    others: pd.DataFrame  # other methods at the same S, same histories

    @property
    def n(self) -> int:
        return int(self.rows.history_id.nunique())

    @property
    def lines(self) -> tuple[str, ...]:
        """The panel's name and N; where its histories come from, where known."""
        name = "authors' LSTM" if self.model.startswith("authors") else self.model
        where = ("test-split histories" if self.histories_from == "test" else
                 "histories sampled from the model (raw MOOCs file absent)"
                 if self.dataset == "moocs" and self.histories_from.startswith("sampled")
                 else "synthetic histories, a share of them the focus symbols A"
                 if self.histories_from == "mixture" else f"histories {self.histories_from}")
        head = f"{self.dataset} · {name} · N = {self.n}"
        return (head, where) if self.histories_from else (head,)

    @property
    def levels(self) -> list[int]:
        """The levels S of its rows."""
        return sorted(int(s) for s in self.rows.budget_level.unique())

    @property
    def title(self) -> str:
        return " · ".join(self.lines)


def model_slug(model: str) -> str:
    """`authors_lstm` -> `authors`, `lstm@1a2b3c4d` -> `lstm`: the model part of file names."""
    name = model.split("@")[0]
    name = name.removesuffix("_lstm") if name != "lstm" else name
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name)


def select(results: pd.DataFrame, methods: Sequence[str], query: str,
           levels: int | Sequence[int] | None, models: Sequence[str] = (),
           temperatures: Sequence[float] | None = (1.0,), cells: Sequence[str] = (),
           datasets: Sequence[str] = ()) -> list[ModelRun]:
    """The panels: per (dataset, model), `methods` on `query` at the levels S `levels` (all
    there are: None) and `temperatures` (all: None), repeat 0, on the histories that every one
    of them finished at every K and every combination of `cells` (e.g. level S,
    temperature). A method run with several option sets (coverage α) is one method per set."""
    rows = results[(results["query"] == query) & (results["repeat"] == 0)]
    if temperatures is not None:
        rows = rows[rows.temperature.isin(temperatures)]
    if datasets:
        rows = rows[rows.dataset.isin(datasets)]
    if models:
        rows = rows[rows.model.map(lambda m: any(m == x or m.split("@")[0] == x
                                                  for x in models))]
    if rows.empty:
        at = ("" if temperatures is None else
              f" at T = {', '.join(f'{t:g}' for t in temperatures)}")
        raise ResultsError(f"no {query.replace('_', '-')} results{at}" +
                           (f" for models {', '.join(models)}" if models else ""))
    present = sorted(int(s) for s in rows.budget_level.unique())
    wanted = [levels] if isinstance(levels, int) else present if levels is None else levels
    if not set(wanted) & set(present):
        one = len(wanted) == 1
        raise ResultsError(f"no results at level{'' if one else 's'} S = "
                           f"{', '.join(map(str, wanted))}; the results hold S = "
                           f"{', '.join(map(str, present))}" + (" (pick one with --level)"
                                                               if one else ""))
    rows = rows[rows.budget_level.isin(wanted)]
    runs = []
    for (dataset, model), block in rows.groupby(["dataset", "model"], sort=True):
        base = block.method.str.split(" ", n=1).str[0]  # `coverage_beam {"alpha": 0.5}`
        mine = base.isin(methods)
        chosen = block[mine]
        if chosen.empty:
            continue
        absent = set(methods) - set(base[mine])  # a method without rows: no history is done
        complete = complete_histories(chosen, chosen.method.nunique() + len(absent),
                                      sorted(chosen.K.unique()), cells)
        chosen = chosen[chosen.history_id.isin(complete)]
        others = block[~mine & block.history_id.isin(complete)]
        runs.append(ModelRun(dataset, model, f"{dataset}_{model_slug(model)}",
                             str(chosen.histories.iloc[0]) if len(chosen) else "",
                             chosen.sort_values(["history_id", "K", "method", "budget_level",
                                                 "temperature", "label"]), others))
    if not runs:
        raise ResultsError(f"no {', '.join(methods)} results at S = "
                           f"{', '.join(map(str, wanted))}")
    return runs


def complete_histories(rows: pd.DataFrame, methods: int, ks: Sequence[int],
                       cells: Sequence[str] = ()) -> pd.Index:
    """The histories that `methods` methods have run at every K of `ks` and, with `cells`
    (e.g. level S, temperature), at every combination of K and those columns' values that
    the rows hold; each cell with as many queries as the fullest (both orders of a pair)."""
    keys = ["K", *cells]
    queries = rows[rows.K.isin(ks)].drop_duplicates(["history_id", "method", *keys, "label"])
    if queries.empty:
        return pd.Index([], dtype=int)
    per_cell = int(queries.groupby(["history_id", "method", *keys]).size().max())
    grid = len(queries.drop_duplicates(keys)) if cells else len(ks)
    size = queries.groupby("history_id").size()
    return size.index[size == methods * grid * per_cell]
