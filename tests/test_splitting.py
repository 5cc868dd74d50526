"""GAMS (`gams`): unbiased against forward DP on a Markov chain, with any score (a uniform one, a
mismatched surrogate, the model itself), when a budget stops it before the cut reaches the query,
and on a non-Markov LSTM against enumeration; it keeps its budget, and answers 0 for a query
no path satisfies."""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracles import random_markov, tiny_lstm

import seqq
from seqq import queries as Q
from seqq.errors import BudgetError
from seqq.estimators.methods import splitting

SEEDS = 300


def _z(values: list[float], p: float) -> float:
    v = np.asarray(values)
    return (v.mean() - p) / (v.std(ddof=1) / math.sqrt(len(v)))


@pytest.mark.parametrize("score", ["uniform", "mismatched", "the model"])
def test_unbiased_on_a_markov_chain_whatever_the_score(score: str) -> None:
    """300 runs of 40 paths each: the mean lies within 4 standard errors of the exact value,
    and the cut moved (iterations happened) in most runs."""
    model = random_markov(V=6, seed=5)
    surrogate = {"uniform": None, "mismatched": random_markov(V=6, seed=11),
                 "the model": model}[score]
    query, history = Q.count(1, n=8, K=12, op=">="), [0]
    p = seqq.exact(model, history, query)
    options = {} if surrogate is None else {"surrogate": surrogate}
    runs = seqq.estimate_many(model, [history] * SEEDS, query, "gams", seed=0, replicates=1,
                              paths=40, **options)
    assert abs(_z([e.value for e in runs], p)) < 4
    assert np.mean([e.extras["iterations"] > 0 for e in runs]) > 0.9


def test_unbiased_when_the_budget_stops_it_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """With paths sized for no copies at all, most runs stop before the cut reaches the query;
    their estimates stay unbiased, and no run spends more than its budget."""
    monkeypatch.setattr(splitting, "BUDGETED_DECADES", 0)
    model = random_markov(V=6, seed=5)
    query, history = Q.count(3, n=6, K=10, op=">="), [1]
    p = seqq.exact(model, history, query)
    budget = 800
    runs = seqq.estimate_many(model, [history] * 2 * SEEDS, query, "gams", budget=budget, seed=1,
                              replicates=1)
    assert all(e.model_calls <= budget for e in runs)
    assert np.mean([e.extras["stopped"] for e in runs]) > 0.5
    assert abs(_z([e.value for e in runs], p)) < 4


def test_unbiased_on_an_lstm_and_its_interval_from_replicates() -> None:
    model = tiny_lstm(V=5, seed=1)
    query, history = Q.count(1, n=5, K=7, op=">="), [2, 0]
    p = seqq.exact(model, history, query)
    runs = seqq.estimate_many(model, [history] * SEEDS, query, "gams", seed=2, replicates=1,
                              paths=30)
    assert abs(_z([e.value for e in runs], p)) < 4
    e = seqq.estimate(model, history, query, "gams", budget=20_000, seed=3)
    assert e.interval_kind == "log-replicates" and e.ci_low <= e.value <= e.ci_high
    assert e.model_calls <= 20_000


def test_no_path_in_the_query_gives_zero_and_a_tiny_budget_is_refused() -> None:
    model = random_markov(V=6, seed=5)
    none = seqq.estimate(model, [0], Q.count(1, n=5, K=4, op=">="), "gams", seed=0)
    assert none.value == 0.0
    with pytest.raises(BudgetError, match="cannot buy two GAMS paths"):
        seqq.estimate(model, [0], Q.hitting_time(1, K=12), "gams", budget=20, seed=0,
                      replicates=1)
