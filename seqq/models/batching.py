"""Row chunks sized for the device, so that batching many rows keeps each step's memory bounded.

Estimators step thousands of independent rows (samples, beams, many tasks at once). One huge batch
holds every row's activations and the estimators' [rows, V] work at once; chunks bound that memory.
On a CPU the fastest batch size depends on the model and the host (docs/performance.md), while a
GPU wants the largest batch memory allows. Every model step of every estimator goes through
`CallCounter.step`, which steps rows
in chunks of `chunk_rows(model)` (`step_in_chunks`), so all estimators get this at once. The
prefix trie and exact enumeration keep each chunk's new state apart (`step_parts`): joining
them would copy every new state once more.

The chunk size is a fixed default unless set, so a seeded estimate never depends on a timing:
`CPU_CHUNK_ROWS` for a network on the CPU (chosen on LSTMs of 128 and 512 units; see
docs/performance.md#row-chunks), else the memory cap (a GPU wants the largest batch; a model with no
`device`, such as a Markov or HPYP table, gains nothing from chunks). `measure_chunk_rows` times
`step` at doubling batch sizes and picks the smallest size within `TOLERANCE` of the best
throughput; `set_chunk_rows(model, measure_chunk_rows(model).rows)` adopts it.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor

from seqq.models.protocol import SequenceModel, State

MAX_ELEMENTS = 2**26  # rows × V of one chunk's log-probs (256 MiB in float32): bounds memory
CPU_CHUNK_ROWS = 1024  # default chunk of a network on the CPU (see the module docstring)
# Candidate chunk sizes, 1 024 .. 65 536 rows: below ~1 000 rows the fixed cost of each step
# (the estimators' tensor ops around the model, which this measurement does not see) shows.
SIZES = tuple(2**k for k in range(10, 17))
TOLERANCE = 0.05  # a chunk size within 5 % of the best throughput counts as just as fast
SLOW_STEP_S = 0.1  # stop trying larger sizes once one step takes this long (CPU-bound models)
BUDGET_S = 1.0  # no further measuring round after this long: the measurement stays cheap
T = TypeVar("T")


@dataclass(frozen=True)
class ChunkChoice:
    """The chunk size picked for one model and the throughput (rows/s) measured per size."""

    rows: int
    device: str
    throughput: dict[int, float]


_CHOICES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _inner(model: SequenceModel) -> SequenceModel:
    """The model behind a `CallCounter` (its `counted_model`): measuring through the counter
    would charge tasks. Read by name, since `counting` steps through this module."""
    return getattr(model, "counted_model", model)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _largest(vocab_size: int, max_elements: int) -> int:
    return max(1, max_elements // vocab_size)


@torch.inference_mode()
def measure_chunk_rows(model: SequenceModel, sizes: Sequence[int] = SIZES,
                       max_elements: int = MAX_ELEMENTS, repeats: int = 3,
                       rows_per_timing: int = 4096, slow_step_s: float = SLOW_STEP_S,
                       budget_s: float = BUDGET_S) -> ChunkChoice:
    """Time chained `step`s at each size, the sizes taken in turn up to `repeats` rounds (so a
    burst of load from other processes hits all of them alike; no new round once `budget_s` is
    spent) and the best timing of each kept; sizes stop at the memory cap or once one step takes
    `slow_step_s`. Each timing steps at least `rows_per_timing` rows, so small sizes are not
    timed on a few milliseconds of work."""
    started = time.perf_counter()
    model = _inner(model)
    cap = _largest(model.vocab_size, max_elements)
    log_probs, root = model.initial_state([[0]])
    device = log_probs.device
    generator = torch.Generator(device=device).manual_seed(0)
    best: dict[int, float] = {}  # size -> best seconds per step
    work: dict[int, tuple[State, Tensor, int]] = {}
    for size in sorted({min(s, cap) for s in sizes}):
        state = model.select(root, torch.zeros(size, dtype=torch.long, device=device))
        tokens = torch.randint(model.vocab_size, (size,), generator=generator, device=device)
        seconds = time_steps(model, state, tokens, 1, device)  # also the warm-up
        work[size] = state, tokens, max(1, -(-rows_per_timing // size))
        best[size] = seconds
        if seconds > slow_step_s:
            break
    for _ in range(repeats):
        for size, (state, tokens, steps) in work.items():
            best[size] = min(best[size], time_steps(model, state, tokens, steps, device))
        if time.perf_counter() - started > budget_s:
            break
    throughput = {size: size / seconds for size, seconds in best.items()}
    return ChunkChoice(pick_rows(throughput), str(device), throughput)


def time_steps(model: SequenceModel, state: State, tokens: Tensor, steps: int,
               device: torch.device, clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per step of `steps` chained steps from `state`, the device's work included."""
    _sync(device)
    start = clock()
    for _ in range(steps):
        _, state = model.step(state, tokens)
    _sync(device)
    return (clock() - start) / steps


