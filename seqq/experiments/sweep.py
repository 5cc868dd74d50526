"""`seqq query-sweep`: the paper's evidence from a model, a dataset and a set of estimators.

Config groups pick the dataset, model, query, estimators, budget levels and ground-truth
settings; `experiment=<preset>` bundles them per paper figure. Results go to
`<sweep.dir>/results/` as Parquet parts (resumable, see `runner.py`), ground truth to
`<sweep.dir>/ground_truth/`, and a Markdown summary with figures to `<sweep.dir>/report/`.

The whole config is checked (`check_config`, then the symbols against the dataset's vocabulary
and the checkpoint's presence) before any model is loaded or any query is run.
"""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from seqq.commands import CONF, hydra_job, run_hydra, wants_help
from seqq.data import DATASETS, SequenceDataset, load_dataset
from seqq.data.cache import file_digest
from seqq.errors import CheckpointError, Interrupted, MissingRawData
from seqq.experiments.gt_cache import GroundTruthCache, NoGroundTruth
from seqq.experiments.histories import (
    History,
    mixture_histories,
    model_histories,
    sample_histories,
    sampled_dataset,
    shard,
)
from seqq.experiments.method_runs import method_runs, with_surrogates
from seqq.experiments.provenance import write_provenance
from seqq.experiments.query_specs import QuerySpec, build_specs, resolve_symbols
from seqq.experiments.runner import SweepPlan, SweepRunner
from seqq.experiments.schema import KEY
from seqq.experiments.store import PartStore
from seqq.experiments.sweep_config import HELP, check_config, horizons
from seqq.models import SequenceModel, TemperatureModel
from seqq.models.loading import load_model, trained_checkpoint
from seqq.reports.build import build_report

# What `make` trains at SIZE=quick (Makefile TRAIN_quick): minutes per LSTM instead of hours.
QUICK_TRAINING = "trainer=ci model.hidden_size=128"
TRAINED = ("lstm", "hpyp")  # model types whose checkpoint `seqq train` writes
log = logging.getLogger(__name__)


def train_command(cfg: DictConfig, dataset: str) -> str:
    """The `seqq train` command that writes the checkpoint this sweep looks for."""
    parts = ["seqq train", f"dataset={dataset}", f"checkpoint_dir={cfg.checkpoint_dir}"]
    if cfg.model.type != "lstm":
        parts.append(f"model={cfg.model.type}")
    if cfg.model.get("checkpoint"):
        parts.append(f"model.checkpoint={cfg.model.checkpoint}")
    if cfg.data_root != "data":
        parts.append(f"data_root={cfg.data_root}")
    if cfg.size == "quick" and cfg.model.type == "lstm":
        parts.append(QUICK_TRAINING)
    return " ".join(parts)


def load_sweep_model(cfg: DictConfig, dataset: SequenceDataset | None) -> SequenceModel:
    """The configured model for this dataset (None: no data files, the model names the symbols);
    a trained checkpoint that is missing, unreadable or of another vocabulary stops the sweep
    with the command that trains the right one."""
    name = dataset.name if dataset is not None else cfg.dataset.name
    vocab = dataset.vocab if dataset is not None else None
    if cfg.model.type not in TRAINED:
        return load_model(cfg.model, name, cfg.checkpoint_dir, vocab)
    minutes = "seconds" if cfg.model.type == "hpyp" else (
        "about 3 minutes" if cfg.size == "quick" else "hours on a CPU")
    path = trained_checkpoint(cfg.model, name, cfg.checkpoint_dir)
    if not path.is_file():
        raise CheckpointError(f"no {cfg.model.type} checkpoint for {name} at {path}; train one "
                              f"first ({minutes}): {train_command(cfg, name)}")
    try:
        return load_model(cfg.model, name, cfg.checkpoint_dir, vocab)
    except CheckpointError as bad:
        raise CheckpointError(f"{bad}; the training command ({minutes}): "
                              f"{train_command(cfg, name)}") from bad


def model_id(cfg: DictConfig, dataset: str) -> str:
    """The `model` column: the config's name, and for an LSTM a hash of its checkpoint, so a
    retrained model never resumes (or reuses the ground truth of) its predecessor's sweep."""
    m = cfg.model
    name = str(m.get("name") or m.get("name_or_path") or m.type)
    if m.type not in TRAINED:
        return name
    return f"{name}@{file_digest(trained_checkpoint(m, dataset, cfg.checkpoint_dir))[:8]}"


def load_data(cfg: DictConfig) -> SequenceDataset | None:
    """The dataset; one whose raw files are absent falls back to its synthetic stand-in
    (`synthetic_<name>`), which every table and figure then labels as such; with
    `sweep.histories_from=model` it is None instead (the model supplies symbols and histories)."""
    name = cfg.dataset.name
    options = OmegaConf.to_container(cfg.dataset.get("options") or {}, resolve=True)
    try:
        return load_dataset(name, cfg.data_root, **options)
    except MissingRawData as missing:
        if cfg.sweep.histories_from == "model":
            log.warning("%s; histories are sampled from the model", missing)
            return None
        if f"synthetic_{name}" not in DATASETS:
            raise
        log.warning("%s; using the synthetic stand-in synthetic_%s", missing, name)
        return load_dataset(f"synthetic_{name}")


