"""A sweep: the paper's evidence from a model, a dataset and a set of estimators (the work of
`seqq query-sweep`, whose command, `seqq/commands/query_sweep.py`, then reports it).

Config groups pick the dataset, model, query, estimators, levels S and ground-truth
settings; `preset=<name>` bundles them (one per paper figure, and `demo`, `frontier`). Results go to
`<sweep.dir>/results/` as Parquet parts (resumable, see `runner.py`) and ground truth to
`<sweep.dir>/ground_truth/`.

The whole config is checked and typed once (`sweep_spec` → `SweepSpec`, then the symbols against
the dataset's vocabulary and the checkpoint's presence) before any model is loaded or any query
is run; below this module nothing sees the config.
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from seqq.data import DATASETS, SequenceDataset
from seqq.data.prepared import file_digest
from seqq.errors import CheckpointError, Interrupted, MissingRawData
from seqq.models import SequenceModel, TemperatureModel
from seqq.models.loading import load_model, trained_checkpoint
from seqq.paths import data_root
from seqq.results.jobs import QUERIES, SENTENCE_END, SYMBOL_KL
from seqq.results.schema import KEY
from seqq.results.store import PartStore
from seqq.sweeps.histories import (
    History,
    mixture_histories,
    model_histories,
    sample_histories,
    sampled_dataset,
    shard,
)
from seqq.sweeps.method_runs import with_surrogates
from seqq.sweeps.provenance import write_provenance
from seqq.sweeps.query_specs import QuerySpec, build_specs, resolve_symbols
from seqq.sweeps.refine import refine_truths
from seqq.sweeps.run_log import recorded
from seqq.sweeps.runner import SweepPlan, SweepRunner
from seqq.sweeps.sentence_end import run_sentence_end
from seqq.sweeps.specs import SweepSpec
from seqq.sweeps.sweep_config import check_config, horizons, sweep_spec
from seqq.sweeps.symbol_kl import run_histories as run_symbol_kl
from seqq.sweeps.truth_store import GroundTruthStore, JudgeSurrogate, NoGroundTruth

__all__ = ["QUICK_TRAINING", "check_config", "horizons", "load_data",
           "load_sweep_model", "make_specs", "model_id", "run", "sweep_spec", "train_command"]

# What `make` trains at SIZE=quick (Makefile TRAIN_quick): minutes per LSTM instead of hours.
QUICK_TRAINING = "trainer=ci model.hidden_size=128"
TRAINED = ("lstm", "hpyp")  # model types whose checkpoint `seqq train` writes
log = logging.getLogger(__name__)


def train_command(spec: SweepSpec, dataset: str) -> str:
    """The `seqq train` command that writes the checkpoint this sweep looks for."""
    model = spec.model
    parts = ["seqq train", f"dataset={dataset}", f"checkpoint_dir={spec.checkpoint_dir}"]
    if model.type != "lstm":
        parts.append(f"model={model.type}")
    if model.checkpoint:
        parts.append(f"model.checkpoint={model.checkpoint}")
    if spec.dataset.root != data_root():
        parts.append(f"data_root={spec.dataset.root}")
    if spec.size == "quick" and model.type == "lstm":
        parts.append(QUICK_TRAINING)
    return " ".join(parts)


def load_sweep_model(spec: SweepSpec, dataset: SequenceDataset | None) -> SequenceModel:
    """The configured model for this dataset (None: no data files, the model names the symbols);
    a trained checkpoint that is missing, unreadable or of another vocabulary stops the sweep
    with the command that trains the right one."""
    model = spec.model
    name = dataset.name if dataset is not None else spec.dataset.name
    vocab = dataset.vocab if dataset is not None else None
    if model.type not in TRAINED:
        return load_model(model, name, spec.checkpoint_dir, vocab)
    minutes = "seconds" if model.type == "hpyp" else (
        "about 3 minutes" if spec.size == "quick" else "hours on a CPU")
    path = trained_checkpoint(model, name, spec.checkpoint_dir)
    if not path.is_file():
        raise CheckpointError(f"no {model.type} checkpoint for {name} at {path}; train one "
                              f"first ({minutes}): {train_command(spec, name)}")
    try:
        return load_model(model, name, spec.checkpoint_dir, vocab)
    except CheckpointError as bad:
        raise CheckpointError(f"{bad}; the training command ({minutes}): "
                              f"{train_command(spec, name)}") from bad


def model_id(spec: SweepSpec, dataset: str) -> str:
    """The `model` column: the config's name, and for an LSTM a hash of its checkpoint, so a
    retrained model never resumes (or reuses the ground truth of) its predecessor's sweep."""
    m = spec.model
    name = str(m.name or m.name_or_path or m.type)
    if m.type not in TRAINED:
        return name
    return f"{name}@{file_digest(trained_checkpoint(m, dataset, spec.checkpoint_dir))[:8]}"


