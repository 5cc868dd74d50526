"""`seqq query-sweep`: the paper's evidence from a model, a dataset and a set of estimators.

Config groups pick the dataset, model, query, estimators, budget levels and ground-truth
settings; `experiment=<preset>` bundles them per paper figure. Results go to
`<sweep.dir>/results/` as Parquet parts (resumable, see `runner.py`), ground truth to
`<sweep.dir>/ground_truth/`, and a Markdown summary with figures to `<sweep.dir>/report/`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from seqq.experiments.gt_cache import GroundTruthCache, NoGroundTruth
from seqq.experiments.histories import (
    History,
    mixture_histories,
    model_histories,
    sample_histories,
    sampled_dataset,
    shard,
)
from seqq.experiments.provenance import write_provenance
from seqq.experiments.query_specs import build_specs
from seqq.experiments.runner import KEY, SweepPlan, SweepRunner
from seqq.experiments.store import PartStore
from seqq.models import MarkovModel, SequenceModel, TemperatureModel

CONF = Path(__file__).resolve().parents[2] / "conf"
log = logging.getLogger(__name__)


def _by_size(quick: Any, paper: Any, *, _root_: DictConfig) -> Any:
    """`${by_size:quick_value,paper_value}`: presets stay small unless `size=paper`."""
    return paper if _root_.get("size", "quick") == "paper" else quick


OmegaConf.register_new_resolver("by_size", _by_size, replace=True)


def horizons(cfg: DictConfig) -> list[int]:
    ks = cfg.sweep.get("ks")
    return [int(k) for k in ks] if ks else list(range(cfg.sweep.k_min, cfg.sweep.k_max + 1))


def load_model(cfg: DictConfig, dataset: Any) -> SequenceModel:
    """The model to query: a random Markov chain (`model.type=markov`: exact answers, for tests
    and smoke runs) or what `seqq.models.loading.load_model` builds (LSTM checkpoint of this
    dataset, HuggingFace LM, SmolLM2)."""
    m = cfg.model
    if m.type == "markov":
        return MarkovModel.random(len(dataset.vocab), m.get("order", 1),
                                  m.get("concentration", 0.5), m.get("seed", 0))
    from seqq.models.loading import load_model as load_trained

    if dataset is None:  # histories_from=model without data files: the model names the symbols
        return load_trained(m, dataset=cfg.dataset.name, checkpoint_dir=cfg.checkpoint_dir)
    return load_trained(m, dataset=dataset.name, checkpoint_dir=cfg.checkpoint_dir,
                        vocab=dataset.vocab)


def model_id(cfg: DictConfig, dataset: str) -> str:
    """The `model` column: the config's name, and for an LSTM a hash of its checkpoint, so a
    retrained model never resumes (or reuses the ground truth of) its predecessor's sweep."""
    m = cfg.model
    name = str(m.get("name") or m.get("name_or_path") or m.type)
    if m.type not in ("lstm", "hpyp"):
        return name
    from seqq.data.cache import file_digest

    path = m.get("checkpoint") or Path(cfg.checkpoint_dir) / f"{dataset}_{m.type}.pt"
    return f"{name}@{file_digest(Path(path))[:8]}"


def load_data(cfg: DictConfig) -> Any:
    """The dataset; one whose raw files are absent falls back to its synthetic stand-in
    (`synthetic_<name>`), which every table and figure then labels as such; with
    `sweep.histories_from=model` it is None instead (the model supplies symbols and histories)."""
    from seqq.data import DATASETS, MissingRawData, load_dataset

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


def make_histories(cfg: DictConfig, dataset: Any, horizon: int,
                   model: SequenceModel | None = None) -> list[History]:
    """Test-split positions (the paper's protocol), synthetic mixtures (case studies), or
    sequences sampled from the model (datasets whose files are absent)."""
    s = cfg.sweep
    if s.histories_from not in ("test", "mixture", "model"):
        raise ValueError(f"sweep.histories_from must be test, mixture or model, "
                         f"got {s.histories_from!r}")
    if s.histories_from == "model":
        return model_histories(model, s.histories, horizon, s.seed, dataset.bos_id,
                               s.min_history, s.sampled_length, s.get("max_history"))
    if s.histories_from == "mixture":
        m = s.mixture
        return mixture_histories(len(dataset.vocab), list(m.focus), list(m.shares), m.per_share,
                                 m.length, s.seed, list(m.exclude), dataset.bos_id)
    return sample_histories(dataset.test, s.histories, horizon, s.seed, s.min_history,
                            s.get("max_history"), keep_first=dataset.bos_id is not None)


def with_surrogate(options: dict[str, Any], dataset: Any) -> dict[str, Any]:
    """`twisted`'s options with its `order` (auto when absent) replaced by the surrogate it
    names: an HPYP n-gram fitted on the dataset's training split, in seconds."""
    from seqq.estimators.twisted import fit_surrogate

    rest = dict(options)
    order = rest.pop("order", None)
    return {**rest, "surrogate": fit_surrogate(dataset.train, dataset.vocab, order)}


def results_dir(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / "results"


def run(cfg: DictConfig, model: SequenceModel | None = None, dataset: Any = None,
        run_dir: str | Path | None = None) -> Path:
    """Run the configured sweep (or finish an interrupted one); return the sweep folder."""
    s = cfg.sweep
    dataset = dataset if dataset is not None else load_data(cfg)
    model = model if model is not None else load_model(cfg, dataset)
    dataset = dataset if dataset is not None else sampled_dataset(cfg.dataset.name, model)
    model_name = model_id(cfg, dataset.name)
    ks = horizons(cfg)
    future = s.get("future") or max(ks)  # observed symbols needed after each history
    histories = shard(make_histories(cfg, dataset, future, model), s.shard, s.shards)
    specs = build_specs(histories, ks, cfg.query, dataset.vocab)
    sweep_dir = Path(s.dir)
    run_dir = Path(run_dir) if run_dir else sweep_dir / "logs"
    write_provenance(run_dir, OmegaConf.to_container(cfg, resolve=True), s.seed)
    results = PartStore(results_dir(sweep_dir), KEY)
    gt_options = OmegaConf.to_container(cfg.ground_truth, resolve=True)
    tag = f"{dataset.name}-{model_name}-shard{s.shard}of{s.shards}"
    options = OmegaConf.to_container(cfg.estimator.options, resolve=True)
    if "twisted" in cfg.estimator.methods:
        options["twisted"] = with_surrogate(options.get("twisted") or {}, dataset)
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
            temperature=float(temperature), methods=list(cfg.estimator.methods),
            levels=[int(x) for x in cfg.budget.levels], seed=int(s.seed),
            chunk_size=int(s.chunk_size), tag=f"{tag}-T{temperature}",
            options=options,
        )
        written = SweepRunner(tempered, plan, results, truth, progress=s.progress).run(specs)
        log.info("%s T=%s: %d new rows in %s", tag, temperature, written, results.root)
    if s.report:
        from seqq.reports.build import build_report

        build_report([results.root], sweep_dir / "report", figures=s.get("figures"))
    return sweep_dir


@hydra.main(config_path=str(CONF), config_name="sweep", version_base=None)
def _app(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN and cfg.sweep.report:
        # jobs of one multirun share a sweep folder: merge once, after all of them
        cfg.sweep.report = False
        log.info("multirun job: no per-job report; run `seqq report %s` when all are done",
                 results_dir(cfg.sweep.dir))
    run(cfg, run_dir=hydra_cfg.runtime.output_dir)


def main() -> None:
    _app()
