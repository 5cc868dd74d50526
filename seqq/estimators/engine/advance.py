"""Advancing a frontier of rows one symbol, calling the model once per distinct prefix.

Rows (particles, beam nodes) of one task often sit on the same prefix, also across the products
of a union query (a-before-b's products share every prefix that avoids a and b). Each row points
to one evaluated prefix of its task; rows that extend the same prefix by the same symbol share
the next evaluation, so no (task, prefix) is paid for twice at a depth.
"""

from __future__ import annotations

from torch import Tensor

from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.distinct import distinct
from seqq.models.counting import OwnedState


def extend(batch: Batch, state: OwnedState, prefix: Tensor, token: Tensor
           ) -> tuple[Tensor, Tensor, OwnedState]:
    """Evaluate every distinct (prefix, token) once. `prefix` [R] indexes the rows of `state`
    (distinct (task, prefix) pairs); returns each row's new prefix index (CPU), and log p(next)
    and the state of the new prefixes."""
    V = batch.vocab_size
    children, new_prefix = distinct(prefix.cpu() * V + token.cpu(), len(state.owners) * V)
    log_probs, state = batch.counter.step(state, (children % V).to(batch.device),
                                          rows=(children // V).to(batch.device))
    return new_prefix, log_probs, state