def load_data(spec: SweepSpec) -> SequenceDataset | None:
    """The dataset; one whose raw files are absent falls back to its synthetic stand-in
    (`synthetic_<name>`), which every table and figure then labels as such; with
    `sweep.histories_from=model` it is None instead (the model supplies symbols and histories),
    and so with synthetic mixtures on a model not trained by seqq (its own vocabulary names the
    symbols: Fig. 15's protocol on the authors' MOOCs LSTM)."""
    name = spec.dataset.name
    try:
        return spec.dataset.load()
    except MissingRawData as missing:
        if spec.histories.source == "model":
            log.warning("%s; histories are sampled from the model", missing)
            return None
        if spec.histories.source == "mixture" and spec.model.type not in TRAINED:
            log.warning("%s; the model's vocabulary names the mixtures' symbols", missing)
            return None
        if f"synthetic_{name}" not in DATASETS:
            raise
        log.warning("%s; using the synthetic stand-in synthetic_%s", missing, name)
        return spec.dataset.load(f"synthetic_{name}")


def make_histories(spec: SweepSpec, dataset: SequenceDataset, horizon: int,
                   model: SequenceModel | None = None) -> list[History]:
    """Test-split positions (the paper's protocol), synthetic mixtures (case studies), or
    sequences sampled from the model (datasets whose files are absent)."""
    h = spec.histories
    if h.source == "model":
        return model_histories(model, h.count, horizon, spec.seed, dataset.bos_id,
                               h.min_history, h.sampled_length, h.max_history)
    if h.source == "mixture":
        m = h.mixture

        def ids(key: str, given: tuple) -> list[int]:
            return list(resolve_symbols(f"sweep.mixture.{key}", list(given), dataset.vocab)
                        ) if given else []

        return mixture_histories(len(dataset.vocab), ids("focus", m.focus), list(m.shares),
                                 m.per_share, m.length, spec.seed, ids("exclude", m.exclude),
                                 dataset.bos_id)
    return sample_histories(dataset.test, h.count, horizon, spec.seed, h.min_history,
                            h.max_history, keep_first=dataset.bos_id is not None)


def make_specs(spec: SweepSpec, dataset: SequenceDataset,
               model: SequenceModel | None = None) -> list[QuerySpec]:
    """This shard's queries; the query's symbols are checked against the vocabulary here."""
    histories = shard(make_histories(spec, dataset, spec.histories.future, model), spec.shard,
                      spec.shards)
    return build_specs(histories, spec.horizons, spec.query, dataset.vocab)


def _symbol_kl(spec: SweepSpec, model: SequenceModel | None, dataset: SequenceDataset | None,
               run_dir: Path) -> Path:
    """Tables 3–6: the KL of the next symbol's distribution over this shard's histories."""
    model = model if model is not None else load_sweep_model(spec, dataset)
    dataset = dataset if dataset is not None else sampled_dataset(spec.dataset.name, model)
    histories = shard(make_histories(spec, dataset, spec.histories.future, model), spec.shard,
                      spec.shards)
    write_provenance(run_dir, spec.config, spec.seed)
    name = model_id(spec, dataset.name)
    with recorded(spec.dir, tag=f"{dataset.name}-{name}-shard{spec.shard}of{spec.shards}",
                  queries=len(histories)) as record:
        try:
            record["histories_computed"] = run_symbol_kl(
                model, histories, spec.symbol_kl, SYMBOL_KL.rows(spec.dir), dataset.name, name,
                spec.seed, spec.progress)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted: the finished histories are saved under "
                              f"{SYMBOL_KL.rows(spec.dir)}; re-run the same command to resume"
                              ) from None
    return spec.dir


