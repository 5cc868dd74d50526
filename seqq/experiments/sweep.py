"""`seqq query-sweep`: the paper's evidence from a model, a dataset and a set of estimators.

Config groups pick the dataset, model, query, estimators, budget levels and ground-truth
settings; `experiment=<preset>` bundles them per paper figure. Results go to
`<sweep.dir>/results/` as Parquet parts (resumable, see `runner.py`), ground truth to
`<sweep.dir>/ground_truth/`, and a Markdown summary with figures to `<sweep.dir>/report/`.

The whole config is checked (`check_config`, then the symbols against the dataset's vocabulary
and the checkpoint's presence) before any model is loaded or any query is run.
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

import seqq
from seqq import config_checks as check
from seqq.api import check_method
from seqq.commands import Help, hydra_job, run_hydra, wants_help
from seqq.data import DATASETS, SequenceDataset, load_dataset
from seqq.data.cache import file_digest
from seqq.errors import CheckpointError, ConfigError, Interrupted, MissingRawData
from seqq.estimators import METHODS
from seqq.experiments.gt_cache import GroundTruthCache, NoGroundTruth
from seqq.experiments.histories import History, mixture_histories, sample_histories, shard
from seqq.experiments.provenance import write_provenance
from seqq.experiments.query_specs import KINDS, QuerySpec, build_specs, resolve_symbols
from seqq.experiments.runner import KEY, SweepPlan, SweepRunner
from seqq.experiments.store import PartStore
from seqq.models import SequenceModel, TemperatureModel
from seqq.models.device import resolve_device
from seqq.models.loading import LOADERS, load_model, lstm_checkpoint
from seqq.reports.build import build_report
from seqq.reports.figures import FIGURES

CONF = Path(__file__).resolve().parents[2] / "conf"
SIZES = ("quick", "paper")
# What `make` trains at SIZE=quick (Makefile TRAIN_quick): minutes per LSTM instead of hours.
QUICK_TRAINING = "trainer=ci model.hidden_size=128"
log = logging.getLogger(__name__)

HELP = Help(
    "query-sweep",
    "Run estimators over many queries of one model and dataset; write results, ground truth "
    "and a report (summary.md, tables, figures) under <sweep.dir>.",
    groups=[
        ("experiment", "a paper figure's preset (bundles the groups below)"),
        ("dataset", "the data; absent raw files -> its synthetic stand-in"),
        ("model", "the model queried (lstm: <checkpoint_dir>/<dataset>_lstm.pt)"),
        ("query", "query kind"),
        ("estimator", "which methods run, with their options"),
        ("budget", "budget levels S (hybrid tail samples)"),
        ("ground_truth", "exact below a call budget, else adaptive IS"),
    ],
    options=[
        ("size", "quick | paper: presets use small N and ground truth unless paper"),
        ("device", "auto (cuda when available) | cpu | cuda | cuda:N"),
        ("checkpoint_dir", "LSTM checkpoints (default outputs/checkpoints; size=paper: .../paper)"),
        ("data_root", "folder of raw data (default data)"),
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
        ("sweep.min_history", "fewest symbols before a query position"),
        ("sweep.max_history", "keep only the most recent symbols (null: all)"),
        ("sweep.histories_from", "test (random test positions) | mixture (case studies)"),
        ("sweep.mixture.focus", "mixture: symbols whose share varies"),
        ("sweep.mixture.exclude", "mixture: symbols never drawn"),
        ("sweep.mixture.shares", "mixture: shares of focus symbols"),
        ("sweep.mixture.per_share", "mixture: histories per share"),
        ("sweep.mixture.length", "mixture: history length"),
        ("sweep.ground_truth", "false: estimates only, no ground truth"),
        ("sweep.shard", "this job's shard of the histories (0..shards-1)"),
        ("sweep.shards", "number of shards (SLURM arrays)"),
        ("sweep.progress", "progress bars"),
        ("sweep.report", "write <sweep.dir>/report when done"),
        ("sweep.figures", "figures to draw (null: all the results support)"),
        ("query.a", "observed | observed_first | ids or tokens, e.g. [3,4]"),
        ("query.b", "a_before_b: observed_other | ids or tokens"),
        ("query.n", "count: observed | a number"),
        ("estimator.methods", f"methods to run: {', '.join(METHODS)}"),
        ("estimator.options.<method>.<option>", "e.g. estimator.options.hybrid.max_width=1500"),
        ("budget.levels", "budget levels S, e.g. [10,100]; 0 = no budget"),
        ("model.checkpoint", "an LSTM checkpoint file (null: the default path)"),
        ("hydra/launcher", "slurm: one SLURM job per multirun job"),
    ],
)


def _by_size(quick: Any, paper: Any, *, _root_: DictConfig) -> Any:
    """`${by_size:quick_value,paper_value}`: presets stay small unless `size=paper`."""
    return paper if _root_.get("size", "quick") == "paper" else quick


OmegaConf.register_new_resolver("by_size", _by_size, replace=True)


def horizons(cfg: DictConfig) -> list[int]:
    if check.value(cfg, "sweep.ks") is not None:
        return check.integers(cfg, "sweep.ks", minimum=1)
    k_min = check.integer(cfg, "sweep.k_min", minimum=1)
    k_max = check.integer(cfg, "sweep.k_max", minimum=1)
    if k_max < k_min:
        raise ConfigError(f"sweep.k_max ({k_max}) is below sweep.k_min ({k_min})")
    return list(range(k_min, k_max + 1))


def _check_sweep(cfg: DictConfig) -> None:
    ks = horizons(cfg)
    future = check.integer(cfg, "sweep.future", minimum=1, optional=True)
    if future is not None and future < max(ks):
        raise ConfigError(f"sweep.future ({future}) must be at least the largest K ({max(ks)})")
    if check.choice(cfg, "sweep.histories_from", ("test", "mixture")) == "test":
        check.integer(cfg, "sweep.histories", minimum=1)
    else:
        check.integer(cfg, "sweep.mixture.per_share", minimum=1)
        check.integer(cfg, "sweep.mixture.length", minimum=1)
        check.numbers(cfg, "sweep.mixture.shares", above=-1e-12, at_most=1)
    check.numbers(cfg, "sweep.temperatures", above=0)
    check.integer(cfg, "sweep.seed", minimum=0)
    check.integer(cfg, "sweep.chunk_size", minimum=1)
    check.integer(cfg, "sweep.min_history", minimum=0)
    check.integer(cfg, "sweep.max_history", minimum=1, optional=True)
    shards = check.integer(cfg, "sweep.shards", minimum=1)
    if check.integer(cfg, "sweep.shard", minimum=0) >= shards:
        raise ConfigError(f"sweep.shard must lie in 0..{shards - 1} (sweep.shards={shards})")
    for key in ("sweep.ground_truth", "sweep.progress", "sweep.report"):
        check.boolean(cfg, key)
    check.names(cfg, "sweep.figures", list(FIGURES), optional=True)


def _check_estimators(cfg: DictConfig) -> None:
    methods = check.names(cfg, "estimator.methods", list(METHODS))
    options = check.value(cfg, "estimator.options") or {}
    if not isinstance(options, dict):
        raise ConfigError("estimator.options must map methods to their options, e.g. "
                          "estimator.options.hybrid.max_width=1500")
    for method, given in options.items():
        if method not in METHODS:
            raise ConfigError(f"estimator.options.{method}: no method {method!r}; methods are "
                              f"{', '.join(METHODS)}")
        if not isinstance(given, dict):
            raise ConfigError(f"estimator.options.{method} must be a mapping of options, e.g. "
                              f"estimator.options.{method}.<option>=<value>")
    for method in methods:
        check_method(method, options.get(method) or {})
    check.integers(cfg, "budget.levels", minimum=0)


def _check_query(cfg: DictConfig) -> None:
    kind = check.choice(cfg, "query.kind", KINDS)
    if kind == "count" and check.value(cfg, "query.n") != "observed":
        check.integer(cfg, "query.n", minimum=0)
    if kind == "a_before_b" and "both_orders" in cfg.query:
        check.boolean(cfg, "query.both_orders")


def _check_ground_truth(cfg: DictConfig) -> None:
    options = check.value(cfg, "ground_truth") or {}
    known = set(inspect.signature(seqq.ground_truth_many).parameters) - {
        "model", "histories", "queries", "seed"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"ground_truth.{unknown[0]} is not a ground-truth setting; use "
                          f"{', '.join(sorted(known))}")
    for key in ("s_low", "s_step", "s_high", "exact_max_calls"):
        if key in options:
            check.integer(cfg, f"ground_truth.{key}", minimum=1 if key != "exact_max_calls" else 0)


def check_config(cfg: DictConfig) -> None:
    """Every setting the sweep reads, checked before any data or model is loaded."""
    check.choice(cfg, "size", SIZES)
    resolve_device(check.value(cfg, "device"))
    check.choice(cfg, "model.type", LOADERS)
    resolve_device(cfg.model.get("device"))
    _check_sweep(cfg)
    _check_estimators(cfg)
    _check_query(cfg)
    _check_ground_truth(cfg)


def train_command(cfg: DictConfig, dataset: str) -> str:
    """The `seqq train` command that writes the checkpoint this sweep looks for."""
    parts = ["seqq train", f"dataset={dataset}", f"checkpoint_dir={cfg.checkpoint_dir}"]
    if cfg.model.get("checkpoint"):
        parts.append(f"model.checkpoint={cfg.model.checkpoint}")
    if cfg.data_root != "data":
        parts.append(f"data_root={cfg.data_root}")
    if cfg.size == "quick":
        parts.append(QUICK_TRAINING)
    return " ".join(parts)


def load_sweep_model(cfg: DictConfig, dataset: SequenceDataset) -> SequenceModel:
    """The configured model for this dataset; an LSTM checkpoint that is missing, unreadable
    or of another vocabulary stops the sweep with the command that trains the right one."""
    minutes = "about 3 minutes" if cfg.size == "quick" else "hours on a CPU"
    if cfg.model.type == "lstm":
        path = lstm_checkpoint(cfg.model, dataset.name, cfg.checkpoint_dir)
        if not path.is_file():
            raise CheckpointError(f"no LSTM checkpoint for {dataset.name} at {path}; train one "
                                  f"first ({minutes}): {train_command(cfg, dataset.name)}")
    try:
        return load_model(cfg.model, dataset.name, cfg.checkpoint_dir, dataset.vocab)
    except CheckpointError as bad:
        raise CheckpointError(f"{bad}; the training command ({minutes}): "
                              f"{train_command(cfg, dataset.name)}") from bad


def model_id(cfg: DictConfig, dataset: str) -> str:
    """The `model` column: the config's name, and for an LSTM a hash of its checkpoint, so a
    retrained model never resumes (or reuses the ground truth of) its predecessor's sweep."""
    m = cfg.model
    name = str(m.get("name") or m.get("name_or_path") or m.type)
    if m.type != "lstm":
        return name
    return f"{name}@{file_digest(lstm_checkpoint(m, dataset, cfg.checkpoint_dir))[:8]}"


