"""Tables from a results table alone: the RAE summary, Table 2 and Tables 3-6 (KL of IS).

Every function takes the merged results (one row per query, method and budget level) and
returns a DataFrame; `build.py` writes each as CSV and Markdown.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from seqq.experiments.store import read_parts

PANEL = ["dataset", "model", "temperature", "query"]


def load_results(paths: list[str], datasets: list[str] | None = None) -> pd.DataFrame:
    """Merge result parts (files or folders, e.g. one per SLURM job), one row per key; only
    `datasets`, if given."""
    from seqq.experiments.runner import KEY

    table = read_parts(paths, KEY)
    if table.empty:
        raise FileNotFoundError(f"no result parts (*.parquet) under {', '.join(map(str, paths))}")
    if datasets:
        table = table[table.dataset.isin(datasets)].copy()
        if table.empty:
            raise ValueError(f"no results for datasets {list(datasets)}")
    return name_variants(table)


def name_variants(table: pd.DataFrame) -> pd.DataFrame:
    """A method run with several option sets (e.g. coverage α) is several methods in tables and
    plots: `coverage_beam {"alpha": 0.5}`; a method with one option set keeps its plain name.
    Likewise a dataset queried through several models is several panels: `shakespeare
    (authors_lstm)`."""
    variants = table.groupby("method").options.transform("nunique")
    several = variants > 1
    table.loc[several, "method"] = table.method[several] + " " + table.options[several]
    models = table.groupby("dataset").model.transform("nunique") > 1
    table.loc[models, "dataset"] = table.dataset[models] + " (" + table.model[models] + ")"
    return table


def dataset_title(results: pd.DataFrame, dataset: str) -> str:
    """The dataset's name, flagged when its data was the synthetic stand-in or its histories
    were sampled from a model."""
    rows = results.loc[results.dataset == dataset]
    title = f"{dataset} (synthetic stand-in)" if rows.synthetic.any() else dataset
    sampled = sorted({h for h in rows.get("histories", []) if str(h).startswith("sampled")})
    return f"{title} ({'; '.join(sampled)})" if sampled else title


def rae_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Median and mean RAE (and count) per panel × method × K × budget level."""
    ok = results[np.isfinite(results.rae)]
    grouped = ok.groupby([*PANEL, "method", "K", "budget_level"], observed=True).rae
    return grouped.agg(median_rae="median", mean_rae="mean", queries="count").reset_index()


def large_lm_table(results: pd.DataFrame) -> pd.DataFrame:
    """Table 2: median RAE (%) per method and K, with the mean restricted entropy H(q) and its
    share of the maximum K·log V (the paper's "Entropy %")."""
    ok = results[np.isfinite(results.rae)]
    rae = (ok.pivot_table(index=["dataset", "budget_level", "K"], columns="method", values="rae",
                          aggfunc="median") * 100).round(2)
    per_query = ok.drop_duplicates(["dataset", "budget_level", "K", "history_id", "label"])
    entropy = per_query.groupby(["dataset", "budget_level", "K"]).agg(
        entropy=("entropy", "mean"), vocab_size=("vocab_size", "first"))
    k = entropy.index.get_level_values("K").to_numpy()
    entropy["entropy_pct"] = 100 * entropy.entropy / (k * np.log(entropy.vocab_size))
    return rae.join(entropy[["entropy", "entropy_pct"]].round(2)).reset_index()


def bernoulli_kl(p: np.ndarray, q: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """KL(Bern(p) ‖ Bern(q)) in nats; the paper leaves the KL's arguments unspecified
    (docs/decisions.md §13), so seqq compares the event probability and its estimate."""
    p = np.clip(p, eps, 1 - eps)
    q = np.clip(q, eps, 1 - eps)
    return p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))


def kl_tables(results: pd.DataFrame, method: str = "importance") -> pd.DataFrame:
    """Tables 3-6: mean KL between ground truth and `method`'s estimate, samples × horizon."""
    rows = results[(results.method == method) & np.isfinite(results.estimate)].copy()
    if rows.empty:
        return pd.DataFrame()
    rows["kl"] = bernoulli_kl(rows.truth.to_numpy(), rows.estimate.to_numpy())
    table = rows.pivot_table(index=["dataset", "budget_level"], columns="K", values="kl",
                             aggfunc="mean")
    table.columns = [f"K={k}" for k in table.columns]
    return table.round(5).reset_index()


def unaccounted(results: pd.DataFrame) -> pd.DataFrame:
    """Fig. 14: 1 − p̂(τ(A)<τ(B)) − p̂(τ(B)<τ(A)) per history, K, method and budget."""
    pairs = results[results["query"] == "a_before_b"]
    keys = [*PANEL, "history_id", "K", "method", "budget_level"]
    grouped = pairs.groupby(keys, observed=True)
    out = grouped.estimate.agg(total="sum", orders="count").reset_index()
    out = out[out.orders == 2]
    out["unaccounted"] = 1 - out.total
    return out.drop(columns=["orders", "total"])


def to_markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (without the optional `tabulate` dependency)."""
    cols = [str(c) for c in table.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in table.itertuples(index=False):
        cells = [f"{v:.4g}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
