"""Fig. 1: when will the sentence end? A large LM's hitting time of a sentence end after four
WikiText prefixes, importance sampling against naive sampling at equal model calls (GPT-2 in the
paper; seqq's stand-in SmolLM2-135M), from a `fig1` sweep's runs (`seqq/reports/sentence_end.py`).
Writes `fig1_wikitext_<model>.csv`, the figure, the doc's `fig1` block and its summary row."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from seqq.reports.plotting import save
from seqq.reports.reproduction.claims import ABOUT_TEST, Check, band, judge, tallied
from seqq.reports.reproduction.markdown import (
    SUMMARY_BLOCK,
    begin,
    end,
    find_block,
    update_doc,
    update_summary,
)
from seqq.reports.reproduction.reproduce import OwnRows
from seqq.reports.reproduction.significance import (
    CONTRADICTS,
    LEVEL,
    RESAMPLES,
    SEED,
    SUPPORTS,
    UNDECIDED,
    Boot,
    Cell,
    Tally,
)
from seqq.reports.sentence_end import (
    BAND,
    figure,
    load_runs,
    summary,
    summary_markdown,
    variance_ratios,
    write_sentence_end_report,
)
from seqq.reports.tables import to_markdown
from seqq.results.store import part_files

NAME = "fig1"
TITLE = "Fig. 1"
MODELS = "SmolLM2-135M on WikiText-2 (the paper: GPT-2)"
PAPER_REDUCTION = 6.0  # "a 6x reduction in variance relative to naive model sampling"
FROM_K = 2  # the first K whose variance ratio `reduction` averages
COLUMNS = ("kind", "prefix", "method", "replicate", "K", "estimate", "stderr", "model_calls",
           "samples")


def reads(paths: Sequence[str | Path]) -> bool:
    """Whether `paths` hold a `fig1` sweep's runs, by the columns of their first part."""
    files = [f for p in paths for f in part_files(p)]
    return bool(files) and {"prefix", "replicate", "K"} <= set(pd.read_parquet(files[0]).columns)


def reduction(rows: pd.DataFrame, prefix: str, equal: str = "calls") -> Boot:
    """The geometric mean over K ≥ 2 of Var naive / Var IS for one prefix, with its percentile
    interval over resamples of each method's runs (the runs are independent; the K of one run
    are not, so runs, not K, are resampled). At `equal="calls"` as run (the same model calls
    per run); at `equal="paths"` each variance is scaled to one run of as many paths as IS drew
    (a mean's variance goes as 1/paths), since the paper says only "the same computation
    budget"."""
    part = rows[(rows.prefix == prefix) & (rows.K >= FROM_K)]
    paths = part.groupby("method").samples.mean()
    scale = paths["naive"] / paths["importance"] if equal == "paths" else 1.0
    runs = {m: part[part.method == m].pivot(index="replicate", columns="K", values="estimate")
            .to_numpy() for m in ("importance", "naive")}

    def geo_mean(is_runs: np.ndarray, naive_runs: np.ndarray) -> float:
        ratio = scale * naive_runs.var(0, ddof=1) / is_runs.var(0, ddof=1)
        ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
        return float(np.exp(np.log(ratio).mean())) if len(ratio) else math.nan

    rng = np.random.default_rng(SEED)
    n_is, n_naive = len(runs["importance"]), len(runs["naive"])
    draws = [geo_mean(runs["importance"][rng.integers(0, n_is, n_is)],
                      runs["naive"][rng.integers(0, n_naive, n_naive)])
             for _ in range(RESAMPLES)]
    return Boot.of(geo_mean(runs["importance"], runs["naive"]), draws)


def f_cells(told: pd.DataFrame) -> list[Cell]:
    """Per (prefix, K): the F test of Var naive / Var IS against 1 over the runs, SUPPORTS where
    naive's is the larger, with its two-sided p-value."""
    df_naive, df_is = told.count_naive - 1, told.count_importance - 1
    below = stats.f.cdf(told.ratio, df_naive, df_is)
    return [Cell(SUPPORTS if r > 1 else CONTRADICTS if r < 1 else UNDECIDED,
                 float(min(1.0, 2 * min(lo, 1 - lo))))
            for r, lo in zip(told.ratio, below, strict=True)]


def checks(rows: pd.DataFrame) -> list[Check]:
    ratios = variance_ratios(rows, 1 - LEVEL)
    told = ratios[(ratios.var_naive > 0) & (ratios.var_importance > 0)]
    tally = Tally.of(f_cells(told))
    prefixes = list(dict.fromkeys(rows.prefix))
    calls = rows.groupby("method").model_calls.mean()
    paths = rows.groupby("method").samples.mean()
    return [
        Check("importance sampling's estimates vary less than naive sampling's at equal model "
              "calls, at every K", "Fig. 1 caption",
              f"lower {tally.said('(prefix, K) cells')}; mean calls per run "
              f"{calls['importance']:,.0f} (IS) / {calls['naive']:,.0f} (naive)",
              tallied(tally),
              f"F test of the ratio of the two variances over the runs, per (prefix, K), "
              f"two-sided, p < {LEVEL:g} (Holm over the cells)"),
        *(_six_times(rows, prefixes, equal, said) for equal, said in (
            ("calls", f"at equal model calls (as run: {calls['importance']:,.0f} / "
                      f"{calls['naive']:,.0f} per run)"),
            ("paths", f"at an equal number of paths (naive's variance scaled from its "
                      f"{paths['naive']:,.0f} paths per run to IS's {paths['importance']:,.0f})"))),
    ]


