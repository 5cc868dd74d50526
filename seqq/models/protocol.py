"""The one interface every estimator talks to: a batched autoregressive model.

Bring your own model by implementing these three methods. Rows are independent prefixes;
`select` lets estimators branch samples and beams without re-encoding anything.
Optionally, `concat(states) -> state` (rows of several states as one) lets the prefix trie
expand prefixes cached in different rounds with one batched call instead of one per round.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from torch import LongTensor, Tensor

State = Any


@runtime_checkable
class SequenceModel(Protocol):
    vocab_size: int

    def initial_state(self, histories: Sequence[Sequence[int]]) -> tuple[Tensor, State]:
        """Encode B histories; return log p(X_1 | history) as [B, V] and the state after them."""
        ...

    def step(self, state: State, tokens: LongTensor) -> tuple[Tensor, State]:
        """Append one token per row; return log p(next | prefix) [B, V] and the new state.
        Leave `state` as it was: estimators keep states and step them again (a trie expands
        a prefix's other children later), and step a kept state as it is where every row
        continues in order (no `select` copy)."""
        ...

    def select(self, state: State, index: LongTensor) -> State:
        """Rows of `state` picked (and duplicated) by `index`, for branching samples and beams."""
        ...
