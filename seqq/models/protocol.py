"""The one interface every estimator talks to: a batched autoregressive model.

Bring your own model by implementing these three methods. Rows are independent prefixes;
`select` lets estimators branch samples and beams without re-encoding anything.
Optionally, `concat(states) -> state` (rows of several states as one) lets the prefix trie
expand prefixes cached in different rounds with one batched call instead of one per round.
`check_protocol` refuses a model missing one of them (or its `vocab_size`) with one
`ModelError` before any estimator calls it.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from torch import LongTensor, Tensor

from seqq.errors import ModelError

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


# what each protocol method is for, for `check_protocol`'s messages
SIGNATURES = {
    "initial_state": "def initial_state(self, histories) -> (log_probs [B, V], state)",
    "step": "def step(self, state, tokens) -> (log_probs [B, V], new state)",
    "select": "def select(self, state, index) -> state (rows picked by index)",
}


def check_protocol(model: object) -> None:
    """Raise one `ModelError` naming what is missing before any estimator calls the model: a
    model without `select` (or with `select = None`) would otherwise fail deep inside an
    estimator with a bare AttributeError or TypeError."""
    name = type(model).__name__
    fix = "implement it as in seqq/models/protocol.py"
    size = getattr(model, "vocab_size", None)
    if size is None:
        raise ModelError(f"{name} has no vocab_size; set it to the number of symbols the model "
                         f"predicts (an int), as in seqq/models/protocol.py")
    try:
        count = None if isinstance(size, bool) else operator.index(size)
    except TypeError:
        count = None
    if count is None or count < 1:
        raise ModelError(f"{name}.vocab_size is {size!r}; it must be a positive int, the number "
                         f"of symbols the model predicts")
    for method, signature in SIGNATURES.items():
        found = getattr(model, method, None)
        if found is None:
            raise ModelError(f"{name} has no {method} method (or it is None); {fix}: "
                             f"{signature}")
        if not callable(found):
            raise ModelError(f"{name}.{method} is {found!r:.40}, not a method; "
                             f"{fix}: {signature}")
