"""Timing helpers: wall clocks that wait for the device, raw chained steps, step recording."""

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


def timed(device: torch.device, work: Callable[[], object]) -> tuple[float, object]:
    """Seconds `work()` took, including the device finishing it; and its result."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    result = work()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, result


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
    return time_steps(model, state, tokens, steps, device) * steps, rows * steps
