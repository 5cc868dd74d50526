"""Judging a committed experiment again: finer ground truth for the queries of a results CSV,
without running its estimators again (Table 2's truths, docs/decisions.md §6).

    python -m seqq.sweeps.rejudge CSV OVERRIDES... [--merge]

OVERRIDES are the sweep's own (`preset=large_lm size=paper model=smollm2`), the new
judge's (`ground_truth.rel_tol=0.025 ground_truth.s_high=100000`) and the shard
(`sweep.shard=0 sweep.shards=2`). Queries whose truth the CSV holds above the new tolerance go
first, each group cheapest first, the horizons in turn (`cheapest_first`); each truth is stored
as soon as it is computed in the sweep's ground-truth store (keyed by its options), so a killed
run loses at most the query in flight and a re-run resumes; shards run side by side. `--merge`
then rewrites the CSV's truth columns and RAEs from every truth found under the new options
(the rest keep the old judge's, named in the `truth_rule` column), atomically.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from hydra import compose, initialize_config_dir
from tqdm.auto import tqdm

from seqq.paths import CONF
from seqq.sweeps.query_specs import QuerySpec
from seqq.sweeps.run_log import recorded
from seqq.sweeps.runner import rae
from seqq.sweeps.specs import SweepSpec
from seqq.sweeps.sweep import load_data, load_sweep_model, make_specs, model_id, sweep_spec
from seqq.sweeps.sweep_config import check_renamed
from seqq.sweeps.truth_store import GroundTruthStore, describe_rule

USAGE = "usage: python -m seqq.sweeps.rejudge CSV OVERRIDES... [--merge]"
OLD_RULE = ("the CSV's own truths (a CSV without a `truth_rule` column: the judge its "
            "experiment's section names)")  # rows no new truth has replaced yet


def _spec(overrides: Sequence[str]) -> SweepSpec:
    check_renamed(overrides)
    with initialize_config_dir(str(CONF), version_base=None):
        return sweep_spec(compose("sweep", overrides=list(overrides)))


def _store(spec: SweepSpec, dataset: str, model: str) -> GroundTruthStore:
    return GroundTruthStore(str(spec.dir / "ground_truth"), dataset, model, 1.0,
                            dict(spec.ground_truth.options), spec.seed)


def _judged(specs: list[QuerySpec], table: pd.DataFrame) -> list[QuerySpec]:
    """The specs whose (history, K) the CSV holds, history by history."""
    wanted = set(zip(table.history_id, table.K, strict=True))
    return [s for s in specs if (s.history.history_id, s.K) in wanted]


def cheapest_first(specs: list[QuerySpec], table: pd.DataFrame, rel_tol: float
                   ) -> list[QuerySpec]:
    """The specs in the order that brings most truths under `rel_tol` soonest: first those the
    CSV holds above it, then the rest; within each, by expected cost, the horizons in turn (a
    run stopped early has judged as many truths of each K as it could). A truth's cost to a
    relative SE goes as its weights' squared coefficient of variation (the old truth's
    relative SE², its samples being alike) times the K − 1 prefixes of a path."""
    old = table.drop_duplicates(["history_id", "K"]).set_index(["history_id", "K"])
    rel = {key: float(old.truth_rel_stderr.get(key, 0.0)) for key in old.index}
    cost = {key: (key[1] - 1) * r**2 for key, r in rel.items()}
    key_of = {id(s): (s.history.history_id, s.K) for s in specs}
    keyed = sorted(specs, key=lambda s: cost.get(key_of[id(s)], 0.0))
    rank: dict[tuple[bool, int], int] = {}
    order = []
    for s in keyed:
        done = not rel.get(key_of[id(s)], math.inf) > rel_tol
        rank[(done, s.K)] = rank.get((done, s.K), -1) + 1
        order.append(((done, rank[(done, s.K)], s.K), s))
    return [s for _, s in sorted(order, key=lambda t: t[0])]


def compute(csv: Path, overrides: Sequence[str]) -> int:
    """This shard's truths, one query at a time; returns how many were computed."""
    spec = _spec(overrides)
    data = load_data(spec)
    table = pd.read_csv(csv)
    specs = cheapest_first(_judged(make_specs(spec, data), table), table,
                           float(spec.ground_truth.options.get("rel_tol", 0.01)))
    model = load_sweep_model(spec, data)
    store = _store(spec, data.name, model_id(spec, data.name))
    with recorded(spec.dir, tag=f"rejudge-shard{spec.shard}of{spec.shards}",
                  queries=len(specs), rule=store.rule) as record:
        for query in tqdm(specs, desc="truths", unit="query", disable=not spec.progress):
            store.get(model, [query])
            record["truths_computed"] = store.computed
    return store.computed


def merge(csv: Path, overrides: Sequence[str]) -> int:
    """Rewrite the CSV's truths and RAEs from the stored ones; returns the rows changed."""
    spec = _spec([*overrides, "sweep.shards=1", "sweep.shard=0"])
    data = load_data(spec)
    table = pd.read_csv(csv)
    store = _store(spec, data.name, model_id(spec, data.name))
    known = store.stored()
    if "truth_rule" not in table:
        table["truth_rule"] = OLD_RULE
    changed = 0
    for query in _judged(make_specs(spec, data), table):
        truth = known.get((query.history.digest, query.label))
        if truth is None:
            continue
        rows = (table.history_id == query.history.history_id) & (table.K == query.K)
        table.loc[rows, ["truth", "truth_kind", "truth_rel_stderr", "entropy", "truth_rule"]] = (
            truth.value, truth.kind, truth.rel_stderr, truth.entropy, describe_rule(store.options))
        table.loc[rows, "rae"] = [rae(math.log(e) if e > 0 else -math.inf, truth.log_value)
                                  for e in table.loc[rows, "estimate"]]
        changed += int(rows.sum())
    partial = csv.with_suffix(".csv.partial")
    table.to_csv(partial, index=False, float_format="%.6g")
    partial.replace(csv)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    from seqq.process import tune_process
    from seqq.threads import configure_threads

    tune_process()
    configure_threads()
    args = list(sys.argv[1:] if argv is None else argv)
    do_merge = "--merge" in args
    args = [a for a in args if a != "--merge"]
    if not args or not Path(args[0]).is_file():
        print(f"{USAGE}\nno results CSV at {args[0] if args else '(none given)'}",
              file=sys.stderr)
        return 2
    csv, overrides = Path(args[0]), args[1:]
    if do_merge:
        print(f"{merge(csv, overrides)} rows of {csv} judged by the new truths")
        return 0
    try:
        print(f"{compute(csv, overrides)} truths computed")
    except KeyboardInterrupt:
        print("interrupted: every truth finished is stored; re-run the same command to resume",
              file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
