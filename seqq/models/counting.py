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
from seqq.models.batching import step_in_chunks, step_parts
from seqq.models.protocol import SequenceModel, State, check_protocol

NORMALISATION_TOLERANCE = 1e-3  # |log Σ_v p(v)| allowed per row (float32 models drift ~1e-6)
CHECKED_ROWS = 16  # rows whose values are checked: a model returning probabilities or logits
# does so in every row, and checking all of a [rows, 50k] first step would cost a step's time


@dataclass
class OwnedState:
    inner: State
    owners: Tensor  # [B] task id of every row, on the CPU


class CallCounter:
    def __init__(self, model: SequenceModel, num_tasks: int = 1):
        check_protocol(model)  # a missing method is one ModelError here, not a traceback later
        self.model = model
        # what `seqq.models.batching` times when it sizes chunks: the model itself, since
        # measuring through the counter would charge tasks
        self.counted_model = model
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
        (`seqq.models.batching`), which bound the memory of one step. With
        `rows`, row i continues row rows[i] of `state` (a `select` and a step in one, chunk by
        chunk, never copying the whole selected state). Rows that continue every row of `state`
        in order step it as it is, with no copy (deep in a walk, every sample has its own node)."""
        log_probs, inner = step_in_chunks(self.model, state.inner, tokens, rows,
                                          state_rows=len(state.owners))
        return log_probs, OwnedState(inner, self._charged(log_probs, tokens, [state], rows, None))

    def step_parts(self, states: Sequence[OwnedState], tokens: Tensor,
                   rows: Tensor | None = None, source: Tensor | None = None,
                   size: int | None = None) -> tuple[Tensor, list[OwnedState]]:
        """`step` from rows of several states, without joining the new states: row i continues
        row rows[i] of states[source[i]]; the new states come back one per row chunk of at
        most `size` rows (default `chunk_rows`), in order (`seqq.models.batching.step_parts`)."""
        log_probs, parts = step_parts(self.model, [s.inner for s in states], tokens, rows,
                                      source, size, state_rows=[len(s.owners) for s in states])
        owners = self._charged(log_probs, tokens, states, rows, source)
        return log_probs, [OwnedState(inner, part_owners) for (_, inner), part_owners
                           in zip(parts, owners.split([n for n, _ in parts]), strict=True)]

    def _charged(self, log_probs: Tensor, tokens: Tensor, states: Sequence[OwnedState],
                 rows: Tensor | None, source: Tensor | None) -> Tensor:
        """Validate a step's output (one row per token) and charge each row to the task of the
        state row it continues; returns those tasks."""
        self._validate("step", log_probs, len(tokens))
        owners = _owners(states, rows, source)
        self._charge(owners)
        return owners

    def select(self, state: OwnedState, index: Tensor) -> OwnedState:
        return OwnedState(self.model.select(state.inner, index), state.owners[index.cpu()])


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


def _owners(states: Sequence[OwnedState], rows: Tensor | None, source: Tensor | None) -> Tensor:
    """The task of every stepped row: that of the state row it continues."""
    if source is None:
        owners = states[0].owners
        return owners if rows is None else owners[rows.cpu()]
    offsets = torch.tensor([0] + [len(s.owners) for s in states]).cumsum(0)
    return torch.cat([s.owners for s in states])[offsets[source.cpu()] + rows.cpu()]
