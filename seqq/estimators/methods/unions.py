"""Unions too large to compile: p(Q_1 ∪ … ∪ Q_J) from the parts' own restricted proposals.

The batch has one branch per part (`prepare(..., by_part=True)`); a path drawn from part i's
proposal q_i carries one lattice node per part of its task, so one [V] row of the model per
prefix gives every part's p(allowed_j | x_<k), hence q_j(x)/p(x) = Π_k 1[x_k ∈ allowed_j] /
p(allowed_j | x_<k) for all j at once. After part i is decided (free) q_i is p itself.

A path is followed until *every* part is decided (free or rejected): membership is settled as
soon as one part accepts, but both weights below need q_j(x) (mixture) or 1[x ∈ Q_j] (klm) for
every part, and an undecided part's factors depend on later symbols. So a path costs at most
max_j L_j − 1 calls, L_j the parts' effective lengths (docs/decisions.md §21).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from seqq.estimators.engine.allowance import Charge
from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.budget import draw_in_rounds
from seqq.estimators.engine.categorical import Categorical
from seqq.estimators.engine.memory import rows_within
from seqq.estimators.engine.rollout import (
    Paths,
    charge_steps,
    restrict,
    step_unfinished,
)
from seqq.estimators.engine.summary import BranchResult, segment_mean
from seqq.estimators.method import POSITIVE, Answer, Budgets, Guarantee, Method, Options, option

Weight = Literal["mixture", "klm"]


@dataclass(frozen=True)
class PartSampleOptions(Options):
    samples: int | None = option(None, POSITIVE, "samples per part of the union (1000)")


def mixture(batch: Batch, budgets: Budgets, options: PartSampleOptions, twist: None) -> Answer:
    """Multiple importance sampling with the balance heuristic: `samples` paths from each
    part's restricted proposal q_i (stratified, α_i = 1/J), each weighted
    p(x) / Σ_j q_j(x) per part; the task's estimate sums its parts' means, which is
    J · mean p(x) / Σ_j q_j(x) over all its paths. Unbiased; weights are at most J·p/q_i ≤ J."""
    return _union_estimate(batch, budgets, options.samples, "mixture")


def klm(batch: Batch, budgets: Budgets, options: PartSampleOptions, twist: None) -> Answer:
    """Karp–Luby–Madras importance sampling: Σ_i mean over `samples` paths x ~ q_i of
    (p(x)/q_i(x)) / N(x), N(x) the number of parts containing x. Unbiased: each path of the
    union is counted once in total, whichever parts hold it."""
    return _union_estimate(batch, budgets, options.samples, "klm")


def _union_estimate(batch: Batch, budgets: Sequence[int] | None, samples: int | None,
                    weight: Weight) -> Answer:
    """Draw per part in `draw_in_rounds`' rounds, priced at the task's longest part (a path
    runs until all parts are decided), and sum the parts' mean weights per task."""
    N = len(batch.branch_task)
    longest = torch.ones(batch.num_tasks, dtype=torch.long).scatter_reduce(
        0, batch.branch_task, batch.lengths, reduce="amax")
    priced = dataclasses.replace(batch, lengths=longest[batch.branch_task])
    siblings, column = _sibling_table(batch)
    row_branch, paths = draw_in_rounds(
        priced, budgets, samples,
        lambda rows, charge: _draw(batch, rows, siblings, column, weight, charge))
    log_value, variance, count = segment_mean(paths.log_weight, row_branch, N)
    return Answer(BranchResult(log_value, variance, count.long(), None),
                  weights=(row_branch, paths.log_weight))


def _sibling_table(batch: Batch) -> tuple[Tensor, Tensor]:
    """[T, J] the branches (parts) of each task, −1 padded, and each branch's column in it."""
    counts = torch.bincount(batch.branch_task, minlength=batch.num_tasks)
    first = torch.cumsum(counts, 0) - counts
    N = len(batch.branch_task)
    column = torch.arange(N) - first[batch.branch_task]  # branches are grouped by task
    siblings = torch.full((batch.num_tasks, int(counts.max()) if N else 0), -1, dtype=torch.long)
    siblings[batch.branch_task, column] = torch.arange(N)
    return siblings, column


def _draw(batch: Batch, row_branch: Tensor, siblings: Tensor, column: Tensor,
          weight: Weight, charge: Charge | None) -> Paths:
    """Roll out every row from its part's proposal, in memory-bounded chunks."""
    chunk = rows_within(batch.vocab_size * max(1, siblings.shape[1]))
    return Paths.cat([_walk(batch, row_branch[part], siblings, column, weight,
                            None if charge is None else charge.select(part))
                      for part in torch.arange(len(row_branch)).split(chunk)])