def load_data(cfg: DictConfig) -> SequenceDataset:
    """The dataset; one whose raw files are absent falls back to its synthetic stand-in
    (`synthetic_<name>`), which every table and figure then labels as such."""
    name = cfg.dataset.name
    options = OmegaConf.to_container(cfg.dataset.get("options") or {}, resolve=True)
    try:
        return load_dataset(name, cfg.data_root, **options)
    except MissingRawData as missing:
        if f"synthetic_{name}" not in DATASETS:
            raise
        log.warning("%s; using the synthetic stand-in synthetic_%s", missing, name)
        return load_dataset(f"synthetic_{name}")


def make_histories(cfg: DictConfig, dataset: SequenceDataset, horizon: int) -> list[History]:
    """Test-split positions (the paper's protocol) or synthetic mixtures (case studies)."""
    s = cfg.sweep
    if s.histories_from == "mixture":
        m = s.mixture

        def ids(key: str) -> list[int]:
            given = list(m[key])
            return list(resolve_symbols(f"sweep.mixture.{key}", given, dataset.vocab)) if given else []

        return mixture_histories(len(dataset.vocab), ids("focus"), list(m.shares), m.per_share,
                                 m.length, s.seed, ids("exclude"), dataset.bos_id)
    return sample_histories(dataset.test, s.histories, horizon, s.seed, s.min_history,
                            s.get("max_history"), keep_first=dataset.bos_id is not None)


