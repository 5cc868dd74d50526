"""(a) Estimator throughput against the raw model, measured interleaved in the same run.

Throughput is model calls per second (one call = one prefix row evaluated). For each model and
each method of `seqq.estimators.METHODS`, one warm-up run through a `StepRecorder` learns how the
method batches its work (the rows of each model step, in order); the raw model is then timed on
exactly that work: the same chained steps of the same sizes, the model alone. The ratio is then
the share of the method's time that the model gets, and a small step (a trie's first level,
where many samples share a few prefixes) is charged to the model at its real per-row cost. Raw
and method runs alternate (raw, method, raw, method, …), so both see the same machine load; the
ratio of each pair is taken and the median over repeats reported. Two paths: one query at a
time (`estimate`) and many (history, query) pairs in one `estimate_many` call. Each repeat runs
both paths, one after the other, so `many/one` compares runs seconds apart, not two blocks of
repeats minutes apart (a load that changes between blocks once read as a slower path).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch

import seqq
from benchmarks.plans import Plan
from benchmarks.report import Section, describe, fmt_rate, fmt_ratio, table
from benchmarks.timing import StepRecorder, median, model_device, raw_steps, timed
from benchmarks.zoo import BenchModel, build
from seqq import queries as Q
from seqq.estimators import METHODS, Guarantee
from seqq.estimators.surrogates import distill_surrogate
from seqq.models import MarkovModel
from seqq.models.batching import chunk_rows, measure_chunk_rows

HISTORY_LENGTH = 20
SURROGATE_SYMBOLS = 1_000_000  # model samples the twist's surrogate is distilled from (the
# default is 4M; a quarter keeps the quick suite quick)
EXACT_MAX_CALLS = 20_000  # exact enumeration runs at the longest horizon that stays this cheap


def method_options(method: str, model: BenchModel, samples: int) -> dict:
    """Options for `method` at a comparable size: `samples` samples, particles or beam width
    per product, passed by name when the method takes them; plus a method's extra needs."""
    shared = {"samples": samples, "particles": samples, "beam_width": samples,
              "max_width": samples, "tail_samples": samples, "top": samples // 2,
              "sampled": samples - samples // 2, "alpha": 0.9}
    accepted = METHODS[method].option_names()
    options = {name: value for name, value in shared.items() if name in accepted}
    options.update(EXTRA_OPTIONS.get(method, lambda m: {})(model))
    return options


def _twisted_surrogate(model: BenchModel) -> dict:
    """The twist's surrogate as a user would make one: an HPYP distilled from the model
    (`distill_surrogate`, its order picked for the vocabulary). A transformer LM's
    vocabulary is too large for an n-gram table, so it gets the one-state surrogate (`twisted`
    then is importance sampling by rollouts), as `fit_surrogate` itself does for GPT-2's."""
    V = model.model.vocab_size
    if model.large_vocab:
        return {"surrogate": MarkovModel.iid(torch.ones(V))}
    vocab = getattr(model.model, "vocab", None) or [str(v) for v in range(V)]
    return {"surrogate": distill_surrogate(model.model, vocab, bos=0, symbols=SURROGATE_SYMBOLS)}


def surrogate_note(bench: BenchModel, options: dict) -> str:
    surrogate = options.get("surrogate")
    if surrogate is None:
        return ""
    kind = type(surrogate).__name__
    order = getattr(surrogate, "order", None)
    return f"surrogate: {kind} of order {order}, {surrogate.num_contexts:,} contexts"


EXTRA_OPTIONS: dict[str, Callable[[BenchModel], dict]] = {"twisted": _twisted_surrogate}


def exact_horizon(V: int, K: int) -> int:
    """The longest horizon ≤ K whose hitting-time tree costs at most EXACT_MAX_CALLS (0: none)."""
    best = 0
    for k in range(2, K + 1):
        if sum((V - 1) ** j for j in range(k)) <= EXACT_MAX_CALLS:
            best = k
    return best


@dataclass
class Row:
    model: str
    method: str
    path: str
    rows_per_step: float
    raw_rate: float
    method_rate: float
    ratio: float
    many_over_one: float | None = None
    note: str = ""


def random_histories(V: int, count: int) -> list[list[int]]:
    generator = torch.Generator().manual_seed(1)
    return torch.randint(V, (count, HISTORY_LENGTH), generator=generator).tolist()


def _measure(bench: BenchModel, method: str, paths: list[list[list[int]]], query: Q.Query,
             options: dict, repeats: int) -> tuple[list[Row], float]:
    """Interleaved raw/method timings of each path (its histories, one estimate_many call),
    every path in every repeat: returns a row per path and the median over repeats of the
    last path's rate over the first's, from runs seconds apart under the same load."""
    model = bench.model
    device = model_device(model)
    recorded = []
    for histories in paths:
        recorder = StepRecorder(model)
        seqq.estimate_many(recorder, histories, query, method, seed=0, **options)
        recorded.append(recorder)
    raw_rates, rates = [[] for _ in paths], [[] for _ in paths]
    for repeat in range(repeats):
        for path, (histories, recorder) in enumerate(zip(paths, recorded, strict=True)):
            raw_s, raw_calls = raw_steps(model, histories[0], recorder.sizes, seed=repeat)
            seconds, estimates = timed(device, lambda h=histories, r=repeat: seqq.estimate_many(
                model, h, query, method, seed=r + 1, **options))
            raw_rates[path].append(raw_calls / raw_s)
            rates[path].append(sum(e.model_calls for e in estimates) / seconds)
    rows = [Row(bench.name, method,
                "one query" if len(histories) == 1 else f"{len(histories)} pairs",
                recorder.rows / max(recorder.steps, 1), median(raw), median(rate),
                median([r / w for r, w in zip(rate, raw, strict=True)]))
            for histories, recorder, raw, rate in zip(paths, recorded, raw_rates, rates,
                                                      strict=True)]
    return rows, median([last / first for first, last in zip(rates[0], rates[-1], strict=True)])


def measure_model(bench: BenchModel, plan: Plan) -> list[Row]:
    V = bench.model.vocab_size
    samples = plan.lm_samples if bench.large_vocab else plan.samples
    histories = random_histories(V, plan.lm_histories if bench.large_vocab else plan.histories)
    rows = []
    for method in METHODS:
        enumerates = METHODS[method].guarantee is Guarantee.EXACT
        K = exact_horizon(V, plan.K) if enumerates else plan.K
        if K < 1:
            rows.append(Row(bench.name, method, "-", math.nan, math.nan, math.nan, math.nan,
                            note=f"skipped: no horizon ≥ 2 has ≤ {EXACT_MAX_CALLS:,} paths"))
            continue
        query = Q.hitting_time(1, K)
        print(f"  {bench.name}: {method}", file=sys.stderr, flush=True)
        try:
            options = method_options(method, bench, samples)
            (one, many), many_over_one = _measure(bench, method, [histories[:1], histories],
                                                  query, options, plan.repeats)
        except Exception as error:  # a method that cannot run here is reported, not fatal
            rows.append(Row(bench.name, method, "-", math.nan, math.nan, math.nan, math.nan,
                            note=f"failed: {type(error).__name__}: {str(error)[:100]}"))
            continue
        many.many_over_one = many_over_one
        notes = [f"K = {K}" if K != plan.K else "", surrogate_note(bench, options)]
        one.note = many.note = "; ".join(n for n in notes if n)
        rows += [one, many]
    return rows


def run(plan: Plan, device: str | None) -> Section:
    body = [describe(__doc__), "",
            f"Queries: hitting time p(τ(1) = K), K = {plan.K}, random histories of "
            f"{HISTORY_LENGTH} symbols; {plan.samples} samples / particles / beam width per "
            f"query for LSTMs, {plan.lm_samples} for transformer LMs; median of "
            f"{plan.repeats} interleaved repeats. `rows/step`: the mean batch the method stepped "
            "(the raw model is timed on the same sequence of steps); `many/one`: the estimate_many path's "
            "throughput over the one-query path's, per repeat. Issue 9's targets: sampling "
            "estimators ≥ 0.9× raw at ≥ 1 000 samples, beam ≥ 0.7×, many/one ≥ 1.0×.", ""]
    results: list[Row] = []
    for name in plan.models:
        bench = build(name, device)
        if bench.model is None:
            body.append(f"- **{bench.name}**: {bench.note}")
            continue
        measured = measure_chunk_rows(bench.model, plan.chunk_sizes)
        best = max(measured.throughput, key=measured.throughput.get)
        body.append(f"- **{bench.name}** ({bench.note}): raw peak "
                    f"{fmt_rate(measured.throughput[best])} calls/s at {best} rows; the "
                    f"estimators step it in chunks of {chunk_rows(bench.model):,} rows "
                    "(`chunk_rows`, this device's default)")
        results += measure_model(bench, plan)
    body += ["", *table(
        ["model", "method", "path", "rows/step", "raw calls/s", "method calls/s", "method/raw",
         "many/one", "note"],
        [[r.model, r.method, r.path, "-" if math.isnan(r.rows_per_step) else f"{r.rows_per_step:,.0f}",
          fmt_rate(r.raw_rate), fmt_rate(r.method_rate), fmt_ratio(r.ratio),
          fmt_ratio(r.many_over_one), r.note] for r in results])]
    return Section("a", "Estimator throughput vs the raw model", body)