def _walk(batch: Batch, row_branch: Tensor, siblings: Tensor, column: Tensor,
          weight: Weight, charge: Charge | None) -> Paths:
    """Sample each row from its own part's proposal (p once that part is free) until every
    part of its task is decided, accumulating log q_j(x)/p(x) for every part j. With a
    `charge`, calls are paid in draw order (rows past their task's cut stop, unaccepted)."""
    lattice, device, free = batch.lattice, batch.device, batch.lattice.free
    tasks = batch.branch_task[row_branch]
    sib = siblings[tasks]
    nodes = torch.where(sib >= 0, batch.branch_root[sib.clamp_min(0)], -1)  # [R, J], −1 decided
    own = column[row_branch]
    R, J = nodes.shape
    log_p = torch.zeros(R, dtype=torch.float64, device=device)
    log_ratio = torch.zeros(R, J, dtype=torch.float64, device=device)  # log q_j(x)/p(x)
    inside = torch.zeros(R, J, dtype=torch.bool)  # part j accepted x
    log_probs = batch.root_log_probs[tasks.to(device)]
    state = batch.counter.select(batch.root_state, tasks.to(device))
    running = torch.arange(R)  # output rows still sampling (CPU, for control flow)
    rows = running.to(device)
    while len(running):
        open_ = (nodes >= 0) & ~free[nodes.clamp_min(0)]
        r, j = open_.nonzero(as_tuple=True)
        here = torch.arange(len(running))
        own_open = open_[here, own[running]].to(device)
        domain = batch.domain(nodes[here, own[running]].clamp_min(0)) | ~own_open[:, None]
        proposal = Categorical.from_logits(log_probs, domain)
        drawn = proposal.sample(batch.generator)
        log_ratio[rows[r.to(device)], j.to(device)] -= _part_masses(batch, proposal, log_probs,
                                                                    nodes, r, j, own[running])
        log_p[rows] += log_probs.gather(1, drawn[:, None])[:, 0].double()
        drawn_cpu = drawn.cpu()
        nodes[r, j] = lattice.advance(nodes[r, j], drawn_cpu[r])
        done = ~((nodes >= 0) & ~free[nodes.clamp_min(0)]).any(1)
        inside[running[done]] = nodes[done] >= 0
        done = charge_steps(charge, done, running)
        if done.all():
            break
        running, nodes, rows, log_probs, state = step_unfinished(batch, done, running, nodes,
                                                                 rows, drawn, state)
    return _weigh(log_p.cpu(), log_ratio.cpu(), inside, own, weight)


def _part_masses(batch: Batch, proposal: Categorical, log_probs: Tensor, nodes: Tensor,
                 r: Tensor, j: Tensor, own: Tensor) -> Tensor:
    """log p(V_j | prefix) of each open (row r, part j): the row's own part's is the normaliser
    of the proposal it draws from; only the other parts take a pass over the vocabulary."""
    device = log_probs.device
    is_own = j == own[r]
    log_mass = torch.empty(len(r), dtype=torch.float64, device=device)
    log_mass[is_own.to(device)] = proposal.log_total()[r[is_own].to(device)]
    if not bool(is_own.all()):
        rest, part = r[~is_own], j[~is_own]
        log_mass[(~is_own).to(device)] = restrict(log_probs[rest.to(device)],
                                                  batch.domain(nodes[rest, part]))[1].double()
    return log_mass


def _weigh(log_p: Tensor, log_ratio: Tensor, inside: Tensor, own: Tensor, weight: Weight
           ) -> Paths:
    """Each row's weight for its part's mean: p/Σ_j q_j (mixture) or (p/q_i)/N (klm), over
    the parts j containing x; zero for a row whose own proposal had no mass (a dead row)."""
    R = len(own)
    own_ratio = log_ratio[torch.arange(R), own]
    alive = inside[torch.arange(R), own] & torch.isfinite(own_ratio)
    if weight == "mixture":
        log_w = -torch.logsumexp(torch.where(inside, log_ratio, -torch.inf), 1)
    else:
        log_w = -own_ratio - inside.sum(1).double().log()
    log_w = torch.where(alive, log_w, -torch.inf)
    return Paths(log_p, log_p + torch.where(alive, own_ratio, 0.0), log_w, alive)


METHODS = (
    Method(name="mixture", run=mixture, options=PartSampleOptions,
           guarantee=Guarantee.UNBIASED, by_part=True),
    Method(name="klm", run=klm, options=PartSampleOptions, guarantee=Guarantee.UNBIASED,
           by_part=True),
)
