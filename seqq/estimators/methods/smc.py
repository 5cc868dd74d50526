"""Sequential Monte Carlo on the restricted proposal, with ESS-triggered resampling.

Each task's query (branch) runs P particles. At depth k a particle at prefix x_<k gains the
incremental weight p(V_k | x_<k) (known before x_k is drawn, so resampling on it is fully adapted), the branch
resamples when the effective sample size falls below `ess_threshold`·P, and x_k is drawn from
q(· | x_<k) ∝ p(· | x_<k)·1[· ∈ V_k]. The estimate of p(Q_i) is the standard SMC normalising
constant: the product, over the stretches between resamplings, of the mean accumulated weight.
It is unbiased: Σ_particles weight × p(rest of Q | prefix) is a martingale through weighting,
resampling and extension, and equals the estimate at the end.

With a `surrogate`, particles target p(x_≤k)·1[x_≤k ∈ Q_≤k]·β_{k+1}(c_k) (twisted.py's backward
messages) and move by the twisted proposal q̃ ∝ p·1[V_k]·β_{k+1}(next(c, ·)); the incremental
weight is then Z_k / β_k(c_{k−1}), Z_k = Σ_{V_k} p·β_{k+1}(next(c_{k−1}, ·)), still known before
x_k is drawn. Resampling follows particles likely to complete the query, not only those whose
prefix is likely. The weights telescope to twisted IS's p/q̃, so the estimate stays unbiased.

Particles on one prefix are identical (same state, same weight), so they are stored once, as a
row with a count, and the model is called once per distinct prefix of a task (engine/advance.py).
Resampling and extension use systematic sampling (resample.py), which keeps each expected count
exact.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.estimators.engine.advance import extend
from seqq.estimators.engine.batch import Batch, prefix_reach
from seqq.estimators.engine.budget import (
    CAP_FACTOR,
    ROUND_SHARE,
    particles_within,
    widths_for_budget,
)
from seqq.estimators.engine.categorical import Categorical
from seqq.estimators.engine.distinct import distinct
from seqq.estimators.engine.memory import consecutive_groups, rows_within
from seqq.estimators.engine.resample import resample_groups
from seqq.estimators.engine.rollout import gather_rows, split_ending
from seqq.estimators.engine.summary import BranchResult, group_logsumexp
from seqq.estimators.engine.twist import Messages, SurrogateTwist, twist_rows
from seqq.estimators.method import (
    FRACTION,
    POSITIVE,
    Answer,
    Budgets,
    Guarantee,
    Method,
    Options,
    option,
)
from seqq.models.counting import OwnedState

DEFAULT_PARTICLES = 1000
DEFAULT_ESS_THRESHOLD = 0.5


@dataclass(frozen=True)
class SMCOptions(Options):
    particles: int | None = option(None, POSITIVE, "particles per query (1000); caps a budget's")
    ess_threshold: float = option(DEFAULT_ESS_THRESHOLD, FRACTION,
                                  "resample when ESS < this × particles")


def smc(batch: Batch, budgets: Budgets, options: SMCOptions, twist: Messages | None) -> Answer:
    """SMC estimate of p(Q) with `particles` per query. With a budget it runs in passes: the
    first with the most particles whose worst case (one call per particle per step, at most
    |prefixes| per step) fits it, splitting them into more whenever shared prefixes leave calls
    unspent; each later pass with what `ROUND_SHARE` of the calls left buys at the previous
    pass's observed cost per particle, as long as that at least doubles the particles
    (`particles`, else `CAP_FACTOR` × the budget, caps a pass; extras["particles"] is the sum
    over passes). A pass that would overrun the budget is dropped. The estimate is the mean of
    the passes' estimates weighted by their particles; each pass is unbiased given its size.
    `ess_threshold` in [0, 1]: 0 never resamples (stratified importance sampling), 1 resamples
    whenever the weights are uneven. stderr is None: SMC has no simple unbiased variance
    estimate (its particles are dependent); the driver compares replicates instead. A twist
    steers proposal and weights by the surrogate's chance of completing the query."""
    N = len(batch.branch_task)
    if budgets is None:
        counts = torch.full((N,), options.particles or DEFAULT_PARTICLES)
        log_value, resamplings, counts, _ = _pass(batch, counts, torch.ones(N, dtype=torch.bool),
                                                  options.ess_threshold, None, twist)
        return _answer(batch, log_value, resamplings, counts, torch.ones(N, dtype=torch.long))
    budget = torch.as_tensor(list(budgets))
    cap = options.particles or CAP_FACTOR * max(budgets)
    counts = widths_for_budget(batch, budgets, cap, "one particle")
    log_sum = torch.full((N,), -torch.inf, dtype=torch.float64)  # Σ_passes P·p̂
    total = torch.zeros(N, dtype=torch.long)
    resamplings = torch.zeros(N, dtype=torch.long)
    passes = torch.zeros(N, dtype=torch.long)
    active = torch.ones(N, dtype=torch.bool)
    while active.any():
        before = batch.task_calls()
        log_value, resampled, final, dropped = _pass(batch, counts, active, options.ess_threshold,
                                                     (budget, cap), twist)
        kept = active & ~dropped
        log_sum = torch.where(kept, torch.logaddexp(log_sum, log_value + final.double().log()),
                              log_sum)
        total += torch.where(kept, final, 0)
        resamplings += torch.where(kept, resampled, 0)
        passes += kept.long()
        spent = (batch.task_calls() - before)[batch.branch_task].double()
        left = (budget - batch.task_calls())[batch.branch_task].double()
        wanted = torch.floor(final * ROUND_SHARE * left / spent.clamp_min(1))
        counts = wanted.clamp_max(cap).long()
        active = kept & (counts >= 2 * final)
    return _answer(batch, log_sum - total.double().log(), resamplings, total, passes)


