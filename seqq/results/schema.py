"""The results table: one row per (query, method, option set, level S, repeat), where a
method is a seqq method or a labelled variant of one (`estimator.variants`, named in the `method`
column).

The runner writes `ResultRow`s, the store reads parts back keyed by `KEY`, and every table and
figure reads the columns named here, so the three can only disagree by failing loudly. Reading a
table needs pandas alone: this package imports no estimator (nor torch), so the method that sets
a sweep's budget is named here, not asked of the registry (a test checks it is registered and
takes `LEVEL_OPTION`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import pandas as pd

# what determines a model's answer, a query, and a row (the store keeps one row per KEY): the
# budget rule is part of it, as the same S is another budget with or without the hybrid
CONTEXT = ("dataset", "model", "temperature")
QUERY = ("history_id", "history_hash", "K", "label")
KEY = (*CONTEXT, *QUERY, "method", "options", "budget_level", "budget_rule", "repeat")
# Tables 3–6's rows (`seqq.sweeps.symbol_kl`, in `<sweep>/kl/`): one per history, length L,
# samples S and pseudo-ground-truth paths M
KL_KEY = ("dataset", "model", "history_id", "length", "samples", "truth_paths")
# key columns added after results were first stored, and the value older parts read as
KEY_DEFAULTS = {"repeat": 0}

# The paper's budget rule: at a sweep's level S the budget setter runs with its LEVEL_OPTION = S,
# and its calls on a query are every other method's budget there
BUDGET_SETTER = "hybrid"
LEVEL_OPTION = "samples"

# how a level S became a per-query model-call budget (`budget_rule` column)
BUDGET_FROM_SETTER = BUDGET_SETTER  # the budget setter ran with S samples; its calls are the budget
BUDGET_FROM_SAMPLES = "samples"  # no hybrid: the calls of S IS samples, 1 + S·(K−1)
NO_BUDGET = "none"  # level 0: each method runs on its own options


@dataclass(frozen=True)
class ResultRow:
    """One stored result. Missing values are NaN (floats) or "" (text), never None, so every
    column keeps one dtype across parts."""

    dataset: str
    model: str
    temperature: float
    history_id: int
    history_hash: str
    K: int
    label: str
    method: str  # the method's name in the sweep: a seqq method or a variant's label
    base_method: str  # the seqq method that ran (= method unless a labelled variant)
    options: str  # JSON of the options it ran with, sorted keys
    budget_level: int  # S
    budget_rule: str  # BUDGET_FROM_SETTER | BUDGET_FROM_SAMPLES | NO_BUDGET
    budget_calls: float  # the model-call budget the method got (its own calls when none)
    repeat: int  # which of the sweep's `sweep.repeats` independent runs (its own seed and budget)
    synthetic: bool  # the dataset was the synthetic stand-in
    histories: str  # where histories come from: test, mixture, "sampled from <model>"
    vocab_size: int
    group: str  # history group (e.g. the case study's `share=0.5`)
    sequence: int  # test sequence and position the history was cut from
    position: int
    query: str  # query kind: hitting_time | event_at | count | a_before_b
    model_calls: int
    estimate: float
    log_estimate: float
    stderr: float
    num_samples: int  # -1 when the method draws no samples
    is_lower_bound: bool
    truth: float
    truth_log: float
    truth_kind: str  # exact | estimated | none
    truth_samples: int
    truth_rel_stderr: float
    truth_rule: str  # how the ground truth was computed, in words
    rae: float  # |p̂ − p| / p
    entropy: float  # restricted-proposal entropy H(q), nats
    wall_s: float
    seed: int
    note: str
    extras: str  # JSON of method-specific extras (e.g. coverage beam sizes)
    ci_low: float  # the estimate's 95 % confidence interval (NaN where it has none)
    ci_high: float
    ess: float  # effective sample size of its weights (NaN without sampled weights)
    pareto_k: float  # Pareto k̂ of its weights' upper tail (NaN where not fitted)
    warning: str  # why it may not be trusted ("" when unflagged)


COLUMNS = tuple(f.name for f in fields(ResultRow))
_DTYPES = {f.name: {"str": "object", "float": "float64", "int": "int64", "bool": "bool"}[f.type]
           for f in fields(ResultRow)}


def key_of(row: Mapping[str, Any], columns: Sequence[str]) -> tuple:
    """The values of `columns` in `row`, in that order: keys built by name, never by position."""
    return tuple(row[c] for c in columns)


def keys_of(table: pd.DataFrame, columns: Sequence[str]) -> list[tuple]:
    """`key_of` for every row of a table."""
    return list(table[list(columns)].itertuples(index=False, name=None))


def to_frame(rows: Iterable[ResultRow]) -> pd.DataFrame:
    """Rows as a results table with the schema's columns and dtypes."""
    frame = pd.DataFrame([asdict(r) for r in rows], columns=list(COLUMNS))
    return frame.astype(_DTYPES)


def conform(table: pd.DataFrame) -> pd.DataFrame:
    """A stored table in the schema's columns: a column added since the part was written reads
    as missing (NaN, or "" for text), except `base_method`: rows from before labelled variants
    ran the method they name."""
    table = table.reindex(columns=list(COLUMNS))
    for column, value in KEY_DEFAULTS.items():
        table[column] = table[column].fillna(value).astype(_DTYPES[column])
    text = [c for c, dtype in _DTYPES.items() if dtype == "object"]
    table[text] = table[text].astype("object").fillna("")
    table["base_method"] = table.base_method.mask(table.base_method == "", table.method)
    return table
