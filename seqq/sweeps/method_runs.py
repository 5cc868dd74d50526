"""What a sweep's `estimator` group runs: one `MethodRun` per name in `estimator.methods`, a
seqq method with its `estimator.options.<method>`, or a *labelled variant* of one
(`estimator.variants.<label>: {method: smc, surrogate: hpyp, ...}`), so one sweep can run a
method with and without, say, a surrogate side by side. Everything is checked before any data
or model is loaded; the surrogates the config names are fitted once per kind and order
(`with_surrogates`), then shared by every run that names them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from omegaconf import DictConfig, OmegaConf

from seqq.api import check_method
from seqq.data import SequenceDataset
from seqq.errors import ConfigError, QueryError
from seqq.estimators import METHODS
from seqq.estimators.surrogates import distilled, fit_surrogate
from seqq.models import SequenceModel
from seqq.sweeps import config_checks as check

# What `surrogate:` may name in a sweep: an HPYP n-gram of `order` n (null: the largest whose
# table fits) fitted on the training split (`hpyp`, `fit_surrogate`) or on samples of the
# sweep's model (`distilled`, `distill_surrogate`: no data needed, its calls paid once).
SURROGATE_KINDS = ("hpyp", "distilled")
# What a method that cannot run without a surrogate gets unless the config names one.
DEFAULT_SURROGATE = "hpyp"


@dataclass(frozen=True)
class Surrogate:
    """A surrogate the sweep fits before any method runs (on data or on model samples)."""

    kind: str
    order: int | None  # None: the largest order whose table fits (`fit_surrogate`)


@dataclass(frozen=True)
class MethodRun:
    """One estimator of a sweep. `label` names its rows (the `method` column, legends, resume
    keys); `method` is the seqq method that runs, with `options`; `surrogate` is one still to
    be fitted (`with_surrogates` puts the fitted one into `options`)."""

    label: str
    method: str
    options: Mapping[str, Any]
    surrogate: Surrogate | None = None


def method_runs(cfg: DictConfig) -> list[MethodRun]:
    """The runs `estimator.methods` names, in its order. Every variant and option set is
    checked against its method, listed or not (one-line `ConfigError` naming the key and the
    fix)."""
    variants = _mapping(cfg, "estimator.variants", "labels to variants, e.g. "
                        "estimator.variants.smc_twisted={method:smc,surrogate:hpyp}")
    options = _mapping(cfg, "estimator.options", "methods to their options, e.g. "
                       "estimator.options.hybrid.max_width=1500")
    runs = {label: _variant(label, given) for label, given in variants.items()}
    for method, given in options.items():
        key = f"estimator.options.{method}"
        if method in variants:
            raise ConfigError(f"{key}: {method!r} is a variant; put its options in "
                              f"estimator.variants.{method}")
        _check_method(key, method, " (a new label goes in estimator.variants)")
        runs[method] = _run(key, method, method,
                            _options_mapping(key, given, f"{key}.<option>=<value>"))
    return [runs.get(label) or _run(f"estimator.options.{label}", label, label, {})
            for label in check.names(cfg, "estimator.methods", [*METHODS, *variants])]


def _mapping(cfg: DictConfig, key: str, what: str) -> dict[str, Any]:
    found = None if OmegaConf.select(cfg, key) is None else check.value(cfg, key)
    if found is None:
        return {}
    if not isinstance(found, dict):
        raise ConfigError(f"{key} must map {what}")
    return found


def _options_mapping(key: str, given: Any, example: str) -> dict[str, Any]:
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise ConfigError(f"{key} must be a mapping of options, e.g. {example}")
    return given


def _variant(label: str, given: Any) -> MethodRun:
    key = f"estimator.variants.{label}"
    if label in METHODS:
        raise ConfigError(f"{key}: {label!r} is a method's name; give the variant another "
                          f"label, e.g. {label}_variant")
    settings = dict(_options_mapping(key, given, f"{key}={{method:smc,surrogate:hpyp}}"))
    method = settings.pop("method", None)
    if method is None:
        raise ConfigError(f"{key} names no method; add {key}.method=<one of "
                          f"{', '.join(METHODS)}>")
    _check_method(f"{key}.method", method)
    return _run(key, label, method, settings)


def _check_method(key: str, method: str, hint: str = "") -> None:
    if method not in METHODS:
        raise ConfigError(f"{key}: no method {method!r}; methods are {', '.join(METHODS)}{hint}")


def _run(key: str, label: str, method: str, given: Mapping[str, Any]) -> MethodRun:
    """A run of `method` with the configured options `given` (at `key`): `surrogate: hpyp` and
    its `order` become a `Surrogate` to fit; every other option goes to the method as is."""
    options = dict(given)
    required = METHODS[method].surrogate == "required"
    kind = options.pop("surrogate", None) or (DEFAULT_SURROGATE if required else None)
    order = options.pop("order", None)
    if kind is None and order is not None:
        raise ConfigError(f"{key}.order sets a surrogate's order; add {key}.surrogate=hpyp")
    if kind is not None and kind not in SURROGATE_KINDS:
        raise ConfigError(f"{key}.surrogate must be {' or '.join(SURROGATE_KINDS)} (an HPYP "
                          "n-gram the sweep fits on the training split, or on samples of the "
                          f"model), got {kind!r}")
    if order is not None and (not isinstance(order, int) or isinstance(order, bool)
                              or order < 2):
        raise ConfigError(f"{key}.order must be a whole number >= 2, or null for the largest "
                          f"that fits, got {order!r}")
    surrogate = None if kind is None else Surrogate(kind, order)
    try:  # the surrogate is checked by name here, fitted later
        check_method(method, {**options, **({"surrogate": kind} if surrogate else {})})
    except QueryError as err:
        raise ConfigError(f"{key}: {err}") from None
    return MethodRun(label, method, options, surrogate)


def with_surrogates(runs: Sequence[MethodRun], dataset: SequenceDataset, model: SequenceModel,
                    seed: int = 0, name: str | None = None) -> list[MethodRun]:
    """`runs` with each named surrogate fitted (seconds) and passed as the method's `surrogate`
    option; runs naming the same kind and order share one fit. A distilled surrogate is kept
    in seqq's cache, listed under the model's `name` (`distilled`: a resumed sweep loads it,
    and the twisted ground-truth rule shares it)."""
    fitted: dict[Surrogate, Any] = {}
    done = []
    for run in runs:
        if run.surrogate is None:
            done.append(run)
            continue
        if run.surrogate not in fitted:
            fitted[run.surrogate] = _fit(run.surrogate, dataset, model, seed, name)
        done.append(replace(run, options={**run.options, "surrogate": fitted[run.surrogate]},
                            surrogate=None))
    return done


def _fit(surrogate: Surrogate, dataset: SequenceDataset, model: SequenceModel,
         seed: int, name: str | None = None) -> Any:
    """Fit one named surrogate: `hpyp` on the training split, `distilled` on model samples."""
    if surrogate.kind == "distilled":
        return distilled(model, dataset.vocab, dataset.bos_id, surrogate.order, seed=seed,
                         source=name)
    if not dataset.train:
        raise ConfigError(f"surrogate: hpyp is fitted on {dataset.name}'s training split, which "
                          "is empty here (histories sampled from the model); use "
                          "surrogate: distilled, fitted on the model's own samples")
    return fit_surrogate(dataset.train, dataset.vocab, surrogate.order)
