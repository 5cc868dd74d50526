"""Timing helpers: clocks that wait for the device, raw chained steps, step recording.

Two clocks: wall time (the default; a GPU's work is waited for), or this process's CPU time,
for a CPU run on one thread on a shared machine: other processes time-slicing the cores then
do not count against whichever run they happened to hit (cache contention still does)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from seqq.models.batching import time_steps
from seqq.models.protocol import SequenceModel, State


def model_device(model: SequenceModel) -> torch.device:
    return torch.device(getattr(model, "device", "cpu"))


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = ["wall"]


def set_clock(name: str) -> None:
    """Time everything that follows with CLOCKS[name]."""
    if name not in CLOCKS:
        raise ValueError(f"unknown clock {name!r}; choose one of {', '.join(CLOCKS)}")
    _clock[0] = name


def clock_name() -> str:
    return _clock[0]


def timed(device: torch.device, work: Callable[[], object]) -> tuple[float, object]:
    """Seconds `work()` took on the current clock, including the device finishing it; and
    its result."""
    clock = CLOCKS[_clock[0]]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = clock()
    result = work()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return clock() - start, result


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


class StepRecorder:
    """A pass-through model that counts `step` calls and the rows they carried, to learn how an
    estimator batches its work (the raw model is then timed on the same shape of work)."""

    def __init__(self, model: SequenceModel):
        self.model = model
        self.vocab_size = model.vocab_size
        self.steps = 0
        self.rows = 0

    def __getattr__(self, name: str):  # anything else the estimators look for (device, ...)
        return getattr(self.model, name)

    def initial_state(self, histories):
        return self.model.initial_state(histories)

    def step(self, state: State, tokens: Tensor):
        self.steps += 1
        self.rows += len(tokens)
        return self.model.step(state, tokens)

    def select(self, state: State, index: Tensor) -> State:
        return self.model.select(state, index)


@torch.inference_mode()
def raw_steps(model: SequenceModel, history: Sequence[int], rows: int, steps: int,
              seed: int = 0) -> tuple[float, int]:
    """(seconds, calls) of `steps` chained batched steps over `rows` copies of `history`, as in
    generation: the model alone, with nothing around it."""
    device = model_device(model)
    _, root = model.initial_state([list(history)])
    state = model.select(root, torch.zeros(rows, dtype=torch.long, device=device))
    generator = torch.Generator(device=device).manual_seed(seed)
    tokens = torch.randint(model.vocab_size, (rows,), generator=generator, device=device)
    seconds = time_steps(model, state, tokens, steps, device, CLOCKS[_clock[0]])
    return seconds * steps, rows * steps
