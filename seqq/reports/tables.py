"""Tables from a results table alone: the RAE summary, what was computed, Table 2, Tables 3-6
(KL of IS) and the unaccounted probability of Fig. 14.

Every function takes the merged results (one row per query, method and level S) and
returns a DataFrame; `build.py` writes each as CSV and Markdown. Results are compared only
within a *panel*: one dataset, model, temperature, query kind and budget rule, so no number,
curve or fit ever pools two models or two kinds of question.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from seqq.paths import CONF
from seqq.results.schema import BUDGET_FROM_SAMPLES, QUERY
from seqq.results.store import read_results, safe_name

PANEL = ["dataset", "model", "temperature", "query", "budget_rule"]
Z99 = 2.5758  # two-sided 99% normal quantile: Fig. 14's confidence band


# the question each built-in query kind asks (a sweep's `query.expr` is named by its template)
QUERY_NAMES = {
    "hitting_time": "p(τ(a) = K)",
    "event_at": "p(X_K ∈ a)",
    "count": "p(N_K(a) = n)",
    "a_before_b": "p(τ(a) < τ(b) ≤ K)",
}


@dataclass(frozen=True)
class Panel:
    """How a panel is named: `title` in tables and the summary, `slug` in file names,
    `heading` in figures. The dataset is always spelled out; the other parts only where one
    dataset has several (each dataset's own LSTM is implied; two models of one dataset are
    named). A figure's panel also names its query (`query`), which a reader of the figure
    alone could not know; it is empty where the title names the query already."""

    title: str
    slug: str
    query: str = ""

    @property
    def heading(self) -> str:
        return f"{self.title} · {self.query}" if self.query else self.title


def query_name(query: str) -> str:
    """The `query` column as a reader knows it: the question a built-in kind asks, or a
    `query.expr` template as written."""
    return QUERY_NAMES.get(query, query)


def load_results(paths: Iterable[str | Path], datasets: Iterable[str] = ()) -> pd.DataFrame:
    """Merge result parts (files or folders, e.g. one per SLURM job), one row per key; only
    `datasets`, if given."""
    table = read_results(paths)
    datasets = list(datasets)
    if datasets:
        table = table[table.dataset.isin(datasets)]
        if table.empty:
            raise ValueError(f"no results for datasets {datasets}")
    return name_option_sets(table.copy())


def name_option_sets(table: pd.DataFrame) -> pd.DataFrame:
    """A method run with several option sets (e.g. coverage α over a multirun) is several
    methods in tables and plots: `coverage_beam {"alpha": 0.5}`; a method with one option set,
    a labelled variant (`estimator.variants`) included, keeps its name. Option sets are
    counted within a panel: a surrogate fitted per model differs between panels, not in one."""
    keys = [c for c in PANEL if c in table.columns] + ["method"]
    variants = table.groupby(keys, dropna=False).options.transform("nunique")
    several = variants > 1
    table.loc[several, "method"] = table.method[several] + " " + table.options[several]
    return table


def dataset_title(results: pd.DataFrame, dataset: str) -> str:
    """The dataset's name, flagged when its data was the synthetic stand-in or its histories
    were sampled from a model."""
    rows = results.loc[results.dataset == dataset]
    title = f"{dataset} (synthetic stand-in)" if rows.synthetic.fillna(False).any() else dataset
    sampled = sorted({h for h in rows.histories if str(h).startswith("sampled")})
    return f"{title} ({'; '.join(sampled)})" if sampled else title


def panels(results: pd.DataFrame, columns: list[str] = PANEL) -> dict[tuple, Panel]:
    """Every panel (a group of `columns`) with its name."""
    varying = [c for c in columns[1:] if (results.groupby("dataset")[c].nunique() > 1).any()]
    named = {}
    for key in results.groupby(columns, sort=True).groups:
        values = dict(zip(columns, key, strict=True))
        parts = [_show(c, values[c]) for c in varying]
        query = "" if "query" in varying or "query" not in values else query_name(values["query"])
        named[key] = Panel(" · ".join([dataset_title(results, values["dataset"]), *parts]),
                           safe_name("_".join([values["dataset"], *parts])), query)
    return named


def _show(column: str, value: object) -> str:
    if column == "temperature":
        return f"T={value:g}"
    return f"budget: {value}" if column == "budget_rule" else str(value)


def finite(results: pd.DataFrame) -> pd.DataFrame:
    """Rows with an RAE (a ground truth and an estimate)."""
    return results[np.isfinite(results.rae)]


def rae_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Median and mean RAE (and count) per panel × method × K × level S."""
    grouped = finite(results).groupby([*PANEL, "method", "K", "budget_level"], observed=True).rae
    return grouped.agg(median_rae="median", mean_rae="mean", queries="count").reset_index()


