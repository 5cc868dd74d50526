"""Generalised adaptive multilevel splitting (GAMS; Bréhier, Gazeau, Goudenège, Lelièvre, Rousset
2016): rare events without importance weights, so a mismatched surrogate cannot mislead it.

N paths per query are drawn from the model itself. A path's *level* is the highest score its
prefixes reach; a prefix's score is the surrogate's log chance of completing the query from it
(log β of `engine/twist.py`), 0 once the query holds and −∞ once it cannot: a progress measure
that only orders paths, never a weight. Each iteration cuts at the k-th lowest level Z (k = the
`kill` share of N), kills every path at or below it (K_j ≥ k of them: the generalised algorithm
kills ties too), and replaces each by a copy of a uniformly chosen survivor up to its first prefix
above Z, continued from there by the model. It stops once the cut reaches the query (Z = 0) or
kills every path. The estimate Π_j (1 − K_j/N) · (share of the final paths in Q) is unbiased
for any score (Bréhier et al. 2016, Thm 4.1), so the surrogate buys variance only. Without one,
a uniform i.i.d. surrogate scores progress along the query's automaton.

A copy replays its prefix from the history: no state is kept per prefix, so memory stays one
row per path; paths that share a prefix at a depth (copies of one survivor, draws of one
symbol) share its model call (`engine/advance.py`). With a budget the number of paths is
chosen up front (`_paths_for`: enough calls left for the copies down to p ≈ 1e-4), and a run
stops before an iteration that could overrun it; its estimate at that iteration is still
unbiased (tests/test_splitting.py measures it over hundreds of seeds), only noisier.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.estimators.engine.advance import extend
from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.budget import cannot_buy
from seqq.estimators.engine.summary import BranchResult
from seqq.estimators.engine.twist import Messages, SurrogateTwist
from seqq.estimators.method import (
    OPEN_UNIT,
    POSITIVE,
    Answer,
    Budgets,
    Guarantee,
    Method,
    Options,
    option,
)
from seqq.models import MarkovModel

DEFAULT_PATHS = 100
DEFAULT_KILL = 0.25
BUDGETED_DECADES = 4  # `_paths_for` leaves room for the copies down to p ≈ 1e-4


@dataclass(frozen=True)
class SplittingOptions(Options):
    paths: int | None = option(None, POSITIVE, "paths per query (100); a budget sets it")
    kill: float = option(DEFAULT_KILL, OPEN_UNIT, "share of paths cut per iteration")


@dataclass
class Paths:
    """N paths per branch, rows grouped by branch: symbols, each prefix's score, and whether
    the path lies in Q."""

    tokens: Tensor  # [R, L] long, −1 after the query was decided
    scores: Tensor  # [R, L] float64, −inf after the path was decided
    in_query: Tensor  # [R] bool

    @property
    def levels(self) -> Tensor:
        return self.scores.amax(1)

    def replace(self, rows: Tensor, new: Paths) -> None:
        self.tokens[rows], self.scores[rows], self.in_query[rows] = (new.tokens, new.scores,
                                                                     new.in_query)


def gams(batch: Batch, budgets: Budgets, options: SplittingOptions,
         twist: Messages | None) -> Answer:
    """GAMS estimate of p(Q) with `paths` paths per query (or as many as the budget pays for
    at worst), cutting a `kill` share per iteration; scored by the surrogate's twist, else by
    a uniform i.i.d. surrogate's. stderr is None: its paths are dependent; the driver compares
    replicates instead."""
    scorer = twist or Messages.of(batch, MarkovModel.iid(torch.ones(batch.vocab_size)))
    B = len(batch.branch_task)
    length = int(batch.lengths.max()) if B else 0
    if budgets is None:
        paths = options.paths or DEFAULT_PATHS
    else:
        lengths = [int(batch.lengths[b].max()) if len(b) else 0 for b in batch.task_branches()]
        paths = min(_paths_for(budgets, lengths, options.kill))
        paths = min(paths, options.paths or paths)
    if B == 0:
        return Answer(BranchResult(torch.zeros(0, dtype=torch.float64), None, None, None))
    cut = max(1, math.ceil(options.kill * paths))
    branch = torch.arange(B).repeat_interleave(paths)
    drawn = _simulate(batch, scorer.rows(branch), branch,
                      torch.full((len(branch), length), -1, dtype=torch.long))
    log_factor = torch.zeros(B, dtype=torch.float64)
    iterations = torch.zeros(B, dtype=torch.long)
    stopped = torch.zeros(B, dtype=torch.bool)
    while True:
        levels = drawn.levels.view(B, paths)
        level = levels.kthvalue(cut, dim=1).values  # the cut Z per branch
        killed = levels <= level[:, None]
        count = killed.sum(1)
        active = (level < 0) & (count < paths)
        if budgets is not None:  # stop where the next iteration could overrun the budget
            left = (torch.as_tensor(list(budgets)) - batch.task_calls())[batch.branch_task]
            stopped |= active & (left < count * length)
            active &= ~stopped
        if not active.any():
            break
        log_factor += torch.where(active, torch.log1p(-count.double() / paths), 0.0)
        iterations += active.long()
        rows = (killed & active[:, None]).flatten().nonzero().flatten()
        forced = _copies(drawn, level, killed, rows, paths, batch.generator)
        drawn.replace(rows, _simulate(batch, scorer.rows(branch[rows]), branch[rows], forced))
    share = drawn.in_query.view(B, paths).double().mean(1)  # 0 where the cut killed them all
    log_value = torch.where(share == 0, -math.inf, log_factor + share.log())
    extras = [{"paths": paths, "iterations": int(iterations[b].sum()),
               "stopped": bool(stopped[b].any())} for b in batch.task_branches()]
    counts = torch.full((B,), paths, dtype=torch.long)
    return Answer(BranchResult(log_value, None, counts, None), extras=extras)


def _paths_for(budgets: Budgets, lengths: list[int], kill: float) -> list[int]:
    """Paths per task that its budget pays for (at least two): N paths of its query's length
    in calls, and the copies of BUDGETED_DECADES decades of p (a decade takes
    ln 10 / −ln(1 − kill) iterations, each re-drawing a `kill` share of the paths in full: a
    copy replays its prefix)."""
    redraws = BUDGETED_DECADES * kill * math.log(10) / -math.log1p(-kill)
    out = []
    for budget, length in zip(budgets, lengths, strict=True):
        if budget - 1 < 2 * length:
            raise cannot_buy(int(budget), 1 + 2 * length, "two GAMS paths")
        out.append(max(2, int((budget - 1) // (length * (1 + redraws)))))  # small: stops early
    return out


def _copies(drawn: Paths, level: Tensor, killed: Tensor, rows: Tensor, paths: int,
            generator: torch.Generator) -> Tensor:
    """For each killed row (flat index into [B, paths]), the prefix it restarts from: a
    uniformly chosen survivor of its branch up to and including its first prefix above the
    cut; −1 where the copy draws anew."""
    branch = rows // paths
    survivors = ~killed[branch]  # [n, paths]
    alive = survivors.sum(1)
    pick = (torch.rand(len(rows), generator=generator, dtype=torch.float64,
                       device=generator.device).cpu() * alive).long().clamp_max(alive - 1)
    column = torch.searchsorted(survivors.long().cumsum(1), (pick + 1)[:, None]).squeeze(1)
    source = branch * paths + column
    above = drawn.scores[source] > level[branch][:, None]
    first = above.double().argmax(1)  # exists: the survivor's level is above the cut
    depth = torch.arange(drawn.tokens.shape[1])
    return torch.where(depth[None, :] <= first[:, None], drawn.tokens[source], -1)


def _simulate(batch: Batch, scorer: SurrogateTwist, branch: Tensor, forced: Tensor) -> Paths:
    """Paths of the given branches drawn from the model until their query is decided, each
    following `forced` symbols where given (≥ 0): symbols, the score of every prefix, and
    whether the path lies in Q."""
    lattice, device = batch.lattice, batch.device
    R, L = forced.shape
    tokens = torch.full((R, L), -1, dtype=torch.long)
    scores = torch.full((R, L), -math.inf, dtype=torch.float64)
    in_query = torch.zeros(R, dtype=torch.bool)
    rows = torch.arange(R)
    node = batch.branch_root[branch]
    prefix = batch.branch_task[branch]  # each row's evaluated prefix: its task's history
    log_probs, state = batch.root_log_probs, batch.root_state
    for depth in range(L):
        row_log_probs = log_probs[prefix.to(device)]
        drawn = torch.multinomial(row_log_probs.float().exp(), 1, generator=batch.generator)[:, 0]
        token = torch.where(forced[rows, depth] >= 0, forced[rows, depth], drawn.cpu())
        child = lattice.advance(node, token)
        score = scorer.log_values(node)[torch.arange(len(rows), device=device),
                                        token.to(device)].double().cpu()
        holds = (child >= 0) & lattice.free[child.clamp_min(0)]
        tokens[rows, depth] = token
        scores[rows, depth] = torch.where(child < 0, -math.inf, torch.where(holds, 0.0, score))
        in_query[rows[holds]] = True
        going = ((child >= 0) & ~holds).nonzero().flatten()
        if not len(going) or depth == L - 1:
            break
        rows, node, token, prefix = rows[going], child[going], token[going], prefix[going]
        scorer = scorer.select(going.to(device)).advance(token)
        prefix, log_probs, state = extend(batch, state, prefix, token)
    return Paths(tokens, scores, in_query)


METHODS = (Method(
    name="gams", run=gams, options=SplittingOptions, guarantee=Guarantee.UNBIASED,
    surrogate="optional", replicates=8, log_replicates=True),)