def _six_times(rows: pd.DataFrame, prefixes: list[str], equal: str, said: str) -> Check:
    """The paper's 6× read at equal calls or at equal paths, per prefix."""
    reductions = [reduction(rows, p, equal) for p in prefixes]
    tally = Tally.of([r.cell_within(band(PAPER_REDUCTION)) for r in reductions])
    return Check(f"a {PAPER_REDUCTION:g}× reduction in variance, read {said}",
                 "Fig. 1 caption: \"maintain a 6x reduction in variance relative to naive "
                 "model sampling for the same computation budget\"",
                 f"geometric mean over K = {FROM_K}–{rows.K.max()} of Var naive / Var IS: "
                 + "; ".join(
                     f"×{r:.1f} [{lo:.1f}, {hi:.1f}]" for r, lo, hi in reductions)
                 + f"; inside [{band(PAPER_REDUCTION)[0]:g}, {band(PAPER_REDUCTION)[1]:g}] "
                 + tally.said("prefixes"),
                 tallied(tally),
                 f"per prefix, the ratio's {1 - LEVEL:.0%} bootstrap interval over the runs "
                 f"inside the band [{band(PAPER_REDUCTION)[0]:g}, {band(PAPER_REDUCTION)[1]:g}]"
                 f" around the paper's {PAPER_REDUCTION:g} "
                 f"({ABOUT_TEST.split('(')[-1].rstrip(')')}; Holm over the prefixes)")


def export_fig1(paths: Sequence[str | Path], out: str | Path, doc: str | Path | None = None,
                models: Sequence[str] = (),
                summary_rows: Mapping[str, Sequence[str]] | None = None) -> list[Path]:
    """Write the CSV, the figure and (with `doc`) its block and summary row; return the files.
    `models` is accepted for the common signature: a `fig1` sweep runs one model."""
    out = Path(out)
    if doc is not None and summary_rows is not None:  # refuse a doc without a summary table
        find_block(Path(doc), SUMMARY_BLOCK)  # before writing anything
    rows = load_runs(paths).sort_values(["kind", "prefix", "method", "replicate", "K"])
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "fig1_wikitext_smollm2.csv"
    rows[list(COLUMNS)].to_csv(csv, index=False, float_format="%.6g")
    return [csv, *_draw(rows, out, csv, doc, summary_rows)]


def _draw(rows: pd.DataFrame, out: Path, csv: Path, doc: str | Path | None,
          summary_rows: Mapping[str, Sequence[str]] | None) -> list[Path]:
    """The figure, and with `doc` its block and summary row, from the runs' rows."""
    ratios = variance_ratios(rows, 1 - LEVEL)
    written = save(figure(rows, ratios), out, "fig1_smollm2")
    if doc is not None:
        folder = Path(os.path.relpath(out.resolve(), Path(doc).resolve().parent)).as_posix()
        update_doc(Path(doc), NAME, _block(rows, ratios, folder, csv), TITLE)
        if summary_rows is not None:
            update_summary(Path(doc), _summary_row(rows),
                           {t: (t, *r) for t, r in summary_rows.items()})
        written.append(Path(doc))
    return written


def rejudge(folder: Path, doc: Path, summary_rows: Mapping[str, Sequence[str]]) -> None:
    """Its figure, block and summary row from the committed `fig1_wikitext_<model>.csv`
    alone."""
    for path in sorted(folder.glob("fig1_wikitext_*.csv")):
        _draw(pd.read_csv(path), folder, path, doc, summary_rows)


def _block(rows: pd.DataFrame, ratios: pd.DataFrame, folder: str, csv: Path) -> str:
    runs = rows.replicate.nunique()
    claims = pd.DataFrame([(c.claim, c.paper, c.seqq, c.test, c.holds) for c in checks(rows)],
                          columns=["Fig. 1 claim", "the paper", "seqq", "test", "holds"])
    return "\n".join([
        begin(NAME), "",
        f"Generated from {len(rows):,} estimates ({runs} runs per method and prefix, K = "
        f"{rows.K.min()}–{rows.K.max()}); the figure and [`{csv.name}`]({folder}/{csv.name}) were written "
        "by the same command.", "",
        f"![{TITLE} reproduction]({folder}/fig1_smollm2.png)", "",
        f"*{TITLE}: top, p(the sentence ends at K) per prefix: each method's mean over its runs, "
        f"the band holding the middle {BAND:.0%} of runs; bottom, Var naive / Var IS per K "
        f"with its {1 - LEVEL:.0%} F interval, at equal model calls as run (blue) and at an equal number "
        "of paths (green: naive's variance scaled by its paths over IS's; dashed: the paper's "
        f"{PAPER_REDUCTION:g}×).*", "",
        summary_markdown(summary(ratios)), "",
        "The paper's Fig. 1 claims beside seqq's numbers, each judged by the test beside it:", "",
        to_markdown(claims), "",
        end(NAME)])


def _summary_row(rows: pd.DataFrame) -> tuple[str, str, str, str]:
    kinds = rows.drop_duplicates("prefix").kind.value_counts()
    calls = rows[rows.method == "importance"].groupby("replicate").model_calls.mean().mean()
    size = (f"{rows.prefix.nunique()} prefixes ({', '.join(f'{n} {k}' for k, n in kinds.items())}"
            f"); K = {rows.K.min()}–{rows.K.max()}; {rows.replicate.nunique()} runs per method, "
            f"~{calls:,.0f} calls a run")
    return TITLE, MODELS, size, judge([("wikitext", c) for c in checks(rows)])


EXPERIMENT = OwnRows(
    name=NAME, title=TITLE, sweep="fig1", models=MODELS, results="sentence_end", reads=reads,
    sweep_on="wikitext", sweep_args="model=smollm2",
    report=write_sentence_end_report, export=export_fig1, rejudge=rejudge, kept="smollm2",
    pending="not run yet: `make fig1 SIZE=paper` (the `fig1` preset, SmolLM2 on WikiText)")