def pick_rows(throughput: dict[int, float]) -> int:
    """The smallest size whose rows/s is within `TOLERANCE` of the best."""
    fastest = max(throughput.values())
    return min(s for s, r in throughput.items() if r >= (1 - TOLERANCE) * fastest)


def chunk_rows(model: SequenceModel) -> int:
    """The chunk size for `model`: as set for this instance, else the default for its device."""
    model = _inner(model)
    choice = _CHOICES.get(model)
    return choice.rows if choice is not None else default_chunk_rows(model)


def default_chunk_rows(model: SequenceModel, max_elements: int = MAX_ELEMENTS) -> int:
    """`CPU_CHUNK_ROWS` for a model on the CPU, else (GPU, or no `device`) the memory cap."""
    cap = _largest(model.vocab_size, max_elements)
    device = getattr(model, "device", None)
    if device is not None and torch.device(device).type == "cpu":
        return min(CPU_CHUNK_ROWS, cap)
    return cap


def set_chunk_rows(model: SequenceModel, rows: int, max_elements: int = MAX_ELEMENTS) -> None:
    """Fix the chunk size of `model` instead of measuring it (capped by memory as usual)."""
    if rows < 1:
        raise ValueError(f"a chunk must hold at least one row, got {rows}")
    model = _inner(model)
    rows = min(rows, _largest(model.vocab_size, max_elements))
    _CHOICES[model] = ChunkChoice(rows, "set", {})


def map_row_chunks(model: SequenceModel, rows: Tensor, run: Callable[[Tensor], T],
                   size: int | None = None) -> list[T]:
    """`run` on consecutive chunks of the independent `rows` (e.g. whole rollouts of samples),
    at most `size` rows each (by default the model's chunk size), all of nearly equal length so
    that no small tail chunk runs below the device's speed."""
    return [run(part) for part in even_chunks(rows, size or chunk_rows(model))]


