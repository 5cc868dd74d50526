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

from seqq.errors import ModelError
from seqq.models.batching import step_in_chunks
from seqq.models.protocol import SequenceModel, State

NORMALISATION_TOLERANCE = 1e-3  # |log Σ_v p(v)| allowed per row (float32 models drift ~1e-6)
CHECKED_ROWS = 16  # rows whose values are checked: a model returning probabilities or logits
# does so in every row, and checking all of a [rows, 50k] first step would cost a step's time


@dataclass
class OwnedState:
    inner: State
    owners: Tensor  # [B] task id of every row, on the CPU


class CallCounter:
    def __init__(self, model: SequenceModel, num_tasks: int = 1):
        self.model = model
        self.vocab_size = model.vocab_size
        self.calls = torch.zeros(num_tasks, dtype=torch.long)
        self._checked: set[str] = set()  # methods whose first output was validated

    def _validate(self, method: str, log_probs: Tensor, rows: int) -> None:
        """Check the first output of each protocol method once: a model returning probabilities,
        logits or the wrong shape would otherwise give silently wrong answers."""
        if method in self._checked:
            return
        self._checked.add(method)
        check_log_probs(log_probs, rows, self.vocab_size, f"{type(self.model).__name__}.{method}")

    def _charge(self, owners: Tensor) -> None:
        self.calls += torch.bincount(owners, minlength=len(self.calls))

    def initial_state(
        self, histories: Sequence[Sequence[int]], owners: Tensor | None = None
    ) -> tuple[Tensor, OwnedState]:
        """Encode each distinct history once; charge one call per row for p(X_1 | history)."""
        keys = [tuple(int(s) for s in h) for h in histories]
        distinct = list(dict.fromkeys(keys))
        log_probs, state = self.model.initial_state([list(k) for k in distinct])
        self._validate("initial_state", log_probs, len(distinct))
        if len(distinct) < len(keys):
            position = {k: i for i, k in enumerate(distinct)}
            index = torch.tensor([position[k] for k in keys], device=log_probs.device)
            log_probs, state = log_probs[index], self.model.select(state, index)
        owners = torch.arange(len(keys)) if owners is None else owners.cpu()
        self._charge(owners)
        return log_probs, OwnedState(state, owners)

    def step(self, state: OwnedState, tokens: Tensor, rows: Tensor | None = None
             ) -> tuple[Tensor, OwnedState]:
        """p(· | prefix) of every row, stepped in row chunks sized for the device
        (`seqq.models.batching`): one huge batch would run slower than chunks on a CPU. With
        `rows`, row i continues row rows[i] of `state` (a `select` and a step in one, chunk by
        chunk, never copying the whole selected state). Rows that continue every row of `state`
        in order step it as it is, with no copy (deep in a walk, every sample has its own node)."""
        if rows is not None and every_row_in_order(rows, len(state.owners)):
            rows = None
        owners = state.owners if rows is None else state.owners[rows.cpu()]
        self._charge(owners)
        log_probs, inner = step_in_chunks(self.model, state.inner, tokens, rows)
        self._validate("step", log_probs, len(tokens))
        return log_probs, OwnedState(inner, owners)

    def select(self, state: OwnedState, index: Tensor) -> OwnedState:
        return OwnedState(self.model.select(state.inner, index), state.owners[index.cpu()])


def every_row_in_order(rows: Tensor, num_rows: int) -> bool:
    """rows == 0, 1, …, num_rows − 1: picking them is no change, so callers skip the copy.
    Checked for CPU rows only: on a GPU the check would wait for the device, and a copy
    there is cheap."""
    return (rows.device.type == "cpu" and len(rows) == num_rows
            and bool((rows == torch.arange(num_rows)).all()))


def check_log_probs(log_probs: object, rows: int, vocab_size: int, where: str) -> None:
    """Raise `ModelError` unless `log_probs` is a [rows, vocab_size] tensor of log-probabilities."""
    if not isinstance(log_probs, Tensor):
        raise ModelError(f"{where} returned {type(log_probs).__name__}; it must return a tensor "
                         f"of log-probabilities [B, V] and the new state")
    if tuple(log_probs.shape) != (rows, vocab_size):
        raise ModelError(f"{where} returned shape {list(log_probs.shape)}; expected [B, V] = "
                         f"[{rows}, {vocab_size}] (one row of log-probabilities per input row)")
    values = log_probs[:CHECKED_ROWS].detach().double()
    if torch.isnan(values).any() or torch.isposinf(values).any():
        raise ModelError(f"{where} returned NaN or +inf; return finite log-probabilities "
                         f"(-inf only for impossible symbols)")
    row_log_sums = torch.logsumexp(values, -1)
    worst = row_log_sums.abs().max().item()
    if worst <= NORMALISATION_TOLERANCE:
        return
    if (values >= 0).all() and ((values.sum(-1) - 1).abs() <= NORMALISATION_TOLERANCE).all():
        raise ModelError(f"{where} returned probabilities; return log-probabilities "
                         f"(e.g. torch.log_softmax(logits, -1))")
    raise ModelError(f"{where} returned rows that are not log-normalised (log Σ exp = "
                     f"{row_log_sums[row_log_sums.abs().argmax()].item():.3g}); return "
                     f"torch.log_softmax(logits, -1), not raw logits")
