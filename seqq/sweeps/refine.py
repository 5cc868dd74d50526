"""Ground truth fit for what it judges (docs/decisions.md §40).

An estimated ground truth with relative standard error σ judges a perfect estimator to have a
median RAE of about 0.67·σ, so a truth as noisy as the errors it judges cannot rank methods.
After a sweep's estimates, `refine_truths` finds, per temperature and K, the smallest median RAE
among the methods (rows whose truth is estimated), and computes again every estimated truth
whose relative SE exceeds `fraction` (default one fifth) of it: twisted sampling without
replacement (the `twisted` rule, steered by a surrogate distilled from the model, docs/decisions.md
§43) until the relative SE is below that tolerance (exact if its draws exhaust the query), at most
`CALLS_FACTOR` times the configured sample cap. The rows it judges get the new truth and RAE,
each result part rewritten atomically; the new truths are stored under their own options, so an
interrupted refinement recomputes nothing. A truth is refined once: the tolerance comes from the
errors as the configured rule judged them (judged again by the finer truths, the best method's
errors would shrink with the truths' noise, and each pass would ask for more).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from seqq.estimators.estimate import GroundTruth
from seqq.estimators.ground_truth import ground_truth_many
from seqq.estimators.surrogates import twistable
from seqq.results.store import part_files
from seqq.sweeps.query_specs import QuerySpec
from seqq.sweeps.runner import SweepRunner, rae
from seqq.sweeps.truth_store import GroundTruthStore

CALLS_FACTOR = 16  # a refined truth may sample up to this many times the configured s_high


def tolerance(fraction: float, smallest_median_rae: float) -> float | None:
    """`fraction` × the smallest median RAE, rounded down to a power of two (a few more rows
    rarely move it, so cached refinements stay valid); None when there is nothing to judge."""
    target = fraction * smallest_median_rae
    if not target > 0 or not math.isfinite(target):
        return None
    return 2.0 ** math.floor(math.log2(target))


def tolerances(rows: pd.DataFrame, fraction: float) -> dict[int, float]:
    """Per K: the tolerance the estimated truths of `rows` (one temperature) must meet."""
    judged = rows[(rows.truth_kind == "estimated") & np.isfinite(rows.rae)]
    if judged.empty:
        return {}
    smallest = judged.groupby(["K", "method"]).rae.median().groupby("K").min()
    out = {int(k): tolerance(fraction, float(m)) for k, m in smallest.items()}
    return {k: t for k, t in out.items() if t is not None}


def refine_truths(runner: SweepRunner, specs: Sequence[QuerySpec], fraction: float) -> int:
    """Recompute the estimated truths of `runner`'s rows that are too noisy for the errors they
    judge; rewrite the rows; return how many truths were refined."""
    truth = runner.truth
    if not isinstance(truth, GroundTruthStore):
        return 0
    mine = _rows_of(runner)
    if mine.empty:
        return 0
    mine = mine[mine.truth_rule == truth.rule]  # judged by the configured rule: not yet refined
    current = dict(zip(zip(mine.history_hash, mine.label, strict=True),
                       zip(mine.truth_kind, mine.truth_rel_stderr, strict=True), strict=True))
    refined: dict[tuple[str, str], tuple[GroundTruth, str]] = {}
    default = inspect.signature(ground_truth_many).parameters["s_high"].default
    s_high = int(truth.options.get("s_high", default)) * CALLS_FACTOR
    rule = "twisted" if twistable(runner.model.vocab_size) else "sampled"
    for K, target in sorted(tolerances(mine, fraction).items()):
        noisy = [s for s in _distinct(specs) if s.K == K
                 and current.get(_key(s), ("exact", 0.0))[0] == "estimated"
                 and not current[_key(s)][1] <= target]
        if not noisy:
            continue
        finer = truth.refined({"rule": rule, "rel_tol": target, "s_high": s_high})
        for spec, new in zip(noisy, finer.get(runner.model, noisy), strict=True):
            if new.kind == "exact" or new.rel_stderr < current[_key(spec)][1]:
                refined[_key(spec)] = (new, finer.rule)
    if refined:
        _rewrite(runner, refined)
    return len(refined)


def _key(spec: QuerySpec) -> tuple[str, str]:
    return (spec.history.digest, spec.label)


def _distinct(specs: Sequence[QuerySpec]) -> list[QuerySpec]:
    return list({_key(s): s for s in specs}.values())


def _rows_of(runner: SweepRunner) -> pd.DataFrame:
    table = runner.results.read()
    if table.empty:
        return table
    context = pd.Series(runner.context)
    return table[(table[list(context.index)] == context).all(axis=1)]


def _rewrite(runner: SweepRunner, refined: dict[tuple[str, str], tuple[GroundTruth, str]]
             ) -> None:
    """Every result part holding a row judged by a refined truth, rewritten with the new truth
    and RAE (each part replaced atomically: an interruption leaves old or new parts, and the
    re-run refines the rest from the cache)."""
    context = pd.Series(runner.context)
    for path in part_files(runner.results.root):
        frame = pd.read_parquet(path)
        if frame.empty or not set(context.index) <= set(frame.columns):
            continue
        ours = (frame[list(context.index)] == context).all(axis=1)
        keys = pd.Series(list(zip(frame.history_hash, frame.label, strict=True)))
        hit = (ours & keys.isin(refined.keys())).to_numpy()
        if not hit.any():
            continue
        truths = [refined[k][0] for k in keys[hit]]
        columns = {"truth": [t.value for t in truths], "truth_log": [t.log_value for t in truths],
                   "truth_kind": [t.kind for t in truths],
                   "truth_samples": [t.samples for t in truths],
                   "truth_rel_stderr": [t.rel_stderr for t in truths],
                   "truth_rule": [refined[k][1] for k in keys[hit]],
                   "rae": [rae(float(e), t.log_value)
                           for e, t in zip(frame.log_estimate[hit], truths, strict=True)]}
        for column, values in columns.items():
            frame.loc[hit, column] = values
        runner.results.write(frame, path.stem)
