"""(l) The language-model path's cost on SmolLM2-135M's real weights: rows per second of seqq's
own model step (`HFCausalLM.step` from an `initial_state` of the histories, through the call
counter as the estimators step it), of stock `transformers` decoding of the same model, batch
and histories (a loop of `model(input_ids, cache, use_cache=True)`), and model calls per
second of each estimator and the judge on a hitting-time query — measured, so that the
projections of the paper's language-model runs rest on numbers. Every process runs one torch
thread on the CPU; the work is measured once in one process, then split in two shards run as
two processes at the same time (each half the rows or half the histories, both starting every
measurement together at a barrier), whose aggregate is the rows of both over the slower one's
time. The clock is the suite's (`--clock`; with one thread on the CPU, each process's CPU
time: time-slicing by other work on a shared machine does not count, the two shards' contention
for caches and memory bandwidth does). Every timed decode starts from encoded histories:
encoding them is not timed (the estimators' own encoding is, in their calls per second: one
call per history, L tokens of work).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import queue
import statistics
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

import seqq
from benchmarks.plans import LMCost, Plan
from benchmarks.report import CLOCK_NOTES, Section, cpu_model, describe, fmt_rate, fmt_ratio, table
from benchmarks.timing import clock_name
from seqq import queries as Q
from seqq.estimators.ground_truth import ground_truth_many
from seqq.models.counting import CallCounter
from seqq.models.hf import HFCausalLM

TARGET = 0.8  # issue 52: every estimator and the judge at ≥ 0.8× the bare step's rows/s
SHARDS = 2
BARRIER_TIMEOUT = 1800.0  # seconds a shard waits for the other at a barrier before giving up
BUSY_LOAD = 0.5  # a 1-minute load average above this before the run: other work was running
BUSY_CPU_SHARE = 0.9  # a timed part's CPU time below this share of its wall time: it waited
MEMORY_SHARE = 0.7  # stock decoding may take this share of the memory available, all shards
# together (its KV cache holds every row's history: 6 GB at 1,024 rows × 128 tokens); a cell
# needing more is skipped, not left to the kernel's OOM killer and whatever else runs here


class TooBig(Exception):
    """A piece that would take more memory than is available: skipped, with this reason."""


def available_memory() -> float | None:
    """Bytes of memory available to new allocations (Linux's MemAvailable; None elsewhere)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@dataclass(frozen=True)
class Subject:
    """The model under test, token sequences its histories are cut from, and the symbol whose
    hitting time the estimators are asked."""

    model: HFCausalLM
    texts: list[list[int]]
    symbol: int


@dataclass(frozen=True)
class Source:
    """How a shard loads a subject, and what the section says it is (without loading it)."""

    load: Callable[[], Subject]
    about: str


def smollm2() -> Subject:
    """SmolLM2-135M's real weights (offline, from the GGUF in the venv), WikiText-2's test
    articles in its tokenizer, and the hitting time of a full stop."""
    from seqq.data import load_dataset
    from seqq.models.loading import load_smollm2

    model = load_smollm2(device="cpu")
    texts = load_dataset("wikitext", tokenizer="smollm2").test
    return Subject(model, texts, model.tokenizer.convert_tokens_to_ids("."))


def micro() -> Subject:
    """A one-layer random GPT-2 (V = 40) and random texts: the section's code in seconds."""
    from benchmarks.zoo import build

    model = build("gpt2-micro", "cpu").model
    texts = torch.randint(model.vocab_size, (4, 512), generator=torch.Generator().manual_seed(0))
    return Subject(model, texts.tolist(), 1)


SUBJECTS = {
    "smollm2": Source(smollm2, "SmolLM2-135M (its GGUF weights de-quantised to float32, "
                               "V = 49,152); histories cut from WikiText-2's test articles "
                               "(shipped with seqq) in its tokenizer; query: the hitting time of "
                               "`.`"),
    "gpt2-micro": Source(micro, "a random one-layer GPT-2 (V = 40); random texts; query: the "
                                "hitting time of token 1"),
}


def windows(texts: Sequence[Sequence[int]], count: int, length: int) -> list[list[int]]:
    """`count` histories of exactly `length` tokens, spread evenly over the texts joined end to
    end (so they come from different articles, and every row of a batch has one length)."""
    joined = [token for text in texts for token in text]
    if len(joined) < count * length:
        raise ValueError(f"{len(joined)} tokens hold no {count} histories of {length}")
    starts = torch.linspace(0, len(joined) - length, count).long().tolist()
    return [joined[start:start + length] for start in starts]


@dataclass(frozen=True)
class Work:
    """What an estimator row answers: these histories, one query, `calls` model calls each."""

    model: HFCausalLM
    histories: list[list[int]]
    query: Q.Query
    calls: int


@dataclass(frozen=True)
class Mode:
    """An estimator row: its name, and how it answers the work (the model calls each answer
    spent, as its estimates report them)."""

    name: str
    answer: Callable[[Work], list[int]]


def estimator(method: str, **options) -> Callable[[Work], list[int]]:
    def answer(work: Work) -> list[int]:
        estimates = seqq.estimate_many(work.model, work.histories, work.query, method,
                                       budget=work.calls, seed=0, **options)
        return [e.model_calls for e in estimates]
    return answer


def every_horizon(method: str) -> Callable[[Work], list[int]]:
    """`method` asked τ(A) = k for every k ≤ K of the work's hitting time: one pass per history
    (`seqq.estimators.horizons`), its calls counted once."""
    def answer(work: Work) -> list[int]:
        ks = range(1, work.query.horizon + 1)
        queries = [Q.hitting_time(work.query.first_passage, k) for k in ks]
        estimates = seqq.estimate_many(work.model, [h for h in work.histories for _ in ks],
                                       queries * len(work.histories), method,
                                       budget=work.calls, seed=0)
        return [e.model_calls for e in estimates[::len(ks)]]
    return answer


def judge(rule: str) -> Callable[[Work], list[int]]:
    """The judge under `rule`, capped near the work's calls: at most s_high paths of K − 1 new
    prefixes (the absolute rule starts at half of them), never enumerating."""
    def answer(work: Work) -> list[int]:
        s_high = max(2, work.calls // max(1, work.query.horizon - 1))
        truths = ground_truth_many(work.model, work.histories, work.query, seed=0, rule=rule,
                                   exact_max_calls=0, s_low=s_high // 2,
                                   s_step=max(1, s_high // 8), s_high=s_high, progress=False)
        return [t.model_calls for t in truths]
    return answer


# The rows of the estimator table, in order: a new mode is one line more here.
MODES: tuple[Mode, ...] = (
    Mode("importance", estimator("importance")),
    Mode("naive", estimator("naive")),
    Mode("uniform", estimator("uniform")),
    Mode("beam", estimator("beam")),
    Mode("wor", estimator("wor")),
    Mode("importance, every K in one pass", every_horizon("importance")),
    Mode("naive, every K in one pass", every_horizon("naive")),
    Mode("judge, sampled", judge("sampled")),
    Mode("judge, relative", judge("relative")),
    Mode("judge, absolute", judge("absolute")),
)
BARE, STOCK = "seqq step", "stock decode"


def _timed(work: Callable[[], object]) -> tuple[float, float, object]:
    """(wall seconds, this process's CPU seconds, result) of `work()`."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def _sample(log_probs: Tensor, generator: torch.Generator) -> Tensor:
    """One token per row from its distribution: both decoders pay the same for it."""
    return torch.multinomial(log_probs.exp(), 1, generator=generator)[:, 0]


@torch.inference_mode()
def seqq_steps(model: HFCausalLM, rows: list[list[int]], steps: int,
               shards: int = 1) -> Callable[[], None]:
    """`steps` chained steps of every row from its encoded history (encoded now, untimed);
    its state keeps each history once, so it needs no memory check (`shards` is unused)."""
    counter = CallCounter(model, num_tasks=len(rows))
    log_probs, state = counter.initial_state(rows)  # each distinct history encoded once
    generator = torch.Generator().manual_seed(0)

    @torch.inference_mode()
    def decode() -> None:
        nonlocal log_probs, state
        for _ in range(steps):
            log_probs, state = counter.step(state, _sample(log_probs, generator))

    return decode


@torch.inference_mode()
def stock_steps(model: HFCausalLM, rows: list[list[int]], steps: int,
                shards: int = 1) -> Callable[[], None]:
    """The same with `transformers` alone: its forward pass and its own KV cache, each row
    holding a copy of its history's keys and values, as `generate` would. Raises `TooBig`
    when that cache (in each of `shards` processes) would not fit in the memory available."""
    lm, keyword = model.model, model._cache_argument  # `cache` from transformers 5 on
    distinct = list(dict.fromkeys(map(tuple, rows)))
    owner = torch.tensor([distinct.index(tuple(r)) for r in rows])
    out = lm(input_ids=torch.tensor(distinct), use_cache=True)
    cache = out[keyword]
    per_token = sum(layer.keys.nbytes + layer.values.nbytes
                    for layer in cache.layers) / out.logits.shape[:2].numel()
    needed = shards * per_token * len(rows) * (len(rows[0]) + steps)
    available = available_memory()
    if available is not None and needed > MEMORY_SHARE * available:
        raise TooBig(f"its cache needs {needed / 2**30:.1f} GB ({shards} process(es)), "
                     f"{available / 2**30:.1f} GB was available")
    cache.reorder_cache(owner)
    log_probs = torch.log_softmax(out.logits[owner, -1].float(), -1)
    generator = torch.Generator().manual_seed(0)

    @torch.inference_mode()
    def decode() -> None:
        nonlocal log_probs, cache
        for _ in range(steps):
            tokens = _sample(log_probs, generator)
            out = lm(input_ids=tokens[:, None], use_cache=True, **{keyword: cache})
            cache = out[keyword]
            log_probs = torch.log_softmax(out.logits[:, -1].float(), -1)

    return decode


DECODERS = {BARE: seqq_steps, STOCK: stock_steps}  # name: the timed decode, prepared


@dataclass(frozen=True)
class Timing:
    """One timed piece of one process: `what` (a decoder or a mode) at a cell and repeat."""

    what: str
    batch: int
    length: int
    repeat: int
    rows: int  # rows stepped, or model calls the estimates report
    wall: float  # NaN (both): skipped, `note` says why
    cpu: float
    note: str = ""


def measure(subject: Subject, plan: LMCost, shard: int, shards: int,
            sync: Callable[[], object]) -> list[Timing]:
    """This shard's timings: the grid's cells, then every mode at the plan's cell, each piece
    started after `sync()` (the shards' barrier) so that the shards run it side by side."""
    torch.set_num_threads(1)
    query = Q.hitting_time(subject.symbol, plan.K)
    work = Work(subject.model, windows(subject.texts, plan.histories, plan.cell[1])[shard::shards],
                query, plan.calls)
    _warm_up(subject, plan, work)
    timings = []
    for repeat in range(plan.repeats):
        for batch, length in plan.cells:
            histories = windows(subject.texts, plan.distinct, length)[shard::shards]
            rows = [histories[i % len(histories)] for i in range(batch // shards)]
            for what, prepare in DECODERS.items():
                try:
                    decode = prepare(subject.model, rows, plan.steps, shards)
                except TooBig as reason:
                    sync()  # the other shard skips it too (it sees the same memory)
                    timings.append(Timing(what, batch, length, repeat, 0, math.nan,
                                          math.nan, str(reason)))
                    continue
                sync()
                wall, cpu, _ = _timed(decode)
                del decode  # freed before the next piece allocates its own
                timings.append(Timing(what, batch, length, repeat, len(rows) * plan.steps,
                                      wall, cpu))
        for mode in MODES:
            sync()
            wall, cpu, calls = _timed(lambda m=mode: sum(m.answer(work)))
            timings.append(Timing(mode.name, *plan.cell, repeat, calls, wall, cpu))
    return timings


def _warm_up(subject: Subject, plan: LMCost, work: Work) -> None:
    """Everything once at a small size, untimed: first calls allocate and validate."""
    for prepare in DECODERS.values():
        prepare(subject.model, work.histories * 2, 1)()
    small = Work(work.model, work.histories, work.query, 4 * plan.K)
    for mode in MODES:
        mode.answer(small)


def _shard(name: str, plan: LMCost, shard: int, shards: int, barrier, results) -> None:
    """A shard's process: its timings, or its traceback, onto the results queue."""
    try:
        results.put(measure(SUBJECTS[name].load(), plan, shard, shards, barrier.wait))
    except BaseException:
        barrier.abort()  # the other shard stops waiting for this one
        results.put(traceback.format_exc())


def in_processes(plan: LMCost, shards: int) -> list[Timing]:
    """Every shard's timings, each shard its own process started afresh (spawned: no state of
    this one, and its memory returned when it ends)."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(shards, timeout=BARRIER_TIMEOUT)
    results = context.Queue()
    workers = [context.Process(target=_shard, args=(plan.subject, plan, i, shards, barrier,
                                                    results)) for i in range(shards)]
    for worker in workers:
        worker.start()
    outcomes: list[list[Timing] | str] = []
    try:
        while len(outcomes) < shards:
            try:
                outcomes.append(results.get(timeout=10))
            except queue.Empty:
                died = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
                if died:
                    raise RuntimeError(f"a shard died with exit code {died[0]} (out of "
                                       "memory?)") from None
    finally:
        for worker in workers:
            if worker.is_alive() and len(outcomes) < shards:
                worker.terminate()
            worker.join()
    failed = [o for o in outcomes if isinstance(o, str)]
    if failed:
        raise RuntimeError(f"a shard failed:\n{failed[0]}")
    return [t for o in outcomes for t in o]


@dataclass(frozen=True)
class Rates:
    """Per (what, batch, length): rows (or calls) per second of all shards together on a
    clock (`wall` or `cpu`), one per repeat; and the share of the timed wall time the
    processes had a core."""

    per_repeat: dict[tuple[str, int, int], list[float]]
    cpu_share: float
    notes: list[str]  # pieces skipped, and why

    @classmethod
    def of(cls, timings: Sequence[Timing], clock: str) -> Rates:
        pieces: dict[tuple[str, int, int, int], list[Timing]] = {}
        for t in timings:
            pieces.setdefault((t.what, t.batch, t.length, t.repeat), []).append(t)
        per_repeat: dict[tuple[str, int, int], list[float]] = {}
        for (what, batch, length, _), shard_timings in sorted(pieces.items()):
            rows = sum(t.rows for t in shard_timings)
            per_repeat.setdefault((what, batch, length), []).append(
                rows / max(getattr(t, clock) for t in shard_timings))
        timed = [t for t in timings if not math.isnan(t.wall)]
        share = sum(t.cpu for t in timed) / sum(t.wall for t in timed)
        notes = {f"{t.what} at batch {t.batch:,} × history {t.length} skipped: {t.note}"
                 for t in timings if t.note}
        return cls(per_repeat, share, sorted(notes))

    def rate(self, what: str, cell: tuple[int, int]) -> float:
        return _median(self.per_repeat[(what, *cell)])

    def ratio(self, what: str, over: str, cell: tuple[int, int]) -> float:
        """Median over repeats of `what`'s rate over `over`'s, each pair from one repeat."""
        pairs = zip(self.per_repeat[(what, *cell)], self.per_repeat[(over, *cell)], strict=True)
        return _median([a / b for a, b in pairs])


def _median(values: Sequence[float]) -> float:
    """The median of the values measured (NaN: skipped), NaN if none was."""
    measured = [v for v in values if not math.isnan(v)]
    return statistics.median(measured) if measured else math.nan


def grid_table(plan: LMCost, one: Rates, two: Rates) -> list[str]:
    rows = []
    for cell in plan.cells:
        rows.append([f"{cell[0]:,}", cell[1],
                     *(value for rates in (one, two) for value in (
                         fmt_rate(rates.rate(BARE, cell)), fmt_rate(rates.rate(STOCK, cell)),
                         fmt_ratio(rates.ratio(BARE, STOCK, cell)))),
                     fmt_ratio(two.rate(BARE, cell) / one.rate(BARE, cell))])
    return table(["batch", "history (tokens)", "seqq step rows/s", "stock decode rows/s",
                  "seqq / stock", "2 shards: seqq step rows/s", "2 shards: stock rows/s",
                  "2 shards: seqq / stock", "seqq step: 2 shards / 1"], rows)


def modes_table(plan: LMCost, one: Rates, two: Rates) -> list[str]:
    def flag(*ratios: float) -> str:
        return "**below 0.8×**" if min(ratios) < TARGET else ""

    cell = plan.cell
    rows = [[name, "-", fmt_rate(one.rate(name, cell)), fmt_ratio(one.ratio(name, BARE, cell)),
             fmt_rate(two.rate(name, cell)), fmt_ratio(two.ratio(name, BARE, cell)), ""]
            for name in (BARE, STOCK)]
    for mode in MODES:
        a, b = one.ratio(mode.name, BARE, cell), two.ratio(mode.name, BARE, cell)
        rows.append([mode.name, f"{plan.calls:,}", fmt_rate(one.rate(mode.name, cell)),
                     fmt_ratio(a), fmt_rate(two.rate(mode.name, cell)), fmt_ratio(b),
                     flag(a, b)])
    return table(["mode", "calls per history (budget)", "1 thread: calls/s", "/ seqq step",
                  "2 shards: calls/s", "/ seqq step", f"target ≥ {TARGET}×"], rows)


def run(plan: Plan, device: str | None) -> Section:
    """The section, always on the CPU (`device` is not used: the question is a CPU's)."""
    lm = plan.lm
    load_before, memory = os.getloadavg()[0], available_memory()
    started = time.perf_counter()
    clock = clock_name()
    one = Rates.of(in_processes(lm, 1), clock)
    two = Rates.of(in_processes(lm, SHARDS), clock)
    seconds, load_after = time.perf_counter() - started, os.getloadavg()[0]
    busy = (load_before > BUSY_LOAD or min(one.cpu_share, two.cpu_share) < BUSY_CPU_SHARE)
    batch, length = lm.cell
    body = [describe(__doc__), "",
            f"- **Model and histories**: {SUBJECTS[lm.subject].about}.",
            f"- **Grid**: batch × history length, {lm.steps} steps per row after the history; "
            f"the rows continue {lm.distinct} distinct histories in turn (the estimators' "
            "shape: many rows per history). Seqq keeps each history's keys and values once, "
            "stock decoding once per row.",
            f"- **Estimators and judge**: K = {lm.K} hitting time, {lm.histories} histories of "
            f"{length} tokens, a budget of {lm.calls:,} model calls per history (the judge: at "
            f"most that many, `s_high` = calls / (K − 1), enumeration off); calls/s = the "
            "calls their answers report over the time taken; each ratio is to the seqq step at "
            f"batch {batch:,} and history {length}. Rows are declared in "
            "`benchmarks/lm_cost.py` (`MODES`): a new mode is one line there.",
            f"- **Machine**: {cpu_model()}, {os.cpu_count()} cores; 1 torch thread per "
            f"process; clock: {CLOCK_NOTES[clock]}; {lm.repeats} repeat(s), medians; "
            f"{seconds:.0f} s in all; "
            f"{(memory or math.nan) / 2**30:.1f} GB of memory available at the start. Load average "
            f"(1 min) {load_before:.2f} before, {load_after:.2f} after; CPU time / wall time "
            f"of the timed parts: {one.cpu_share:.2f} in one process, {two.cpu_share:.2f} in "
            f"the shards"
            + (" — **the machine was not idle**: other work shared its cores, so the rates "
               "are below an idle machine's, on the wall clock the shards' most; the ratios, of "
               "rates measured seconds apart, are what to read." if busy else "."),
            *(f"- {note}." for note in dict.fromkeys(one.notes + two.notes)),
            "", *grid_table(lm, one, two), "", *modes_table(lm, one, two)]
    return Section("l", "The language-model path's cost: SmolLM2 step, stock decode, "
                   "estimators, judge", body)