def overview(results: pd.DataFrame) -> pd.DataFrame:
    """One row per panel, every part of its key spelled out, with the histories N, horizons K,
    levels S, methods and ground truth it holds."""
    rows = []
    for key, block in results.groupby(PANEL, sort=True):
        values = dict(zip(PANEL, key, strict=True))
        queries = block.drop_duplicates([*QUERY])
        ks = sorted(block.K.unique())
        rows.append({
            "dataset": dataset_title(results, values["dataset"]), "model": values["model"],
            "T": values["temperature"], "query": values["query"],
            "budget": values["budget_rule"],
            "histories": ", ".join(sorted(set(block.histories) - {""})) or "–",
            "N histories": block.history_id.nunique(), "queries": len(queries),
            "K": f"{ks[0]}–{ks[-1]}" if len(ks) > 2 and ks == list(range(ks[0], ks[-1] + 1))
            else ", ".join(map(str, ks)),
            "S": ", ".join(map(str, sorted(block.budget_level.unique()))),
            "methods": ", ".join(sorted(block.method.unique())),
            "ground truth": ", ".join(f"{n} {kind}" for kind, n in
                                      queries.truth_kind.value_counts().items()),
            "flagged": flagged_count(block),
        })
    return pd.DataFrame(rows)


FLAG_REASONS = {  # a warning's reason, by words each kind of warning holds (the estimators'
    # warnings: seqq/estimators/uncertainty.py and driver.py); the first that matches names it
    "heavy weights": "weights are heavy-tailed",
    "few draws": "paths were drawn, too few",
    "replicates disagree": "replicates disagree",
    "wide interval": "spans a factor of",
    "zero draws": "none of the",
    "every draw hit": "all of the",
    "no interval": "gives no interval",
}
OTHER_REASON = "other"
FEW_DRAWS = "few draws"


def flag_reason(warning: str) -> str:
    """The reason a warning flags its estimate, in two or three words (`FLAG_REASONS`), so a
    summary can say why runs were flagged, not only how many."""
    return next((reason for reason, words in FLAG_REASONS.items() if words in warning),
                OTHER_REASON)


def _too_few_draws(rows: pd.DataFrame) -> pd.Series:
    """Per row, whether its run drew too few paths for an interval. That flag reads no weights
    (issue 58), so a level that buys fewer than MIN_DRAWS paths flags nearly all its runs: it
    says what the level can claim, and is counted by level, apart from the flags that tell
    runs apart."""
    return rows.warning.map(flag_reason) == FEW_DRAWS


def flagged_count(rows: pd.DataFrame) -> str:
    """"n of N" runs flagged among those that drew enough paths, and how many did not."""
    few = _too_few_draws(rows)
    others = rows[~few]
    text = f"{int((others.warning != '').sum()):,} of {len(others):,}"
    return text + (f" (+{int(few.sum()):,} with too few paths)" if few.any() else "")


def flagged_by_method(rows: pd.DataFrame) -> str:
    """Per method, how many runs that drew enough paths carry a warning, by reason, and per
    level S how many drew too few paths for an interval ("" if nothing is flagged)."""
    parts = []
    for method, block in rows.groupby("method"):
        few = _too_few_draws(block)
        others = block[~few]
        warnings = others.warning[others.warning != ""]
        if len(warnings):
            reasons = warnings.map(flag_reason).value_counts()
            parts.append(f"{method} {len(warnings)} of {len(others)} ("
                         + ", ".join(f"{r} {n}" for r, n in reasons.items()) + ")")
        if few.any():
            levels = few.groupby(block.budget_level).agg(["sum", "size"])
            parts.append(f"{method} drew too few paths for an interval at " + ", ".join(
                f"S = {level} ({'all' if n == size else f'{n} of'} {size})"
                for level, (n, size) in levels[levels["sum"] > 0].iterrows()))
    return "; ".join(parts)


def noise_floor(rel_stderr: np.ndarray) -> float:
    """The median RAE that a perfect estimator shows against truths with these relative standard
    errors σ_i: the m with mean_i P(|Z|·σ_i ≤ m) = 1/2, Z ~ N(0, 1). 0 for exact truths."""
    s = np.asarray(rel_stderr, dtype=float)
    s = s[np.isfinite(s)]
    if len(s) == 0 or not (s > 0).any():
        return 0.0
    erf = np.vectorize(math.erf)

    def share(m: float) -> float:
        with np.errstate(divide="ignore"):
            z = np.where(s > 0, m / np.where(s > 0, s, 1.0), np.inf)
        return float(np.mean(np.where(np.isinf(z), 1.0, erf(z / math.sqrt(2)))))

    low, high = 0.0, float(s.max()) * 10
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if share(mid) < 0.5 else (low, mid)
    return (low + high) / 2


def noise_floors(results: pd.DataFrame) -> pd.Series:
    """The ground truth's noise floor per panel × K (`noise_floor` of its queries' relative
    standard errors; an exact truth has none)."""
    queries = results.drop_duplicates([*PANEL, *QUERY])
    rel = queries.truth_rel_stderr.where(queries.truth_kind == "estimated", 0.0)
    return rel.groupby([queries[c] for c in [*PANEL, "K"]], observed=True).agg(
        lambda s: noise_floor(s.to_numpy()))