def make_specs(cfg: DictConfig, dataset: SequenceDataset) -> list[QuerySpec]:
    """This shard's queries; the query's symbols are checked against the vocabulary here."""
    s, ks = cfg.sweep, horizons(cfg)
    future = s.get("future") or max(ks)  # observed symbols needed after each history
    histories = shard(make_histories(cfg, dataset, future), s.shard, s.shards)
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
    specs = make_specs(cfg, dataset)
    model = model if model is not None else load_sweep_model(cfg, dataset)
    model_name = model_id(cfg, dataset.name)
    sweep_dir = Path(s.dir)
    run_dir = Path(run_dir) if run_dir else sweep_dir / "logs"
    write_provenance(run_dir, OmegaConf.to_container(cfg, resolve=True), s.seed)
    results = PartStore(results_dir(sweep_dir), KEY)
    gt_options = OmegaConf.to_container(cfg.ground_truth, resolve=True)
    tag = f"{dataset.name}-{model_name}-shard{s.shard}of{s.shards}"
    runners = []
    for temperature in s.temperatures:
        tempered = model if temperature == 1 else TemperatureModel(model, temperature)
        truth = (GroundTruthCache(str(sweep_dir / "ground_truth"), dataset.name, model_name,
                                  temperature, gt_options, s.seed)
                 if s.ground_truth else NoGroundTruth())
        plan = SweepPlan(
            dataset=dataset.name, model=model_name, synthetic=bool(dataset.synthetic),
            vocab_size=len(dataset.vocab),
            temperature=float(temperature), methods=list(cfg.estimator.methods),
            levels=[int(x) for x in cfg.budget.levels], seed=int(s.seed),
            chunk_size=int(s.chunk_size), tag=f"{tag}-T{temperature}",
            options=OmegaConf.to_container(cfg.estimator.options, resolve=True),
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
