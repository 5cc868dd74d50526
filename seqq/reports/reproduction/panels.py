"""The rows a reproduction reads: one panel per (dataset, model) of a sweep's results, its
methods' rows on the histories that every one of them finished at every K."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from seqq.errors import ResultsError
from seqq.estimators.registry import budget_setter, paper_methods

SETTER = budget_setter().name  # the method whose calls are every other method's budget
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
    def lines(self) -> tuple[str, str]:
        """The panel's name and N; where its histories come from."""
        name = "authors' LSTM" if self.model.startswith("authors") else self.model
        where = ("test-split histories" if self.histories_from == "test" else
                 "histories sampled from the model (raw MOOCs file absent)"
                 if self.dataset == "moocs" else f"histories {self.histories_from}")
        return f"{self.dataset} · {name} · N = {self.n}", where

    @property
    def title(self) -> str:
        return " · ".join(self.lines)


def model_slug(model: str) -> str:
    """`authors_lstm` -> `authors`, `lstm@1a2b3c4d` -> `lstm`: the model part of file names."""
    name = model.split("@")[0]
    name = name.removesuffix("_lstm") if name != "lstm" else name
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name)


def select(results: pd.DataFrame, methods: Sequence[str], query: str, level: int,
           models: Sequence[str] = ()) -> list[ModelRun]:
    """The panels: per (dataset, model), `methods` on `query` at budget level `level`, on
    histories that every one of them finished at every K (repeat 0, temperature T = 1)."""
    rows = results[(results.temperature == 1.0) & (results["query"] == query)
                   & (results["repeat"] == 0)]
    if models:
        rows = rows[rows.model.map(lambda m: any(m == x or m.split("@")[0] == x
                                                  for x in models))]
    if rows.empty:
        raise ResultsError(f"no {query.replace('_', '-')} results at T = 1" +
                           (f" for models {', '.join(models)}" if models else ""))
    levels = sorted(rows.budget_level.unique())
    if level not in levels:
        raise ResultsError(f"no results at budget level S = {level}; the results hold S = "
                           f"{', '.join(map(str, levels))} (pick one with --level)")
    rows = rows[rows.budget_level == level]
    runs = []
    for (dataset, model), block in rows.groupby(["dataset", "model"], sort=True):
        chosen = block[block.method.isin(methods)]
        if chosen.empty:
            continue
        complete = complete_histories(chosen, len(methods), sorted(chosen.K.unique()))
        chosen = chosen[chosen.history_id.isin(complete)]
        others = block[~block.method.isin(methods) & block.history_id.isin(complete)]
        runs.append(ModelRun(dataset, model, f"{dataset}_{model_slug(model)}",
                             str(chosen.histories.iloc[0]) if len(chosen) else "",
                             chosen.sort_values(["history_id", "K", "method"]), others))
    if not runs:
        raise ResultsError(f"no {', '.join(methods)} results at S = {level}")
    return runs


def complete_histories(rows: pd.DataFrame, methods: int, ks: Sequence[int]) -> pd.Index:
    """The histories that `methods` methods have run at every K of `ks`."""
    cells = rows.drop_duplicates(["history_id", "method", "K"]).groupby("history_id").size()
    return cells.index[cells == methods * len(ks)]