def budget_costs(results: pd.DataFrame) -> pd.DataFrame:
    """What a level S cost: mean model-call budget per query, per panel × K × S."""
    budgeted = results[results.budget_level > 0].drop_duplicates(
        [*PANEL, *QUERY, "budget_level", "repeat"])
    if budgeted.empty:
        return pd.DataFrame()
    titles = panels(results)
    budgeted = budgeted.assign(panel=[titles[k].title for k in
                                      budgeted[PANEL].itertuples(index=False, name=None)])
    table = budgeted.pivot_table(index=["panel", "K"], columns="budget_level",
                                 values="budget_calls", aggfunc="mean")
    table.columns = [f"S={c}" for c in table.columns]
    return table.round(0).reset_index()


def truth_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Per ground-truth rule: how many queries got an exact or an estimated answer, and the
    estimates' relative standard errors."""
    queries = results.drop_duplicates([*PANEL, *QUERY])
    rows = []
    for rule, block in queries.groupby("truth_rule", sort=True):
        estimated = block[block.truth_kind == "estimated"].truth_rel_stderr
        rows.append({"rule": rule, "queries": len(block),
                     **{kind: int((block.truth_kind == kind).sum())
                        for kind in ("exact", "estimated", "none")},
                     "estimated rel. s.e. median": estimated.median(),
                     "estimated rel. s.e. max": estimated.max()})
    return pd.DataFrame(rows)


LARGE_LM_PRESET = CONF / "estimator" / "large_lm.yaml"  # Table 2's methods (App. F.4)


def large_lm_table(results: pd.DataFrame) -> pd.DataFrame:
    """Table 2, for the panels laid out as the paper's large-LM experiment (the methods of
    `estimator=large_lm` at the budget of S importance samples, no hybrid): median RAE (%) per
    method and K, with the mean restricted entropy H(q) and its share of the maximum K·log V
    ("Entropy %")."""
    ok = finite(results[results.budget_rule == BUDGET_FROM_SAMPLES])
    layout = set(OmegaConf.load(LARGE_LM_PRESET).methods)
    keep = ok.groupby(PANEL).method.transform(lambda m: layout <= set(m))
    ok = ok[keep.astype(bool)]
    if ok.empty:
        return pd.DataFrame()
    index = [*PANEL, "budget_level", "K"]
    rae = (ok.pivot_table(index=index, columns="method", values="rae", aggfunc="median")
           * 100).round(2)
    per_query = ok.drop_duplicates([*PANEL, "budget_level", *QUERY])
    entropy = per_query.groupby(index).agg(entropy=("entropy", "mean"),
                                           vocab_size=("vocab_size", "first"))
    k = entropy.index.get_level_values("K").to_numpy()
    entropy["entropy_pct"] = 100 * entropy.entropy / (k * np.log(entropy.vocab_size))
    return rae.join(entropy[["entropy", "entropy_pct"]].round(2)).reset_index()


def unaccounted(results: pd.DataFrame) -> pd.DataFrame:
    """Fig. 14: 1 − p̂(τ(A)<τ(B)) − p̂(τ(B)<τ(A)) per history, K, method and budget."""
    pairs = results[results["query"] == "a_before_b"]
    keys = [*PANEL, "history_id", "K", "method", "budget_level", "repeat"]
    grouped = pairs.groupby(keys, observed=True)
    out = grouped.estimate.agg(total="sum", orders="count").reset_index()
    out = out[out.orders == 2]
    out["unaccounted"] = 1 - out.total
    return out.drop(columns=["orders", "total"])


def unaccounted_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Fig. 14's points: mean unaccounted probability over histories per panel × method × S ×
    K, with its standard error and 99% confidence interval."""
    per_history = unaccounted(results)
    if per_history.empty:
        return pd.DataFrame()
    stats = per_history.groupby([*PANEL, "method", "budget_level", "K"]).unaccounted.agg(
        histories="count", mean="mean", sem="sem").reset_index()
    stats["sem"] = stats["sem"].fillna(0.0)
    stats["ci99_low"] = stats["mean"] - Z99 * stats["sem"]
    stats["ci99_high"] = stats["mean"] + Z99 * stats["sem"]
    return stats


def to_markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (without the optional `tabulate` dependency)."""
    cols = [str(c) for c in table.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in table.itertuples(index=False):
        cells = [_cell(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: object) -> str:
    """Numbers to 4 significant digits, whole numbers (call counts) in full, missing as "–"."""
    if not isinstance(value, float):
        return str(value)
    if np.isnan(value):
        return "–"
    return f"{value:.0f}" if value.is_integer() and abs(value) < 1e15 else f"{value:.4g}"