def make_histories(cfg: DictConfig, dataset: SequenceDataset, horizon: int,
                   model: SequenceModel | None = None) -> list[History]:
    """Test-split positions (the paper's protocol), synthetic mixtures (case studies), or
    sequences sampled from the model (datasets whose files are absent)."""
    s = cfg.sweep
    if s.histories_from == "model":
        return model_histories(model, s.histories, horizon, s.seed, dataset.bos_id,
                               s.min_history, s.sampled_length, s.get("max_history"))
    if s.histories_from == "mixture":
        m = s.mixture

        def ids(key: str) -> list[int]:
            given = list(m[key])
            return list(resolve_symbols(f"sweep.mixture.{key}", given, dataset.vocab)) if given else []

        return mixture_histories(len(dataset.vocab), ids("focus"), list(m.shares), m.per_share,
                                 m.length, s.seed, ids("exclude"), dataset.bos_id)
    return sample_histories(dataset.test, s.histories, horizon, s.seed, s.min_history,
                            s.get("max_history"), keep_first=dataset.bos_id is not None)


def make_specs(cfg: DictConfig, dataset: SequenceDataset,
               model: SequenceModel | None = None) -> list[QuerySpec]:
    """This shard's queries; the query's symbols are checked against the vocabulary here."""
    s, ks = cfg.sweep, horizons(cfg)
    future = s.get("future") or max(ks)  # observed symbols needed after each history
    histories = shard(make_histories(cfg, dataset, future, model), s.shard, s.shards)
    return build_specs(histories, ks, cfg.query, dataset.vocab)


def results_dir(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / "results"


def run(cfg: DictConfig, model: SequenceModel | None = None,
        dataset: SequenceDataset | None = None, run_dir: str | Path | None = None) -> Path:
    """Run the configured sweep (or finish an interrupted one); return the sweep folder.

    Ctrl-C raises `Interrupted`, saying how many parts are saved: a re-run resumes from them.
    """
    check_config(cfg)
    s = cfg.sweep
    dataset = dataset if dataset is not None else load_data(cfg)
    if s.histories_from == "model":  # the model draws the histories (and may name the symbols)
        model = model if model is not None else load_sweep_model(cfg, dataset)
        dataset = dataset if dataset is not None else sampled_dataset(cfg.dataset.name, model)
        specs = make_specs(cfg, dataset, model)
    else:  # symbols are checked before the (possibly slow) model load
        specs = make_specs(cfg, dataset)
        model = model if model is not None else load_sweep_model(cfg, dataset)
    model_name = model_id(cfg, dataset.name)
    sweep_dir = Path(s.dir)
    run_dir = Path(run_dir) if run_dir else sweep_dir / "logs"
    write_provenance(run_dir, OmegaConf.to_container(cfg, resolve=True), s.seed)
    results = PartStore(results_dir(sweep_dir), KEY)
    gt_options = OmegaConf.to_container(cfg.ground_truth, resolve=True)
    tag = f"{dataset.name}-{model_name}-shard{s.shard}of{s.shards}"
    runs = with_surrogates(method_runs(cfg), dataset, model, s.seed)  # one fit each, shared
    runners = []
    for temperature in s.temperatures:
        tempered = model if temperature == 1 else TemperatureModel(model, temperature)
        truth = (GroundTruthCache(str(sweep_dir / "ground_truth"), dataset.name, model_name,
                                  temperature, gt_options, s.seed)
                 if s.ground_truth else NoGroundTruth())
        plan = SweepPlan(
            dataset=dataset.name, model=model_name, synthetic=bool(dataset.synthetic),
            histories=(f"sampled from {model_name}" if s.histories_from == "model"
                       else s.histories_from),
            vocab_size=len(dataset.vocab),
            temperature=float(temperature), runs=runs,
            levels=[int(x) for x in cfg.budget.levels], seed=int(s.seed),
            chunk_size=int(s.chunk_size), tag=f"{tag}-T{temperature}",
            repeats=int(s.repeats),
        )
        runners.append(SweepRunner(tempered, plan, results, truth, progress=s.progress))
    try:
        for runner in runners:
            written = runner.run(specs)
            log.info("%s T=%s: %d new rows in %s", tag, runner.plan.temperature, written,
                     results.root)
    except KeyboardInterrupt:
        saved = sum(r.saved_parts for r in runners)
        total = sum(r.part_count(specs) for r in runners)
        raise Interrupted(f"interrupted: {saved} of {total} parts saved under {results.root}; "
                          "re-run the same command to resume") from None
    if s.report:
        build_report([results.root], sweep_dir / "report", figures=s.get("figures"))
    return sweep_dir


@hydra.main(config_path=str(CONF), config_name="sweep", version_base=None)
@hydra_job("query-sweep")
def _app(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN and cfg.sweep.report:
        # jobs of one multirun share a sweep folder: merge once, after all of them
        cfg.sweep.report = False
        log.info("multirun job: no per-job report; run `seqq report %s` when all are done",
                 results_dir(cfg.sweep.dir))
    sweep_dir = run(cfg, run_dir=hydra_cfg.runtime.output_dir)
    if hydra_cfg.mode != RunMode.MULTIRUN:
        if cfg.sweep.report:
            print(f"report: {sweep_dir / 'report' / 'summary.md'}")
        else:
            print(f"results: {results_dir(sweep_dir)} (report them with: seqq report "
                  f"{results_dir(sweep_dir)})")


def main(argv: list[str]) -> int:
    if wants_help(argv):
        print(HELP.text())
        return 0
    run_hydra(_app, "query-sweep", argv)
    return 0
