"""A panel's rows as CSV, `<experiment>_<dataset>_<model>.csv`: small enough for git (about
2 MB at N = 1000), and the very rows behind the figure and the doc's tables, so medians taken
from the CSV are theirs."""

from __future__ import annotations

from pathlib import Path

from seqq.reports.reproduction.panels import ModelRun

# The CSV's columns: results column -> CSV name
CSV_COLUMNS = {
    "history_id": "history_id", "K": "K", "method": "method", "budget_level": "S",
    "budget_calls": "budget_calls", "model_calls": "model_calls", "estimate": "estimate",
    "truth": "truth", "truth_kind": "truth_kind", "truth_rel_stderr": "truth_rel_stderr",
    "rae": "rae",
}


def to_csv(run: ModelRun, folder: Path, experiment: str) -> Path:
    """The run's rows as `<experiment>_<dataset>_<model>.csv`, numbers to 6 significant
    digits."""
    table = run.rows[list(CSV_COLUMNS)].rename(columns=CSV_COLUMNS)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{experiment}_{run.slug}.csv"
    table.to_csv(path, index=False, float_format="%.6g")
    return path
