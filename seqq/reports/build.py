"""Write every table (CSV + Markdown), figure (PNG + PDF) and the Markdown summary of a set
of results: the one function behind `seqq report` and the end of `seqq query-sweep`.

The summary says what was computed (panels, N, K, what a level S costs in model calls,
the ground-truth rule and what it gave, RAE's definition) before it shows any number.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from seqq.reports import frontier, tables
from seqq.reports.figures import FIGURES
from seqq.reports.plotting import NotApplicable, save
from seqq.results.schema import BUDGET_FROM_SAMPLES, BUDGET_FROM_SETTER, BUDGET_SETTER, NO_BUDGET

QUERY_KINDS = {
    "hitting_time": "`hitting_time`: p(τ(a) = K), the first a is the K-th next symbol "
                    "(a: the observed K-th next symbol unless configured)",
    "event_at": "`event_at`: p(X_K ∈ A), the K-th next symbol is in A",
    "count": "`count`: p(N_A(K) = n), A occurs n times among the next K symbols",
    "a_before_b": "`a_before_b`: p(τ(A) < τ(B), τ(A) ≤ K), A occurs before B within K steps",
}
SETTER = BUDGET_SETTER  # the method whose calls at S set the others' budget
BUDGET_RULES = {
    BUDGET_FROM_SETTER: f"**budget: {SETTER}** — the {SETTER} runs with S tail samples, and its "
                        "model calls on a query are every other method's budget on that query",
    BUDGET_FROM_SAMPLES: f"**budget: samples** — no {SETTER} in the sweep: every method gets the "
                         "model calls of S importance samples, 1 + S·(K − 1) per query",
    NO_BUDGET: "**budget: none** (S = 0) — no budget: each method runs on its own options "
               "(e.g. coverage beam search)",
}
RAE_DEFINITION = (
    "RAE = |p̂ − p| / p for one query, with p̂ the method's estimate and p the ground truth "
    "(computed from log values, so tiny probabilities do not underflow; p̂ = 0 gives RAE = 1). "
    "Tables and figures show its median or mean over the queries of one panel, method, "
    "horizon K and level S.")


def _display(table: pd.DataFrame, results: pd.DataFrame) -> pd.DataFrame:
    """A table with its panel key columns replaced by the panel's name, for Markdown."""
    if not set(tables.PANEL) <= set(table.columns):
        return table
    titles = tables.panels(results)
    keys = table[tables.PANEL].itertuples(index=False, name=None)
    named = table.drop(columns=tables.PANEL)
    named.insert(0, "panel", [titles[k].title for k in keys])
    return named


def _write_table(table: pd.DataFrame, folder: Path, name: str, results: pd.DataFrame) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / f"{name}.csv", index=False)
    markdown = tables.to_markdown(_display(table, results))
    (folder / f"{name}.md").write_text(markdown + "\n")
    return markdown


def _what_was_computed(results: pd.DataFrame) -> list[str]:
    failed = len(results) - len(tables.finite(results))
    costs = tables.budget_costs(results)
    rules = [BUDGET_RULES[r] for r in sorted(results.budget_rule.unique()) if r in BUDGET_RULES]
    kinds = [QUERY_KINDS[k] for k in sorted(results["query"].unique()) if k in QUERY_KINDS]
    lines = [
        "## What was computed\n",
        "Each row is a *panel*: one dataset, model, temperature T, query kind and budget rule "
        "(below and in figures, a panel is named by its dataset and whatever else differs "
        "between panels). No table, curve or fit mixes two panels. The N histories are random "
        "positions in the dataset's test split (`test`), synthetic mixtures for the case study "
        "(`mixture`) or sequences sampled from the model; each gives one query per horizon K "
        "(a_before_b: one per order).\n",
        tables.to_markdown(tables.overview(results)), "",
        "**Queries.** " + "; ".join(kinds) + ".\n",
        "**Levels S.** One model call is one evaluation of p(· | prefix) for one "
        "prefix. " + "; ".join(rules) + ".\n",
    ]
    if not costs.empty:
        lines += ["Mean model-call budget per query:\n", tables.to_markdown(costs), ""]
    lines += ["**Ground truth.** Per rule, how many queries got an exact answer or an "
              "estimated one, and the estimates' relative standard errors:\n",
              tables.to_markdown(tables.truth_summary(results)), "",
              f"**RAE.** {RAE_DEFINITION}"
              + (f" {failed} rows have no RAE (no ground truth, or the method failed)."
                 if failed else "") + "\n"]
    repeats = int(results["repeat"].max()) + 1 if len(results) and "repeat" in results else 1
    if repeats > 1:
        lines.append(f"**Repeats.** Every query ran up to {repeats} times per method and level S "
                     f"(`sweep.repeats`), each run with its own seed and its own {SETTER} budget; "
                     "medians, means and counts pool the runs.\n")
    return lines


BELOW_FLOOR = "†"  # marks a median RAE the ground truth's own noise could explain