def even_chunks(rows: Tensor, size: int) -> tuple[Tensor, ...]:
    """`rows` cut into the fewest nearly equal consecutive chunks of at most `size` rows."""
    return rows.tensor_split(max(1, -(-len(rows) // size)))


def group_chunks(counts: Tensor, size: int) -> list[Tensor]:
    """Consecutive groups (e.g. tasks) packed into chunks of at most `size` rows in all, never
    splitting a group (for rows that interact, as beams and resampled particles of one task do);
    a group larger than `size` is a chunk of its own. Returns the group ids of each chunk."""
    chunks, start, total = [], 0, 0
    for group, count in enumerate(counts.tolist()):
        if total and total + count > size:
            chunks.append(torch.arange(start, group))
            start, total = group, 0
        total += count
    if len(counts):
        chunks.append(torch.arange(start, len(counts)))
    return chunks


def step_in_chunks(model: SequenceModel, state: State, tokens: Tensor, rows: Tensor | None = None,
                   size: int | None = None, state_rows: int | None = None
                   ) -> tuple[Tensor, State]:
    """One batched `step` over many rows, computed `size` rows at a time (by default the model's
    chunk size) and joined again with the model's optional `concat(states)`; models without
    `concat` take the whole step at once. With `rows`, row i continues row rows[i] of `state`:
    each chunk selects its own rows, so a large batch's state is not first copied whole (on a
    CPU, gathering 8 000 LSTM rows at once took as long as three chunked model steps). The
    rows' results do not depend on the chunks beyond float rounding (a network's kernels may
    round differently at another batch size). With `state_rows` (the state's row count), rows
    that continue every row in order step the state as it is."""
    if getattr(model, "concat", None) is None:
        size = max(1, len(tokens))
    log_probs, parts = step_parts(model, [state], tokens, rows, size=size,
                                  state_rows=None if state_rows is None else [state_rows])
    return log_probs, parts[0][1] if len(parts) == 1 else model.concat([s for _, s in parts])


def step_parts(model: SequenceModel, states: Sequence[State], tokens: Tensor,
               rows: Tensor | None = None, source: Tensor | None = None,
               size: int | None = None, state_rows: Sequence[int] | None = None
               ) -> tuple[Tensor, list[tuple[int, State]]]:
    """`step_in_chunks` without the join: the log-probs of all rows, and (row count, new state)
    of each chunk of consecutive rows, which a prefix trie keeps as they are (joining them
    would copy every new state once more). Row i continues row rows[i] of states[source[i]]
    (`rows` None: row i; `source` None: states[0]). A chunk whose rows come from several
    states selects each run of rows from one state and joins the runs with `concat` (callers
    sort by source, for few runs); for a model without `concat`, chunks also end where the
    source changes. With `state_rows` (each state's row count), a chunk that continues every
    row of one state in order steps that state as it is, with no `select` copy. `source`
    needs `rows`."""
    if source is not None and rows is None:
        raise ValueError("step_parts: rows from several states (source) need their row indices")
    size = size or chunk_rows(model)
    bounds = _chunk_bounds(len(tokens), size, None if getattr(model, "concat", None) else source)
    log_probs, parts = [], []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        part_rows = (None if rows is None and end - start == len(tokens) else
                     torch.arange(start, end, device=tokens.device) if rows is None
                     else rows[start:end])
        part_source = None if source is None else source[start:end]
        step_probs, new_state = model.step(_gather(model, states, part_rows, part_source,
                                                   state_rows), tokens[start:end])
        log_probs.append(step_probs)
        parts.append((end - start, new_state))
    return (log_probs[0] if len(log_probs) == 1 else torch.cat(log_probs)), parts


def _chunk_bounds(n: int, size: int, unjoinable_source: Tensor | None) -> list[int]:
    """Offsets cutting n rows into the fewest nearly equal chunks of at most `size` (as
    `even_chunks`), and also where `unjoinable_source` changes (states that cannot be joined)."""
    count = max(1, -(-n // size))
    bounds = [i * (n // count) + min(i, n % count) for i in range(count + 1)]
    if unjoinable_source is not None and n:
        changes = (unjoinable_source[1:] != unjoinable_source[:-1]).nonzero().flatten() + 1
        bounds = sorted(set(bounds) | set(changes.tolist()))
    return bounds


def _gather(model: SequenceModel, states: Sequence[State], rows: Tensor | None,
            source: Tensor | None, state_rows: Sequence[int] | None) -> State:
    """The state whose row i is row rows[i] of states[source[i]] (`rows` None: states[0] as it
    is; `source` None: states[0]). Each run of rows from one state is one `select`."""
    if rows is None:
        return states[0]
    if source is None or not len(source):
        ids, counts = [0], [len(rows)]
    else:
        ids, counts = (x.tolist() for x in torch.unique_consecutive(source, return_counts=True))
    if len(ids) == 1:
        whole = state_rows is not None and every_row_in_order(rows, state_rows[ids[0]])
        return states[ids[0]] if whole else model.select(states[ids[0]], rows)
    return model.concat([model.select(states[g], piece)
                         for g, piece in zip(ids, rows.split(counts), strict=True)])


def every_row_in_order(rows: Tensor, num_rows: int) -> bool:
    """rows == 0, 1, …, num_rows − 1: picking them is no change, so callers skip the copy.
    Checked for CPU rows only: on a GPU the check would wait for the device, and a copy
    there is cheap."""
    return (rows.device.type == "cpu" and len(rows) == num_rows
            and bool((rows == torch.arange(num_rows)).all()))
