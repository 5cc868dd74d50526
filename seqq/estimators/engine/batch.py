"""A batch of (history, query) tasks and the query lattices estimators walk.

Estimators answer many tasks together. Every task whose query holds at least one path is a
*branch*: a root node in the batch's one lattice (all queries' lattices concatenated,
`seqq/queries/lattice.py`). A walk carries a lattice node per row; the node says which symbols
are allowed next (`domain`), where a symbol leads (`lattice.advance`) and when nothing is left to
decide (`lattice.free`). All branches share one call counter and one encoding of each history.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.errors import QueryError
from seqq.estimators.engine.categorical import Domain, Excluded
from seqq.models.counting import CallCounter, OwnedState
from seqq.models.protocol import SequenceModel
from seqq.queries import Query
from seqq.queries.lattice import Lattice, concat


@dataclass
class Batch:
    counter: CallCounter
    root_log_probs: Tensor  # [T, V] log p(X_1 | history_t)
    root_state: OwnedState  # one row per task
    branch_task: Tensor  # [N] task of each branch (CPU)
    lattice: Lattice  # every task's query lattice (CPU; `lattice.on(device)` on the model's)
    branch_root: Tensor  # [N] root node of each branch (CPU)
    lengths: Tensor  # [N] no walk of the branch goes deeper than this (CPU)
    generator: torch.Generator
    histories: Sequence[Sequence[int]]  # one per task, for estimators that read its tail
    queries: tuple[Query, ...]  # the distinct queries, in the order of `lattice.query`

    @property
    def num_tasks(self) -> int:
        return len(self.root_log_probs)

    @property
    def device(self) -> torch.device:
        return self.root_log_probs.device

    @property
    def vocab_size(self) -> int:
        return self.root_log_probs.shape[-1]

    def domain(self, nodes: Tensor, sparse: bool = False) -> Domain:
        """[n, V] bool on the device: the symbols allowed next at each lattice node. With
        `sparse`, the few symbols each node disallows (`Excluded`) where the lattice lists
        them, for callers that only mask rows with it (`fill_outside`, `Categorical`)."""
        nodes = nodes.to(self.device)
        if sparse and (excluded := self.lattice.excluded(nodes)) is not None:
            return Excluded(excluded)
        return self.lattice.on(self.device).allowed.index_select(0, nodes)

    def task_calls(self) -> Tensor:
        """Model calls charged so far to each task of this batch (a `subset` keeps charging
        the original tasks, which its root rows still own)."""
        return self.counter.calls[self.root_state.owners]

    def task_branches(self) -> list[Tensor]:
        """The branches of each task (none for a query without paths, else one)."""
        counts = torch.bincount(self.branch_task, minlength=self.num_tasks)
        return list(torch.arange(len(self.branch_task)).split(counts.tolist()))


def prepare(
    model: SequenceModel,
    histories: Sequence[Sequence[int]],
    queries: Sequence[Query],
    seed: int | None,
    by_part: bool = False,
) -> Batch:
    """Compile the queries' lattices and encode every history once (one call per task).

    `by_part` (the union estimators): each task gets one branch per part of its union
    (`union_parts`), compiled separately, instead of one for the union's own automaton."""
    if len(histories) != len(queries):
        raise QueryError(f"got {len(histories)} histories but {len(queries)} queries")
    if not histories:
        raise QueryError("no (history, query) pairs given")
    V = model.vocab_size
    distinct: dict[Query, int] = {}  # tasks asking one query share its lattice
    task_parts = [union_parts(q) if by_part else (q,) for q in queries]
    index = torch.tensor([distinct.setdefault(p, len(distinct)) for ps in task_parts for p in ps])
    owner = torch.repeat_interleave(torch.arange(len(queries)),
                                    torch.tensor([len(ps) for ps in task_parts]))
    lattice = concat([q.lattice(V) for q in distinct])
    roots = lattice.roots[index]
    counter = CallCounter(model, num_tasks=len(queries))
    root_log_probs, root_state = counter.initial_state(histories)
    device = root_log_probs.device
    kept = (roots >= 0).nonzero().flatten()
    branch_task = owner[kept]
    generator = torch.Generator(device=device)
    generator.manual_seed(seed if seed is not None else torch.seed() % 2**63)
    return Batch(
        counter=counter,
        root_log_probs=root_log_probs,
        root_state=root_state,
        branch_task=branch_task,
        lattice=lattice,
        branch_root=roots[kept],
        lengths=lattice.effective_lengths()[index[kept]],
        generator=generator,
        histories=histories,
        queries=tuple(distinct),
    )


def union_parts(query: Query) -> tuple[Query, ...]:
    """The parts of a union, unions among them flattened; any other query is its one part."""
    if not query.parts:
        return (query,)
    return tuple(p for part in query.parts for p in union_parts(part))


def prefix_reach(batch: Batch) -> Tensor:
    """[N, D] float64: how many prefixes of length d ≥ 1 of each branch still restrict the
    future (each would cost one call to expand); column 0 is unused."""
    lattice = batch.lattice
    inner = ~lattice.free & (lattice.depth > 0)
    query, depth = lattice.query[inner], lattice.depth[inner]
    D = int(depth.max()) + 1 if len(depth) else 1
    reach = torch.zeros(len(lattice.roots), D, dtype=torch.float64).index_put_(
        (query, depth), lattice.prefix_counts()[inner], accumulate=True)
    return reach[lattice.query[batch.branch_root]]  # per branch (a subset keeps its lattice)


def tree_calls(batch: Batch, width: float | Tensor = math.inf) -> Tensor:
    """Calls per task to expand every branch's tree keeping at most `width` prefixes per level:
    1 + Σ_{1≤d} min(width, prefixes at depth d that still restrict the future). With width = ∞
    this is exact enumeration. `width` may be one number or one per branch."""
    width = torch.as_tensor(width, dtype=torch.float64).reshape(-1, 1)
    return 1 + torch.zeros(batch.num_tasks, dtype=torch.float64).index_add_(
        0, batch.branch_task, torch.minimum(prefix_reach(batch), width).sum(-1))


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
        lattice=batch.lattice,
        branch_root=batch.branch_root[keep],
        lengths=batch.lengths[keep],
        generator=batch.generator,
        histories=[batch.histories[t] for t in tasks.tolist()],
        queries=batch.queries,
    )


def replicated(batch: Batch, copies: Sequence[int]) -> Batch:
    """Each task `copies[t]` times, in order: independent runs of a task (a replicate method's),
    each a task of its own with its own call count, so that each spends its own budget. The
    copies share the task's encoded history; each starts charged what its task was (that
    encoding), as a batch prepared with the history repeated would charge it."""
    task = torch.repeat_interleave(torch.arange(batch.num_tasks), torch.as_tensor(list(copies)))
    per_task = batch.task_branches()
    branches = torch.cat([per_task[t] for t in task.tolist()])
    copy_of = torch.repeat_interleave(torch.arange(len(task)),
                                      torch.tensor([len(per_task[t]) for t in task.tolist()]))
    counter = CallCounter(batch.counter.model, num_tasks=len(task))
    counter.calls = batch.task_calls()[task].clone()
    on_device = task.to(batch.device)
    root = batch.counter.select(batch.root_state, on_device)
    return dataclasses.replace(
        batch, counter=counter, root_log_probs=batch.root_log_probs[on_device],
        root_state=OwnedState(root.inner, torch.arange(len(task))), branch_task=copy_of,
        branch_root=batch.branch_root[branches], lengths=batch.lengths[branches],
        histories=[batch.histories[t] for t in task.tolist()])
