"""Model temperature (docs/decisions.md §10): p_T(x_k | x_<k) ∝ p(x_k | x_<k)^{1/T} at every step.

This changes the *target* distribution, so ground truth must be computed under the same wrapper.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from seqq.models.protocol import SequenceModel, State


class TemperatureModel:
    def __init__(self, model: SequenceModel, temperature: float):
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.model, self.temperature = model, temperature
        self.vocab_size = model.vocab_size
        self.vocab = getattr(model, "vocab", None)

    def _temper(self, log_probs: Tensor) -> Tensor:
        return torch.log_softmax(log_probs / self.temperature, dim=-1)

    def initial_state(self, histories: Sequence[Sequence[int]]) -> tuple[Tensor, State]:
        log_probs, state = self.model.initial_state(histories)
        return self._temper(log_probs), state

    def step(self, state: State, tokens: Tensor) -> tuple[Tensor, State]:
        log_probs, state = self.model.step(state, tokens)
        return self._temper(log_probs), state

    def select(self, state: State, index: Tensor) -> State:
        return self.model.select(state, index)

    @property
    def concat(self):
        return getattr(self.model, "concat", None)
