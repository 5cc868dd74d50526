"""The model-call counter every estimator reports through (docs/decisions.md §1).

One call is one evaluation of p(· | prefix) for one prefix. The counter wraps any model and
charges each evaluated row to the task (history, query) that owns it, so estimates computed
together in shared batches still report exactly their own calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.models.protocol import SequenceModel, State


@dataclass
class OwnedState:
    inner: State
    owners: Tensor  # [B] task id of every row, on the CPU


class CallCounter:
    def __init__(self, model: SequenceModel, num_tasks: int = 1):
        self.model = model
        self.vocab_size = model.vocab_size
        self.calls = torch.zeros(num_tasks, dtype=torch.long)

    def _charge(self, owners: Tensor) -> None:
        self.calls += torch.bincount(owners, minlength=len(self.calls))

    def initial_state(
        self, histories: Sequence[Sequence[int]], owners: Tensor | None = None
    ) -> tuple[Tensor, OwnedState]:
        """Encode each distinct history once; charge one call per row for p(X_1 | history)."""
        keys = [tuple(int(s) for s in h) for h in histories]
        distinct = list(dict.fromkeys(keys))
        log_probs, state = self.model.initial_state([list(k) for k in distinct])
        if len(distinct) < len(keys):
            position = {k: i for i, k in enumerate(distinct)}
            index = torch.tensor([position[k] for k in keys], device=log_probs.device)
            log_probs, state = log_probs[index], self.model.select(state, index)
        owners = torch.arange(len(keys)) if owners is None else owners.cpu()
        self._charge(owners)
        return log_probs, OwnedState(state, owners)

    def step(self, state: OwnedState, tokens: Tensor) -> tuple[Tensor, OwnedState]:
        self._charge(state.owners)
        log_probs, inner = self.model.step(state.inner, tokens)
        return log_probs, OwnedState(inner, state.owners)

    def select(self, state: OwnedState, index: Tensor) -> OwnedState:
        return OwnedState(self.model.select(state.inner, index), state.owners[index.cpu()])