def _sentence_end(spec: SweepSpec, model: SequenceModel | None, run_dir: Path) -> Path:
    """Fig. 1: every replicate of both methods on this shard's prefixes."""
    model = model if model is not None else load_sweep_model(spec, None)
    write_provenance(run_dir, spec.config, spec.seed)
    name = model_id(spec, spec.dataset.name)
    with recorded(spec.dir, tag=f"sentence_end-{name}-shard{spec.shard}of{spec.shards}",
                  queries=spec.sentence_end.per_kind * 2) as record:
        try:
            record["prefixes_computed"] = run_sentence_end(
                model, spec.dataset.root, spec.sentence_end, SENTENCE_END.rows(spec.dir),
                spec.seed, spec.shard, spec.shards, spec.progress)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted: the finished prefixes are saved under "
                              f"{SENTENCE_END.rows(spec.dir)}; re-run the same command to "
                              "resume") from None
    return spec.dir


def run(cfg: DictConfig | SweepSpec, model: SequenceModel | None = None,
        dataset: SequenceDataset | None = None, run_dir: str | Path | None = None) -> Path:
    """Run the configured sweep (or finish an interrupted one); return the sweep folder.

    A `DictConfig` is checked and typed here, once (`sweep_spec`); nothing below reads it.
    Ctrl-C raises `Interrupted`, saying how many parts are saved: a re-run resumes from them.
    """
    spec = cfg if isinstance(cfg, SweepSpec) else sweep_spec(cfg)
    run_dir = Path(run_dir) if run_dir else spec.dir / "logs"
    if spec.job is SENTENCE_END:  # its prefixes come from the raw WikiText articles
        return _sentence_end(spec, model, run_dir)
    dataset = dataset if dataset is not None else load_data(spec)
    if spec.job is SYMBOL_KL:
        return _symbol_kl(spec, model, dataset, run_dir)
    if spec.histories.source == "model" or dataset is None:  # the model names the symbols
        model = model if model is not None else load_sweep_model(spec, dataset)
        dataset = dataset if dataset is not None else sampled_dataset(spec.dataset.name, model)
        specs = make_specs(spec, dataset, model)
    else:  # symbols are checked before the (possibly slow) model load
        specs = make_specs(spec, dataset)
        model = model if model is not None else load_sweep_model(spec, dataset)
    model_name = model_id(spec, dataset.name)
    sweep_dir = spec.dir
    write_provenance(run_dir, spec.config, spec.seed)
    results = PartStore(QUERIES.rows(sweep_dir), KEY)
    gt_options = dict(spec.ground_truth.options)
    tag = f"{dataset.name}-{model_name}-shard{spec.shard}of{spec.shards}"
    runs = with_surrogates(spec.runs, dataset, model, spec.seed, model_name)
    runners = []
    for temperature in spec.temperatures:
        tempered = model if temperature == 1 else TemperatureModel(model, temperature)
        judge = JudgeSurrogate(model, dataset.vocab, dataset.bos_id, spec.seed, model_name,
                               temperature)
        truth = (GroundTruthStore(str(sweep_dir / "ground_truth"), dataset.name, model_name,
                                  temperature, gt_options, spec.seed, judge)
                 if spec.ground_truth.enabled else NoGroundTruth())
        plan = SweepPlan(
            dataset=dataset.name, model=model_name, synthetic=bool(dataset.synthetic),
            histories=(f"sampled from {model_name}" if spec.histories.source == "model"
                       else spec.histories.source),
            vocab_size=len(dataset.vocab),
            temperature=float(temperature), runs=runs,
            levels=list(spec.levels), seed=int(spec.seed),
            chunk_size=int(spec.chunk_size), tag=f"{tag}-T{temperature}",
            repeats=int(spec.repeats),
        )
        runners.append(SweepRunner(tempered, plan, results, truth, progress=spec.progress))
    with recorded(sweep_dir, tag=tag, queries=len(specs),
                  parts_total=sum(r.part_count(specs) for r in runners)) as record:
        try:
            for runner in runners:
                written = runner.run(specs)
                log.info("%s T=%s: %d new rows in %s", tag, runner.plan.temperature, written,
                         results.root)
                if spec.refine_truth:
                    refined = refine_truths(runner, specs, spec.refine_truth)
                    record["ground_truths_refined"] = refined + record.get(
                        "ground_truths_refined", 0)
                    log.info("%s T=%s: %d ground truths refined", tag, runner.plan.temperature,
                             refined)
        except KeyboardInterrupt:
            saved = sum(r.saved_parts for r in runners)
            raise Interrupted(f"interrupted: {saved} of {record['parts_total']} parts saved "
                              f"under {results.root}; re-run the same command to resume") from None
        finally:
            record.update(parts_saved=sum(r.saved_parts for r in runners),
                          ground_truths_computed=sum(r.truth.computed for r in runners))
    return sweep_dir

