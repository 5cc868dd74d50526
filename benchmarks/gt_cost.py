"""(d) What ground truth costs: model calls and seconds per query for the surrogate (adaptive
importance sampling, `seqq.ground_truth_many(..., rule="relative", rel_tol=0.01)`, enumeration
switched off) to reach a 1 % relative standard error, on fig3's queries p(τ(a) = K) with a the
observed K-th next symbol. Exact enumeration's cost is listed beside it for comparison."""

from __future__ import annotations

import statistics

import torch

import seqq
from benchmarks.plans import Plan
from benchmarks.report import Section, describe, table
from benchmarks.timing import model_device, timed
from benchmarks.zoo import build
from seqq import queries as Q
from seqq.errors import DataError
from seqq.experiments.histories import sample_histories
from seqq.paths import shipped

REL_TOL = 0.01
AUTHORS_VOCAB_FILE = str(shipped("models/authors/shakespeare_vocab.json"))
MAX_HISTORY = 200  # as the sweeps keep it (seqq/conf/sweep.yaml)


def _histories(name: str, V: int, count: int, horizon: int, from_data: bool
               ) -> tuple[list[list[int]], list[list[int]], str]:
    """(histories, observed futures, where they come from)."""
    if from_data:
        from seqq.data import load_dataset

        options = {"vocab": AUTHORS_VOCAB_FILE} if name == "authors-shakespeare" else {}
        try:
            dataset = load_dataset("shakespeare", **options)
        except (DataError, OSError) as error:
            reason = f"random histories (Shakespeare not loadable: {str(error)[:80]})"
        else:
            if dataset.vocab_size <= V:  # every id exists in the model
                picked = sample_histories(dataset.test, count, horizon, seed=0,
                                          max_history=MAX_HISTORY)
                return ([list(h.tokens) for h in picked], [list(h.future) for h in picked],
                        "Shakespeare test-split histories")
            reason = f"random histories (the dataset has {dataset.vocab_size} symbols, model {V})"
    else:
        reason = "random histories"
    generator = torch.Generator().manual_seed(3)
    tokens = torch.randint(V, (count, 20 + horizon), generator=generator).tolist()
    return [t[:20] for t in tokens], [t[20:] for t in tokens], reason


def run(plan: Plan, device: str | None) -> Section:
    bench = build(plan.gt_model, device)
    if bench.model is None:
        return Section("d", "Ground-truth cost at 1 % relative SE", [
            describe(__doc__), "", f"Model {bench.name}: {bench.note}"])
    V = bench.model.vocab_size
    histories, futures, source = _histories(bench.name, V, plan.gt_histories, max(plan.gt_ks),
                                            plan.gt_from_data)
    rows = []
    for K in plan.gt_ks:
        queries = [Q.hitting_time(f[K - 1], K) for f in futures]
        seconds, truths = timed(model_device(bench.model), lambda q=queries: seqq.ground_truth_many(
            bench.model, histories, q, seed=0, rule="relative", rel_tol=REL_TOL,
            exact_max_calls=0))
        n = len(truths)
        reached = sum(t.rel_stderr <= REL_TOL for t in truths)
        samples = [t.samples for t in truths]
        rows.append([K, f"{sum((V - 1) ** j for j in range(K)):,}",
                     f"{sum(t.model_calls for t in truths) / n:,.0f}", f"{seconds / n:.3g}",
                     f"{statistics.median(samples):,.0f}", f"{max(samples):,}", f"{reached}/{n}"])
    body = [describe(__doc__), "",
            f"Model: {bench.name} ({bench.note}); {plan.gt_histories} {source}, answered "
            "together in one `ground_truth_many` call per K (seconds per query = total / N); "
            "defaults S_low = 10 000, S_step = 1 000, S_high = 100 000.", "",
            *table(["K", "exact enumeration calls", "surrogate calls / query",
                    "seconds / query", "median samples", "max samples",
                    f"reached {REL_TOL:.0%} rel. SE"], rows)]
    return Section("d", "Ground-truth cost at 1 % relative SE", body)
