"""A batch of (history, query) tasks, split into the products ("branches") estimators work on.

Estimators answer many tasks together: every task's products become branches, each with its own
mask [K, V] and effective length (positions after the last restricted one allow every symbol and
sum to one, so nobody needs to look at them). All branches share one call counter and one
encoding of each distinct history.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.errors import QueryError
from seqq.models.counting import CallCounter, OwnedState
from seqq.models.protocol import SequenceModel
from seqq.queries import Query


@dataclass
class Batch:
    counter: CallCounter
    root_log_probs: Tensor  # [T, V] log p(X_1 | history_t)
    root_state: OwnedState  # one row per task
    branch_task: Tensor  # [N] task of each branch (CPU)
    masks: Tensor  # [N, K, V] bool, on the model's device
    lengths: Tensor  # [N] positions 1..length matter (CPU)
    generator: torch.Generator
    histories: Sequence[Sequence[int]]  # one per task, for estimators that read its tail

    @property
    def num_tasks(self) -> int:
        return len(self.root_log_probs)

    @property
    def device(self) -> torch.device:
        return self.root_log_probs.device

    @property
    def vocab_size(self) -> int:
        return self.root_log_probs.shape[-1]

    def task_calls(self) -> Tensor:
        """Model calls charged so far to each task of this batch (a `subset` keeps charging
        the original tasks, which its root rows still own)."""
        return self.counter.calls[self.root_state.owners]

    def task_branches(self) -> list[Tensor]:
        """The branches of each task (branches are grouped by task, in task order)."""
        counts = torch.bincount(self.branch_task, minlength=self.num_tasks)
        return list(torch.arange(len(self.branch_task)).split(counts.tolist()))


def effective_lengths(masks: Tensor) -> Tensor:
    """Index of the last position whose domain is not the whole vocabulary, plus one (≥ 1)."""
    restricted = ~masks.all(-1)  # [P, K]
    positions = torch.arange(1, masks.shape[1] + 1)
    return (restricted * positions).amax(-1).clamp_min(1)


def pad_horizon(masks: Tensor, horizon: int) -> Tensor:
    """Extend [P, K, V] masks to `horizon` positions with free (all-true) domains."""
    free = torch.ones(masks.shape[0], horizon - masks.shape[1], masks.shape[2], dtype=torch.bool)
    return torch.cat([masks, free], dim=1)


def prepare(
    model: SequenceModel,
    histories: Sequence[Sequence[int]],
    queries: Sequence[Query],
    seed: int | None,
) -> Batch:
    """Resolve the queries' masks and encode every history once (charging one call per task)."""
    if len(histories) != len(queries):
        raise QueryError(f"got {len(histories)} histories but {len(queries)} queries")
    if not histories:
        raise QueryError("no (history, query) pairs given")
    V = model.vocab_size
    query_masks = [q.masks(V) for q in queries]
    horizon = max(q.horizon for q in queries)
    padded = [pad_horizon(m, horizon) for m in query_masks]
    counter = CallCounter(model, num_tasks=len(queries))
    root_log_probs, root_state = counter.initial_state(histories)
    device = root_log_probs.device
    branch_task = torch.cat(
        [torch.full((len(m),), t, dtype=torch.long) for t, m in enumerate(query_masks)]
    )
    masks = torch.cat(padded) if branch_task.numel() else torch.zeros(0, horizon, V, dtype=torch.bool)
    generator = torch.Generator(device=device)
    generator.manual_seed(seed if seed is not None else torch.seed() % 2**63)
    return Batch(
        counter=counter,
        root_log_probs=root_log_probs,
        root_state=root_state,
        branch_task=branch_task,
        masks=masks.to(device),
        lengths=effective_lengths(masks),
        generator=generator,
        histories=histories,
    )


def tree_calls(batch: Batch, width: float | Tensor = math.inf) -> Tensor:
    """Calls per task to expand every product's tree keeping at most `width` nodes per level:
    1 + Σ_products Σ_{k<L} min(width, Π_{j≤k} |V_j|). With width = ∞ this is exact enumeration.
    `width` may be one number or one per branch."""
    sizes = batch.masks.sum(-1).double().cpu()  # [N, K]
    width = torch.as_tensor(width, dtype=torch.float64).reshape(-1, 1)
    reach = torch.minimum(torch.cumprod(sizes, dim=1), width)
    depth = torch.arange(1, sizes.shape[1] + 1)
    inner = torch.where(depth < batch.lengths[:, None], reach, 0.0).sum(-1)
    return 1 + torch.zeros(batch.num_tasks, dtype=torch.float64).index_add_(
        0, batch.branch_task, inner)


def subset(batch: Batch, tasks: Tensor) -> Batch:
    """The same batch limited to some tasks (re-indexed 0..len-1); calls still go to the
    original tasks, because the root rows keep their owners."""
    keep = torch.isin(batch.branch_task, tasks)
    new_id = torch.full((batch.num_tasks,), -1, dtype=torch.long)
    new_id[tasks] = torch.arange(len(tasks))
    device_tasks = tasks.to(batch.device)
    return Batch(
        counter=batch.counter,
        root_log_probs=batch.root_log_probs[device_tasks],
        root_state=batch.counter.select(batch.root_state, device_tasks),
        branch_task=new_id[batch.branch_task[keep]],
        masks=batch.masks[keep.to(batch.device)],
        lengths=batch.lengths[keep],
        generator=batch.generator,
        histories=[batch.histories[t] for t in tasks.tolist()],
    )
