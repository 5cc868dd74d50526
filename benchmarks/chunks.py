"""(e) Row chunks: stepping many rows in chunks of `chunk_rows(model)` (`seqq.models.batching`:
the device's default, what every estimator's model step uses through `CallCounter.step`)
against one huge batch and against fixed reference batches, interleaved. Each variant rolls the
same rows forward K steps from one history (generation's shape of work)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from benchmarks.plans import Plan
from benchmarks.report import Section, describe, fmt_rate, fmt_ratio, table
from benchmarks.timing import model_device, timed
from benchmarks.zoo import build
from seqq.models.batching import chunk_rows, map_row_chunks, measure_chunk_rows, step_in_chunks
from seqq.models.protocol import SequenceModel


def _rollout(model: SequenceModel, root, K: int, step: Callable) -> Callable[[Tensor], None]:
    """Roll the given rows (indices into one big batch) forward K steps with `step`."""
    def run(rows: Tensor) -> None:
        device = model_device(model)
        state = model.select(root, torch.zeros(len(rows), dtype=torch.long, device=device))
        tokens = (rows % model.vocab_size).to(device)
        for _ in range(K):
            _, state = step(model, state, tokens)
    return run


def _plain(model, state, tokens):
    return model.step(state, tokens)


@torch.inference_mode()
def run(plan: Plan, device: str | None) -> Section:
    bench = build(plan.chunk_model, device)
    model = bench.model
    choice = measure_chunk_rows(model, plan.chunk_sizes)
    size = chunk_rows(model)
    _, root = model.initial_state([[1, 2, 3]])
    rows = torch.arange(plan.chunk_rows)
    plain = _rollout(model, root, plan.chunk_steps, _plain)
    variants: dict[str, Callable[[], object]] = {
        f"batches of {plan.chunk_reference:,}": lambda: map_row_chunks(
            model, rows, plain, size=plan.chunk_reference),
        f"one batch of {plan.chunk_rows:,}": lambda: plain(rows),
        f"map_row_chunks, chunk {size:,}": lambda: map_row_chunks(model, rows, plain),
    }
    if getattr(model, "concat", None) is not None:
        chunked = _rollout(model, root, plan.chunk_steps, step_in_chunks)
        variants[f"step_in_chunks, chunk {size:,}"] = lambda: chunked(rows)
    reference = next(iter(variants))
    for work in variants.values():
        work()  # warm-up
    rates: dict[str, list[float]] = {name: [] for name in variants}
    calls = plan.chunk_rows * plan.chunk_steps
    names = list(variants)
    repeats = max(plan.repeats, 9)  # short runs, many of them: a ratio near 1 needs them
    for repeat in range(repeats):
        for name in names[repeat % len(names):] + names[:repeat % len(names)]:  # rotate order
            seconds, _ = timed(model_device(model), variants[name])
            rates[name].append(calls / seconds)
    best = {name: max(r) for name, r in rates.items()}
    body = [describe(__doc__), "",
            f"Model: {bench.name} ({bench.note}); {plan.chunk_rows:,} rows × "
            f"{plan.chunk_steps} steps; best of {repeats} repeats (other processes only ever "
            "slow a run down, so the best run is the least disturbed one), the variants' order "
            "rotated each repeat.", "",
            f"Chunk size used: **{size:,}** rows (`chunk_rows`). For comparison, "
            "`measure_chunk_rows` (best of up to 3 rounds over the sizes): "
            + ", ".join(f"{n:,} rows: {fmt_rate(r)}/s" for n, r in choice.throughput.items())
            + f" → it would pick {choice.rows:,} rows.", ""]
    if getattr(model, "concat", None) is None:
        body += ["(`step_in_chunks` is not shown: this model has no `concat(states)`.)", ""]
    body += table(["variant", "calls/s", f"vs {reference}"],
                  [[name, fmt_rate(best[name]), fmt_ratio(best[name] / best[reference])]
                   for name in variants])
    return Section("e", "Row chunks for big batches", body)