def _answer(batch: Batch, log_value: Tensor, resamplings: Tensor, particles: Tensor,
            passes: Tensor) -> Answer:
    extras = [{"particles": particles[b].tolist(), "resamplings": resamplings[b].tolist(),
               "passes": passes[b].tolist()} for b in batch.task_branches()]
    return Answer(BranchResult(log_value, None, particles, None), extras=extras)


def _pass(batch: Batch, counts: Tensor, active: Tensor, ess_threshold: float,
          budget: tuple[Tensor, int] | None, twist: Messages | None
          ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One SMC pass of the `active` branches, `counts` particles each, in task groups bounded
    in memory: log p̂, resamplings, final particles and whether the pass was dropped (it would
    have overrun the budget), per branch."""
    N = len(batch.branch_task)
    log_value = torch.full((N,), -torch.inf, dtype=torch.float64)
    resamplings = torch.zeros(N, dtype=torch.long)
    final = counts.clone()
    dropped = torch.zeros(N, dtype=torch.bool)
    per_task = [b[active[b]] for b in batch.task_branches()]
    # a branch's rows (distinct prefixes) at a step: at most its particles or its prefixes
    rows_bound = torch.minimum(counts.double(), prefix_reach(batch).amax(-1).clamp_min(1))
    loads = [int(rows_bound[b].sum()) for b in per_task]
    for tasks in consecutive_groups(loads, rows_within(batch.vocab_size)):
        branches = torch.cat([per_task[t] for t in tasks.tolist()])
        if not len(branches):
            continue  # only empty queries here: p = 0
        part = _branches(batch, branches)
        rows = None if twist is None else twist.rows(branches)
        (log_value[branches], resamplings[branches], final[branches],
         dropped[branches]) = _run(part, counts[branches], ess_threshold, budget, rows)
    return log_value, resamplings, final, dropped


def _branches(batch: Batch, branches: Tensor) -> Batch:
    """The batch limited to some branches; tasks keep their ids (and their call counts)."""
    return dataclasses.replace(batch, branch_task=batch.branch_task[branches],
                               branch_root=batch.branch_root[branches],
                               lengths=batch.lengths[branches])


def _run(batch: Batch, particles: Tensor, ess_threshold: float,
         budget: tuple[Tensor, int] | None, twist: SurrogateTwist | None
         ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """log p̂, the number of resamplings, the final particles and whether the run was dropped
    (its next step would have overrun its task's budget), per branch of `batch`; `twist` holds
    one row per branch, as the particle rows start.

    A symbol that decides the query (its lattice child is free) ends the path: that mass is
    added to the estimate exactly at once (the SMC measure of the current particles is unbiased
    for any test function, here p(ending symbols | prefix)), and particles move on only along
    symbols that leave the query undecided."""
    N, device, lattice = len(batch.branch_task), batch.device, batch.lattice
    reach = None if budget is None else prefix_reach(batch)
    log_z = torch.zeros(N, dtype=torch.float64)  # Σ log mean weight at the resamplings so far
    log_total = torch.full((N,), -torch.inf, dtype=torch.float64)  # the estimate, as it grows
    resamplings = torch.zeros(N, dtype=torch.long)
    dropped = torch.zeros(N, dtype=torch.bool)
    # one row per distinct prefix of a branch: its branch, particle count, log weight since the
    # last resampling, lattice node, and the evaluated prefix it sits on
    branch = torch.arange(N)
    count = particles.clone()
    log_w = torch.zeros(N, dtype=torch.float64)
    log_twist: Tensor | float = 0.0  # per row, log ψ of its last draw
    node = batch.branch_root.clone()
    prefix = batch.branch_task.clone()
    log_probs, state = batch.root_log_probs, batch.root_state
    depth = 0
    while len(branch):
        row_log_probs = gather_rows(log_probs, prefix)
        # ψ = 1 on the ending symbols: their mass is added untwisted
        log_end, continuing = split_ending(batch, node, row_log_probs, sparse=True)
        guide = None if twist is None else twist.log_values(node)
        steered = row_log_probs if guide is None else row_log_probs + guide
        extension = Categorical.from_logits(steered, continuing)
        log_cont = extension.log_total()
        source = torch.arange(len(branch), device=device)  # each row's row of `extension`
        log_w = log_w - log_twist
        log_c = count.double().log()
        log_total = torch.logaddexp(log_total, log_z + group_logsumexp(
            log_w + log_end + log_c, branch, N) - particles.double().log())
        log_w = log_w + log_cont.double().cpu()
        live = torch.isfinite(log_w).nonzero().flatten()
        if not len(live):
            break
        branch, count, log_w, prefix, node = (x[live] for x in (branch, count, log_w, prefix,
                                                                 node))
        source = source[live.to(device)]
        guide, twist = _keep(guide, twist, live)
        if budget is not None:
            more = particles_within(batch, reach, *budget, depth, branch, particles)
            if (more > particles).any():
                count = _split(branch, count, particles, more, batch.generator)
                particles = more
        log_mean = (group_logsumexp(log_w + count.double().log(), branch, N)
                    - particles.double().log())
        uneven = _ess(log_w, count, branch, N) < ess_threshold * particles
        resample = torch.isfinite(log_mean) & uneven
        if resample.any():
            log_z += torch.where(resample, log_mean, 0.0)
            resamplings += resample.long()
            count, log_w = _resample(branch, count, log_w, resample, particles,
                                     batch.generator)
            kept = (count > 0).nonzero().flatten()
            branch, count, log_w, prefix, node = (x[kept] for x in (branch, count, log_w,
                                                                     prefix, node))
            source = source[kept.to(device)]
            guide, twist = _keep(guide, twist, kept)
        parent, token, count = extension.systematic(count, batch.generator, source)  # by q
        parent, count = parent.cpu(), count.cpu()
        if budget is not None:
            over = _overrun(batch, state, prefix[parent], token.cpu(), budget[0])
            if over.any():  # that task's run is dropped before it spends a call too many
                dropped |= over[batch.branch_task]
                fits = ~over[batch.branch_task[branch[parent]]]
                parent, token, count = parent[fits], token[fits.to(device)], count[fits]
        branch, log_w = branch[parent], log_w[parent]
        node = lattice.advance(node[parent], token.cpu())
        if twist is not None:
            on_device = parent.to(device), token
            log_twist = guide[on_device].cpu()
            twist = twist.select(on_device[0]).advance(token)
        prefix, log_probs, state = extend(batch, state, prefix[parent], token)
        depth += 1
    return log_total, resamplings, particles, dropped


def _overrun(batch: Batch, state: OwnedState, prefix: Tensor, token: Tensor,
             budgets: Tensor) -> Tensor:
    """Per task: would evaluating these (prefix, token) rows cost more calls than are left?"""
    V = batch.vocab_size
    children, _ = distinct(prefix * V + token, len(state.owners) * V)
    owners = batch.root_state.owners  # each task's id in the shared call counter, which in a
    local = torch.full((int(owners.max()) + 1,), -1, dtype=torch.long)  # subset differs from
    local[owners] = torch.arange(len(owners))  # the task's id in this batch
    need = torch.bincount(local[state.owners[children // V]], minlength=len(budgets))
    return need > budgets - batch.task_calls()


def _keep(guide: Tensor | None, twist: SurrogateTwist | None, rows: Tensor
          ) -> tuple[Tensor | None, SurrogateTwist | None]:
    """The twist values and rows of the particle rows kept (`rows` on the CPU)."""
    if twist is None:
        return None, None
    return twist_rows(guide, rows.to(guide.device)), twist.select(rows)


def _split(branch: Tensor, count: Tensor, particles: Tensor, more: Tensor,
           generator: torch.Generator) -> Tensor:
    """Spread `more` particles over each branch's rows ∝ their counts (systematically), keeping
    weights: E[new count] = count·more/particles, so the estimate stays unbiased."""
    ids, sizes = torch.unique_consecutive(branch, return_counts=True)
    return resample_groups(count.double().log(), sizes, more[ids], generator)


def _ess(log_w: Tensor, count: Tensor, branch: Tensor, N: int) -> Tensor:
    """(Σ c·w)² / Σ c·w² per branch, with c particles of weight w per row (0 if no mass)."""
    log_c = count.double().log()
    first = group_logsumexp(log_w + log_c, branch, N)
    second = group_logsumexp(2 * log_w + log_c, branch, N)
    return torch.where(torch.isfinite(first), (2 * first - second).exp(), 0.0)


def _resample(branch: Tensor, count: Tensor, log_w: Tensor, resample: Tensor, particles: Tensor,
              generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Systematic resampling of the rows of the branches flagged in `resample` (rows grouped by
    branch): each such branch draws its P particles ∝ c·w; weights reset to one."""
    rows = resample[branch].nonzero().flatten()
    ids, sizes = torch.unique_consecutive(branch[rows], return_counts=True)
    new_count = resample_groups(log_w[rows] + count[rows].double().log(), sizes, particles[ids],
                                generator)
    count, log_w = count.clone(), log_w.clone()
    count[rows], log_w[rows] = new_count, 0.0
    return count, log_w


METHODS = (Method(
    name="smc", run=smc, options=SMCOptions, guarantee=Guarantee.UNBIASED,
    surrogate="optional", replicates=8, log_replicates=True),)
