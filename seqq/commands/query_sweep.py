"""`seqq query-sweep`: run a sweep (`seqq.sweeps.sweep`), then write its report
(`seqq.reports.build`) under `<sweep.dir>/report/`.

This command is the one module that calls both layers: sweeps write the results table and
reports read it (`seqq.results`), and neither imports the other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from seqq.commands.plumbing import Help, hydra_job, run_hydra
from seqq.estimators import METHODS
from seqq.paths import CONF
from seqq.reports.build import build_report
from seqq.reports.figures import FIGURES
from seqq.reports.kl import write_kl_report
from seqq.reports.sentence_end import write_sentence_end_report
from seqq.results.jobs import QUERIES, SENTENCE_END, SYMBOL_KL
from seqq.sweeps import config_checks as check
from seqq.sweeps import sweep
from seqq.sweeps.sweep_config import check_renamed, sweep_spec

log = logging.getLogger(__name__)

HELP = Help(
    "query-sweep",
    "Run estimators over many queries of one model and dataset; write results, ground truth "
    "and a report (summary.md, tables, figures) under <sweep.dir>.",
    groups=[
        ("preset", "a named sweep: a paper figure's, demo or frontier (bundles the groups below)"),
        ("dataset", "the data; absent raw files -> its synthetic stand-in"),
        ("model", "the model queried (lstm: <checkpoint_dir>/<dataset>_lstm.pt)"),
        ("query", "query kind"),
        ("estimator", "which methods run, with their options"),
        ("levels", "a grid of levels S (hybrid tail samples; each sets the budgets)"),
        ("ground_truth", "exact up to a cost cap in calls, else twisted WOR"),
    ],
    options=[
        ("size", "quick | paper: presets use small N and ground truth unless paper"),
        ("device", "auto (cuda when available) | cpu | cuda | cuda:N"),
        ("checkpoint_dir", "trained checkpoints (default <data_root>/checkpoints; size=paper: "
                           ".../paper)"),
        ("data_root", "raw data, caches, checkpoints (default $SEQQ_DATA, else ./data if "
                      "present, else ~/.local/share/seqq)"),
        ("sweep.name", "sweep folder name under sweep.root"),
        ("sweep.root", "parent of sweep folders (default outputs/sweeps)"),
        ("sweep.dir", "the sweep folder (default <root>/<name>, -paper at size=paper)"),
        ("sweep.histories", "N query histories from the test split"),
        ("sweep.k_min", "smallest horizon K"),
        ("sweep.k_max", "largest horizon K"),
        ("sweep.ks", "explicit list of horizons, e.g. [3,7,11]; overrides k_min..k_max"),
        ("sweep.future", "observed symbols needed after a history (null: max K)"),
        ("sweep.temperatures", "model temperatures T, e.g. [0.5,1.0,2.0]"),
        ("sweep.seed", "seed of histories and estimators"),
        ("sweep.chunk_size", "queries per batched estimator call and per stored part"),
        ("sweep.repeats", "independent runs (seeds) per query, method and level S, pooled"),
        ("sweep.min_history", "fewest symbols before a query position"),
        ("sweep.max_history", "keep only the most recent symbols (null: all)"),
        ("sweep.histories_from", "test (random test positions) | mixture (case studies) | "
                                 "model (sampled from the model: datasets without files)"),
        ("sweep.sampled_length", "histories_from=model: longest sampled history (null: the "
                                 "dataset's window)"),
        ("sweep.mixture.focus", "mixture: symbols whose share varies"),
        ("sweep.mixture.exclude", "mixture: symbols never drawn"),
        ("sweep.mixture.shares", "mixture: shares of focus symbols"),
        ("sweep.mixture.per_share", "mixture: histories per share"),
        ("sweep.mixture.length", "mixture: history length"),
        ("sweep.ground_truth", "false: estimates only, no ground truth"),
        ("sweep.refine_truth", "estimated truths are refined to a relative SE at most this "
                               "share of the smallest median RAE they judge (null: never)"),
        ("sweep.symbol_kl", "Tables 3-6 (preset=kl): {lengths, samples, truth_paths}: "
                            "KL of the next symbol's distribution instead of queries"),
        ("sweep.sentence_end", "Fig. 1 (preset=fig1): {k_max, samples, replicates, "
                               "context_tokens, per_kind}: IS vs naive on when a sentence ends"),
        ("sweep.shard", "this job's shard of the histories (0..shards-1)"),
        ("sweep.shards", "number of shards (SLURM arrays)"),
        ("sweep.progress", "progress bars"),
        ("sweep.report", "write <sweep.dir>/report when done"),
        ("sweep.figures", "figures to draw (null: all the results support)"),
        ("query.a", "observed | observed_first | ids or tokens, e.g. [3,4]"),
        ("query.b", "a_before_b: observed_other | ids or tokens"),
        ("query.n", "count: observed | a number"),
        ("query.expr", "expr: a query-language template, e.g. 'count({observed}, {K}) >= 2' "
                       "(docs/query-language.md)"),
        ("estimator.methods", f"methods to run: {', '.join(METHODS)}"),
        ("estimator.options.<method>.<option>", "e.g. estimator.options.hybrid.max_width=1500"),
        ("estimator.variants.<label>", "a method under its own label (list it in "
                                       "estimator.methods), e.g. {method:smc,surrogate:hpyp}"),
        ("estimator.variants.<label>.surrogate", "hpyp (here or in estimator.options.<method>): "
                                                 "an HPYP n-gram fitted on the training split, "
                                                 "of .order (null: the largest that fits)"),
        ("levels.S", "the levels S, e.g. [10,100]; 0 = no budget"),
        ("model.checkpoint", "an LSTM checkpoint file (null: the default path)"),
        ("hydra/launcher", "slurm: one SLURM job per multirun job"),
    ],
)



REPORTS: dict[str, Callable[[list[Path], Path, list[str] | None], object]] = {  # per job kind
    QUERIES.name: build_report,
    SYMBOL_KL.name: lambda rows, out, figures: write_kl_report(rows, out),
    SENTENCE_END.name: lambda rows, out, figures: write_sentence_end_report(rows, out),
}


def report_figures(cfg: DictConfig) -> list[str] | None:
    """`sweep.figures`: the figures the report draws, checked against those it knows before the
    sweep runs (None: every one the results support)."""
    if check.value(cfg, "sweep.figures") is None:
        return None
    return check.names(cfg, "sweep.figures", list(FIGURES))


def run(cfg: DictConfig, run_dir: str | Path | None = None) -> Path:
    """What the command does with its config: check every setting before any data or model is
    loaded, run the sweep, then report it unless `sweep.report=false`; return the sweep folder."""
    spec = sweep_spec(cfg)
    figures = report_figures(cfg)
    sweep_dir = sweep.run(spec, run_dir=run_dir)
    if spec.report:
        REPORTS[spec.job.name]([spec.job.rows(sweep_dir)], sweep_dir / "report", figures)
    return sweep_dir


@hydra.main(config_path=str(CONF), config_name="sweep", version_base=None)
@hydra_job("query-sweep")
def _app(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    merge_later = multirun and cfg.sweep.report
    if merge_later:
        # jobs of one multirun share a sweep folder: merge once, after all of them (set in the
        # config itself, so the run's provenance records it)
        cfg.sweep.report = False
    sweep_dir = run(cfg, run_dir=hydra_cfg.runtime.output_dir)
    results = sweep_spec(cfg).job.rows(sweep_dir)
    if merge_later:
        log.info("multirun job: no per-job report; run `seqq report %s` when all are done",
                 results)
    elif not multirun:
        if cfg.sweep.report:
            print(f"report: {sweep_dir / 'report' / 'summary.md'}")
        else:
            print(f"results: {results} (report them with: seqq report {results})")


def main(argv: list[str]) -> int:
    check_renamed(argv)
    return run_hydra(_app, HELP, argv)
