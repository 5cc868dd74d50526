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
    """A pass-through model that records the rows of every `step` call and the time the model
    took for it: how an estimator batches its work (the raw model is then timed on the same
    sequence of steps), and how much of its time is the model's."""

    def __init__(self, model: SequenceModel):
        self.model = model
        self.vocab_size = model.vocab_size
        self.sizes: list[int] = []  # rows of each step, in order
        self.seconds = 0.0  # time inside the model's `step`, on the current clock
        self._device = model_device(model)

    @property
    def steps(self) -> int:
        return len(self.sizes)

    @property
    def rows(self) -> int:
        return sum(self.sizes)

    def __getattr__(self, name: str):  # anything else the estimators look for (device, ...)
        return getattr(self.model, name)

    def initial_state(self, histories):
        return self.model.initial_state(histories)

    def step(self, state: State, tokens: Tensor):
        self.sizes.append(len(tokens))
        seconds, result = timed(self._device, lambda: self.model.step(state, tokens))
        self.seconds += seconds
        return result

    def select(self, state: State, index: Tensor) -> State:
        return self.model.select(state, index)


@torch.inference_mode()
def raw_steps(model: SequenceModel, history: Sequence[int], sizes: Sequence[int],
              seed: int = 0) -> tuple[float, int]:
    """(seconds, calls) of the model alone taking chained steps of the given row counts from
    `history`, as an estimator's recorded steps: each step continues rows of the one before
    (picked outside the clock), so a transformer's cache grows as it does in the estimator,
    and a small step (a trie's first level) costs what it costs the model at that size."""
    device = model_device(model)
    _, state = model.initial_state([list(history)])
    generator = torch.Generator(device=device).manual_seed(seed)
    seconds, previous = 0.0, 1
    for size in sizes:
        state = model.select(state, torch.arange(size, device=device) % previous)
        tokens = torch.randint(model.vocab_size, (size,), generator=generator, device=device)
        step_seconds, (_, state) = timed(device, lambda s=state, t=tokens: model.step(s, t))
        seconds += step_seconds
        previous = size
    return seconds, sum(sizes)
