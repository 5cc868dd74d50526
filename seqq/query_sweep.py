"""`seqq query-sweep`: run a sweep (`seqq.sweeps.sweep`), then write its report
(`seqq.reports.build`) under `<sweep.dir>/report/`.

This command is the one module that calls both layers: sweeps write the results table and
reports read it (`seqq.results`), and neither imports the other.
"""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from seqq import config_checks as check
from seqq.commands import CONF, hydra_job, run_hydra, wants_help
from seqq.reports.build import build_report
from seqq.reports.figures import FIGURES
from seqq.reports.kl import write_kl_report
from seqq.reports.sentence_end import write_sentence_end_report
from seqq.sweeps import sweep
from seqq.sweeps.sweep_config import HELP, sweep_spec

log = logging.getLogger(__name__)


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
    if spec.report and spec.symbol_kl is not None:
        write_kl_report([sweep.kl_dir(sweep_dir)], sweep_dir / "report")
    elif spec.report and spec.sentence_end is not None:
        write_sentence_end_report([sweep.sentence_end_dir(sweep_dir)], sweep_dir / "report")
    elif spec.report:
        build_report([sweep.results_dir(sweep_dir)], sweep_dir / "report", figures)
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
    results = (sweep.kl_dir if cfg.sweep.symbol_kl else sweep.sentence_end_dir
               if cfg.sweep.sentence_end else sweep.results_dir)(sweep_dir)
    if merge_later:
        log.info("multirun job: no per-job report; run `seqq report %s` when all are done",
                 results)
    elif not multirun:
        if cfg.sweep.report:
            print(f"report: {sweep_dir / 'report' / 'summary.md'}")
        else:
            print(f"results: {results} (report them with: seqq report {results})")


def main(argv: list[str]) -> int:
    if wants_help(argv):
        print(HELP.text())
        return 0
    run_hydra(_app, "query-sweep", argv)
    return 0
