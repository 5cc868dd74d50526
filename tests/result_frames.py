"""Small synthetic results tables in the real schema, for report tests that need no sweep:
each call builds one panel's rows with chosen RAE, entropy and estimates."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from seqq.reports.tables import name_option_sets
from seqq.results.schema import BUDGET_FROM_SETTER, ResultRow, to_frame
from seqq.sweeps.truth_store import describe_rule

RULE = describe_rule({"exact_max_calls": 1000, "rule": "relative", "rel_tol": 0.05,
                      "s_low": 100, "s_step": 100, "s_high": 500})


def panel_rows(*, dataset: str = "toy", model: str = "m", temperature: float = 1.0,
               query: str = "hitting_time", budget_rule: str = BUDGET_FROM_SETTER,
               methods: Sequence[str] = ("hybrid", "importance", "beam"),
               base_methods: Mapping[str, str] | None = None,
               ks: Sequence[int] = (3, 4, 5), levels: Sequence[int] = (10, 100),
               histories: int = 8, truth: float = 0.05,
               estimate: Callable[[str, int, int, int], float] | None = None,
               entropy: Callable[[int, int], float] | None = None,
               options: str = "{}", extras: str = "{}", labels: Sequence[str] = ("q",),
               group: str = "", truth_kind: str = "exact", seed: int = 0) -> list[ResultRow]:
    """One row per history × K × label × method × level; `base_methods` maps a variant's label
    to the method it runs (default: itself). `estimate(method, level, K, h)`
    defaults to the truth times a seeded random factor; `entropy(K, h)` to K + h/10."""
    rng = np.random.default_rng(seed)
    base_methods = base_methods or {}
    rows = []
    for h in range(histories):
        for k in ks:
            for label in labels:
                for method in methods:
                    for level in levels:
                        est = (estimate(method, level, k, h) if estimate
                               else truth * rng.uniform(0.5, 1.5))
                        has_truth = truth_kind != "none"
                        rows.append(ResultRow(
                            dataset=dataset, model=model, temperature=temperature,
                            history_id=h, history_hash=f"h{h}", K=k,
                            label=f"{label}@{k}", method=method,
                            base_method=base_methods.get(method, method), options=options,
                            budget_level=level, budget_rule=budget_rule,
                            budget_calls=float(1 + level * (k - 1)), repeat=0, synthetic=False,
                            histories="test",
                            vocab_size=10, group=group, sequence=h, position=5, query=query,
                            model_calls=1 + level * (k - 1), estimate=est,
                            log_estimate=math.log(est) if est > 0 else -math.inf,
                            stderr=math.nan, num_samples=level, is_lower_bound=method == "beam",
                            truth=truth if has_truth else math.nan,
                            truth_log=math.log(truth) if has_truth else math.nan,
                            truth_kind=truth_kind, truth_samples=0, truth_rel_stderr=0.0,
                            truth_rule=RULE, rae=abs(est - truth) / truth if has_truth else math.nan,
                            entropy=entropy(k, h) if entropy else k + h / 10, wall_s=0.01,
                            seed=seed, note="", extras=extras, ci_low=math.nan,
                            ci_high=math.nan, ess=math.nan, pareto_k=math.nan, warning=""))
    return rows


def results(*panels: list[ResultRow]) -> pd.DataFrame:
    """A merged results table, as `seqq report` reads it."""
    return name_option_sets(to_frame([row for rows in panels for row in rows]))


def beam_extras(k: int, growth: int) -> str:
    """`extras` of a coverage beam search that kept growth**step beams at each step."""
    return json.dumps({"beam_sizes": [[growth ** (s + 1) for s in range(k)]]})
