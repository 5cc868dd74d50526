"""(d) What ground truth costs under each rule of `seqq.ground_truth_many` (enumeration switched
off), on Fig. 3's queries p(τ(a) = K), a the observed K-th next symbol: the paper's App. F.3
rule (`absolute`: adaptive importance sampling, 10k–100k samples, δ = 1e-7), untwisted WOR
(`relative`) and twisted WOR (`twisted`, docs/decisions.md §43), the last two until a 1 %
relative standard error. Model calls and seconds per truth by K, side by side on the same
histories, and what exact enumeration would cost instead."""

from __future__ import annotations

import statistics
import time

import torch

import seqq
from benchmarks.plans import Plan
from benchmarks.report import Section, describe, table
from benchmarks.timing import model_device, timed
from benchmarks.zoo import build
from seqq import queries as Q
from seqq.errors import DataError
from seqq.estimators.engine.batch import prepare, tree_calls
from seqq.estimators.surrogates import model_surrogate
from seqq.models.protocol import SequenceModel
from seqq.paths import shipped
from seqq.sweeps.histories import model_histories, sample_histories

REL_TOL = 0.01
RULES = ("absolute", "relative", "twisted")
AUTHORS_VOCAB_FILE = str(shipped("models/authors/shakespeare_vocab.json"))
MAX_HISTORY = 200  # as the sweeps keep it (seqq/conf/sweep.yaml)


def _histories(name: str, model: SequenceModel, count: int, horizon: int
               ) -> tuple[list[list[int]], list[list[int]], str]:
    """(histories, observed futures, where they come from): as Fig. 3's sweeps take them —
    Shakespeare's test split, histories sampled from the MOOCs model (its raw files are not
    shipped) — else random ones."""
    V = model.vocab_size
    if name == "authors-moocs":
        bos = list(model.vocab).index("<BOS>")
        picked = model_histories(model, count, horizon, seed=0, bos=bos, max_history=MAX_HISTORY)
        return ([list(h.tokens) for h in picked], [list(h.future) for h in picked],
                "histories sampled from the model")
    if name == "authors-shakespeare":
        from seqq.data import load_dataset

        try:
            dataset = load_dataset("shakespeare", vocab=AUTHORS_VOCAB_FILE)
        except (DataError, OSError) as error:
            reason = f"random histories (Shakespeare not loadable: {str(error)[:80]})"
        else:
            picked = sample_histories(dataset.test, count, horizon, seed=0,
                                      max_history=MAX_HISTORY)
            return ([list(h.tokens) for h in picked], [list(h.future) for h in picked],
                    "Shakespeare test-split histories")
    else:
        reason = "random histories"
    generator = torch.Generator().manual_seed(3)
    tokens = torch.randint(V, (count, 20 + horizon), generator=generator).tolist()
    return [t[:20] for t in tokens], [t[20:] for t in tokens], reason


def _model_section(name: str, plan: Plan, device: str | None) -> list[str]:
    bench = build(name, device)
    if bench.model is None:
        return [f"### {name}", "", f"{bench.note}", ""]
    model = bench.model
    histories, futures, source = _histories(name, model, plan.gt_histories, max(plan.gt_ks))
    started = time.perf_counter()
    surrogate = model_surrogate(model, histories)  # once per model, as a sweep pays it
    distill_s = time.perf_counter() - started
    distill_calls = 0 if surrogate is None else surrogate.info.get("model_calls", 0)
    rows = []
    for K in plan.gt_ks:
        queries = [Q.hitting_time(f[K - 1], K) for f in futures]
        enumeration = tree_calls(prepare(model, histories, queries, 0)).float().mean().item()
        row = [K, f"{enumeration:,.0f}"]
        calls = {}
        for rule in RULES:
            seconds, truths = timed(model_device(model), lambda q=queries, r=rule:
                                    seqq.ground_truth_many(
                                        model, histories, q, seed=0, rule=r, rel_tol=REL_TOL,
                                        exact_max_calls=0, progress=False,
                                        **({"surrogate": surrogate} if r == "twisted" else {})))
            calls[rule] = statistics.median(t.model_calls for t in truths)
            row += [f"{calls[rule]:,.0f}", f"{statistics.median(t.rel_stderr for t in truths):.2%}",
                    f"{seconds / len(truths):.3g}"]
        row.append(f"{calls['absolute'] / calls['twisted']:.1f}×")
        rows.append(row)
    header = ["K", "enumeration calls"]
    for rule in RULES:
        header += [f"{rule}: calls", f"{rule}: rel. SE", f"{rule}: s"]
    return [f"### {name}", "",
            f"{bench.note}; {plan.gt_histories} {source}, answered together in one "
            "`ground_truth_many` call per K and rule; calls and relative SE are medians per "
            f"truth, seconds are per truth (total / N). The twisted rule's surrogate, distilled "
            f"once per model, cost {distill_calls:,} calls and {distill_s:.0f} s (not in the "
            "rows).", "",
            *table([*header, "calls absolute / twisted"], rows), ""]


def run(plan: Plan, device: str | None) -> Section:
    body = [describe(__doc__), ""]
    for name in plan.gt_models:
        body += _model_section(name, plan, device)
    return Section("d", "Ground-truth cost by rule", body)