def _rae_sections(results: pd.DataFrame, summary: pd.DataFrame) -> list[str]:
    """Median and mean RAE per method × K (rows) × level S (columns), one block per panel,
    with the ground truth's noise floor per K; a median below it is marked †: against a truth
    that noisy, it cannot be told from a perfect estimator's."""
    titles, sections = tables.panels(results), ["## RAE per panel\n"]
    histories = results.groupby(tables.PANEL).history_id.nunique()
    floors = tables.noise_floors(results)
    runs = dict(iter(results.groupby(tables.PANEL, sort=True)))
    for key, block in summary.groupby(tables.PANEL, sort=True):
        ks = sorted(block.K.unique())
        floor = {k: floors.get((*key, k), 0.0) for k in ks}
        sections.append(f"### {titles[key].title}\n")
        sections.append(f"N = {histories[key]} histories · "
                        f"K = {', '.join(map(str, ks))} · "
                        f"S = {', '.join(map(str, sorted(block.budget_level.unique())))} · "
                        f"ground truth's noise floor (median RAE of a perfect estimator): "
                        + ", ".join(f"K={k}: {floor[k]:.2g}" for k in ks)
                        + f"; {BELOW_FLOOR} marks a median below it\n")
        flagged = tables.flagged_by_method(runs[key])
        if flagged:
            sections.append(f"Flagged estimates (their `warning` says why; treat their "
                            f"intervals as unreliable): {flagged}\n")
        for stat in ("median_rae", "mean_rae"):
            pivot = block.pivot_table(index=["method", "K"], columns="budget_level", values=stat)
            pivot.columns = [f"S={c}" for c in pivot.columns]
            table = pivot.reset_index()
            if stat == "median_rae":
                table = _marked_below_floor(table, floor)
            sections += [f"**{stat.replace('_rae', ' RAE')}**\n", tables.to_markdown(table), ""]
    return sections


def _marked_below_floor(table: pd.DataFrame, floor: dict[int, float]) -> pd.DataFrame:
    marked = table.astype(object)
    for column in [c for c in table.columns if str(c).startswith("S=")]:
        for i, (k, value) in enumerate(zip(table.K, table[column], strict=True)):
            if isinstance(value, float) and value < floor.get(k, 0.0):
                marked.at[i, column] = f"{tables._cell(value)}{BELOW_FLOOR}"
    return marked


EXTRA_TABLES = {  # name: (heading in summary.md, table)
    "large_lm": ("Table 2: median RAE (%) and restricted entropy (large-LM layout)",
                 tables.large_lm_table),
    "unaccounted": ("Fig. 14: unaccounted probability, mean over histories with its standard "
                    "error and 99% confidence interval (the plotted points and bands)",
                    tables.unaccounted_summary),
    "frontier": ("Estimator frontier: best method vs the hybrid at equal calls",
                 frontier.winners),
}


def check_figures(figures: Sequence[str] | None) -> None:
    """Reject unknown figure names before any work is done."""
    unknown = set(figures or []) - set(FIGURES)
    if unknown:
        raise ValueError(f"unknown figures {sorted(unknown)}; choose from {', '.join(FIGURES)}")


def write_report(results: pd.DataFrame, out: str | Path,
                 figures: Sequence[str] | None = None,
                 sources: Sequence[str | Path] = ()) -> Path:
    """Write tables/, figures/ and summary.md for `results` into `out`; `figures` names the
    figures to draw (default: every one the results support)."""
    check_figures(figures)
    out = Path(out)
    summary = tables.rae_summary(results)
    _write_table(summary, out / "tables", "rae_summary", results)
    lines = ["# seqq report\n"]
    if sources:
        lines.append("Results from " + ", ".join(f"`{s}`" for s in sources) + ".\n")
    lines += _what_was_computed(results)
    if not summary.empty:
        lines += _rae_sections(results, summary)
    for name, (heading, make) in EXTRA_TABLES.items():
        table = make(results)
        if not table.empty:
            lines += [f"## {heading}\n", _write_table(table, out / "tables", name, results), ""]
    drawn, skipped = [], []
    for name, draw in FIGURES.items():
        if figures is not None and name not in figures:
            continue
        try:
            made = draw(results)
        except NotApplicable as reason:
            if figures is not None:
                skipped.append(f"- `{name}` not drawn: it {reason}")
            continue
        for stem, fig in made.items():
            drawn += [p for p in save(fig, out / "figures", stem) if p.suffix == ".png"]
    lines += ["## Figures\n", *[f"![{p.stem}](figures/{p.name})\n" for p in drawn], *skipped, ""]
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text("\n".join(lines))
    return out


def build_report(paths: Sequence[str | Path], out: str | Path,
                 figures: Sequence[str] | None = None,
                 datasets: Sequence[str] | None = None) -> Path:
    """Merge the results under `paths` (only `datasets`, if given) and write their report."""
    check_figures(figures)
    results = tables.load_results(paths, datasets or ())
    return write_report(results, out, figures, sources=paths)
