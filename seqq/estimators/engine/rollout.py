"""Batched ancestral sampling along query lattices: the inner loop of the streaming samplers.

Rows are independent paths, each at a node of its task's query lattice. Per step the rows draw
one symbol, accumulate log p, log q and the importance weight log Π_k p(V_k | x_<k), and only
rows whose query is still undecided pay for another model call. Nothing is cached, so memory
stays bounded by the rows of one step (an estimated ground truth draws millions of paths).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Literal

import torch
from torch import Tensor

from seqq.errors import QueryError
from seqq.estimators.engine.allowance import Charge
from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.categorical import (
    Categorical,
    Domain,
    Excluded,
    few_allowed,
    fill_outside,
    outside_filled,
    unshifted_rows,
)
from seqq.estimators.engine.distinct import distinct
from seqq.estimators.engine.summary import group_logsumexp
from seqq.models.batching import every_row_in_order, map_row_chunks
from seqq.models.protocol import State

Policy = Literal["proposal", "uniform", "model"]


@dataclass
class Paths:
    log_p: Tensor  # [R] float64, log p of the sampled symbols
    log_q: Tensor  # [R] float64, log q of the sampled symbols under the proposal that drew them
    log_weight: Tensor  # [R] float64, log p - log q (Σ_k log p(V_k | x_<k) without a twist)
    accepted: Tensor  # [R] bool, the path reached a free lattice node (it lies in Q)
    # [R, K] float64 with `passages`: log of each path's term in the estimate of p(τ(A) = k)
    # for every k = 1..K (−inf where it adds nothing), A the query's `first_passage`
    log_passage: Tensor | None = None

    def take(self, keep: Tensor) -> Paths:
        return Paths(*(None if (v := getattr(self, f.name)) is None else v[keep]
                       for f in fields(self)))

    @classmethod
    def cat(cls, parts: Sequence[Paths]) -> Paths:
        """The paths of several chunks or rounds, in order."""
        if not parts:
            return cls(*(torch.zeros(0, dtype=torch.float64) for _ in range(3)),
                       torch.zeros(0, dtype=torch.bool))
        return cls(*(None if getattr(parts[0], f.name) is None
                     else torch.cat([getattr(p, f.name) for p in parts]) for f in fields(cls)))


def restrict(log_probs: Tensor, domain: Domain) -> tuple[Tensor, Tensor]:
    """Masked log-probs and log p(V_k | prefix) per row (−inf where the domain has no mass).
    An `Excluded` domain masks a copy with one scatter, instead of a pass that reads an [n, V]
    mask beside the rows; its mass assumes normalised rows (a model's log-probs, not logits
    plus a twist: `log_mass_left`)."""
    masked = outside_filled(log_probs, domain, -torch.inf)
    if isinstance(domain, Excluded):
        return masked, log_mass_left(log_probs, domain)
    return masked, _summed_log_mass(masked)


def domain_log_mass(log_probs: Tensor, domain: Domain) -> Tensor:
    """log p(V_k | prefix) per row of a model's log-probs, without masking a copy of them where
    that can be avoided: an `Excluded` domain's from what it leaves out, a mask of few symbols'
    gathered from their entries (`sparse_log_mass`, float64)."""
    if isinstance(domain, Excluded):
        return log_mass_left(log_probs, domain)
    return sparse_log_mass(log_probs, domain).to(log_probs.device)


def log_mass_left(log_probs: Tensor, excluded: Excluded) -> Tensor:
    """log p(V_k | prefix) per row, in the rows' dtype, where V_k excludes a few symbols. A
    model's rows are normalised (`counting.check_log_probs`), so the mass left is 1 − p(the
    excluded symbols): no exp-and-sum pass over [n, V], a sizeable share of a model step over a
    large vocabulary. Where p(excluded) > ½ the difference would lose digits: those rows are summed.
    The listed symbols of a row must be distinct (each would count once per listing)."""
    symbols = excluded.symbols
    gone = log_probs.gather(1, symbols.clamp_min(0)).double().exp_().mul_(symbols >= 0).sum(-1)
    log_mass = torch.log1p(-gone).to(log_probs.dtype)
    redo = (gone > 0.5).nonzero().flatten()
    if len(redo):
        log_mass[redo] = _summed_log_mass(fill_outside(log_probs[redo], excluded[redo],
                                                       -torch.inf))
    return log_mass


def _summed_log_mass(masked: Tensor) -> Tensor:
    """log Σ exp over each row, summed without a shift (`unshifted_rows`); rows where that is
    inexact are reduced again with torch.logsumexp."""
    mass = masked.exp().sum(-1)
    redo = (~unshifted_rows(mass)).nonzero().flatten()
    log_mass = mass.log_()
    if len(redo):
        log_mass[redo] = torch.logsumexp(masked[redo], -1)
    return log_mass


def sparse_log_mass(log_probs: Tensor, mask: Tensor) -> Tensor:
    """log p(mask | prefix) per row (CPU, float64; −inf where the mask is empty), for masks of
    a few symbols per row, such as those that end a query: gathering them costs one pass over
    the bool mask, far less than masking and reducing [n, V] floats over a large vocabulary
    (docs/performance.md#proposals-over-a-large-vocabulary). A mask over more than
    1/SPARSE_SHARE of the entries is reduced densely."""
    if not few_allowed(mask):
        return restrict(log_probs, mask)[1].double().cpu()
    rows, symbols = mask.nonzero(as_tuple=True)
    return group_logsumexp(log_probs[rows, symbols].double().cpu(), rows.cpu(), len(mask))


def split_ending(batch: Batch, nodes: Tensor, log_probs: Tensor, sparse: bool = False
                 ) -> tuple[Tensor, Domain]:
    """At lattice `nodes` (CPU) with rows `log_probs`: log p(the next symbol decides the query)
    per row (CPU float64, −inf where none does) and the domain of the allowed symbols that
    leave it undecided (`Batch.domain`, sparse if asked). Where no node decides anything, no
    [n, V] mask of ending symbols is built."""
    if not bool(batch.lattice.deciding(nodes).any()):
        return (torch.full((len(nodes),), -torch.inf, dtype=torch.float64),
                batch.domain(nodes, sparse))
    ends = batch.lattice.ending(nodes).to(log_probs.device)
    return sparse_log_mass(log_probs, ends), batch.domain(nodes) & ~ends


def gather_rows(values: Tensor | Excluded, rows: Tensor) -> Tensor | Excluded:
    """values[rows] for CPU `rows`, or `values` itself where rows are 0..n−1 in order: a
    frontier whose rows each extend their own prefix (the usual case) skips an [n, V] copy."""
    if every_row_in_order(rows, len(values)):
        return values
    return values[rows.to(values.device)]


def conditional(masked: Tensor, log_mass: Tensor) -> Tensor:
    """log q(· | prefix) = masked log p − log p(V_k | prefix), in float64; −inf for dead rows."""
    safe = torch.where(torch.isneginf(log_mass), 0.0, log_mass)
    return masked - safe.double()[:, None]  # float64 out of one pass, whatever masked is


def charge_steps(charge: Charge | None, done: Tensor, running: Tensor) -> Tensor:
    """`done` (CPU mask over the running rows) extended by the rows whose next call the
    charge cannot pay for (each not-done row needs one); those rows stop, unaccepted."""
    if charge is None:
        return done
    going = (~done).nonzero().flatten()
    stopped = done.clone()
    stopped[going[~charge.continuing(running[going])]] = True
    return stopped


def step_unfinished(batch: Batch, done: Tensor, running: Tensor, nodes: Tensor, rows: Tensor,
                    drawn: Tensor, state: State) -> tuple[Tensor, Tensor, Tensor, Tensor, State]:
    """The end of a rollout step: drop the rows that are `done` (CPU mask) and call the model
    on the rest with the symbols they drew. Returns (running, nodes, rows, log_probs, state)."""
    keep = None
    if done.any():
        keep = (~done).nonzero().flatten()
        running, nodes = running[keep], nodes[keep]
        keep = keep.to(rows.device)
        rows, drawn = rows[keep], drawn[keep]
    log_probs, state = batch.counter.step(state, drawn, rows=keep)
    return running, nodes, rows, log_probs, state


def rollout(
    batch: Batch,
    nodes: Tensor,
    log_probs: Tensor,
    state: State,
    policy: Policy = "proposal",
    charge: Charge | None = None,
    event: Tensor | None = None,
) -> Paths:
    """Sample every row from its lattice node (`log_probs`/`state` at that prefix) until the
    query is decided: the row reaches a free node (accepted) or, under `policy="model"`, draws
    a symbol the query does not allow (rejected).

    `policy`: "proposal" draws from q ∝ p·1[allowed]; "uniform" draws uniformly among the
    query's decided completions (`log_counts`); "model" draws from p itself (naive Monte
    Carlo). With a `charge` each step's calls are paid in draw order; rows past their task's
    cut stop unaccepted (the caller keeps `charge.kept()`).

    `event` ([R, V] bool on the device, the rows' first-passage sets A of a hitting-time query
    τ(A) = K) also scores every step k ≤ K as if the query ended there (`passage_terms`), so
    the same paths estimate p(τ(A) = k) for every k (`Paths.log_passage`).
    """
    lattice = batch.lattice
    device, R = log_probs.device, len(nodes)
    log_p, log_q, log_weight = (torch.zeros(R, dtype=torch.float64, device=device)
                                for _ in range(3))
    accepted = torch.zeros(R, dtype=torch.bool)
    running = torch.arange(R)  # output rows still sampling (CPU copy for control flow)
    rows = running.to(device)
    log_counts = lattice.log_counts().to(device) if policy == "uniform" else None
    log_passage = None
    if event is not None:
        log_passage = torch.full((R, int(lattice.horizon.max())), -torch.inf,
                                 dtype=torch.float64)
    while len(running):
        if log_passage is not None and policy != "model":
            log_passage[running, lattice.depth[nodes]] = passage_terms(
                batch, log_probs, event[rows], log_weight[rows], policy).cpu()
        if policy == "uniform":
            drawn, step_log_q = _uniform_draw(batch, nodes, log_counts)
            picked = log_probs.gather(1, drawn[:, None])[:, 0].double()
            step_weight = picked - step_log_q
        else:
            proposal = Categorical.from_logits(
                log_probs, None if policy == "model" else batch.domain(nodes, sparse=True))
            drawn = proposal.sample(batch.generator)
            picked = log_probs.gather(1, drawn[:, None])[:, 0].double()
            step_weight = proposal.log_total().double()  # log p(x)/q(x) of this step
            step_log_q = torch.where(torch.isneginf(step_weight), 0.0, picked - step_weight)
        if log_passage is not None and policy == "model":  # τ = k exactly where A is drawn
            hit = event[rows].gather(1, drawn[:, None])[:, 0].cpu()
            log_passage[running[hit], lattice.depth[nodes[hit]]] = 0.0
        log_p[rows] += picked
        log_q[rows] += step_log_q
        log_weight[rows] += step_weight
        nodes = lattice.advance(nodes, drawn.cpu())
        dead = nodes < 0
        done = dead | lattice.free[nodes.clamp_min(0)]
        accepted[running[done & ~dead]] = True
        done = charge_steps(charge, done, running)
        if done.all():
            break
        running, nodes, rows, log_probs, state = step_unfinished(batch, done, running, nodes,
                                                                 rows, drawn, state)
    log_weight = torch.where(accepted.to(device), log_weight, -torch.inf)
    return Paths(log_p.cpu(), log_q.cpu(), log_weight.cpu(), accepted, log_passage)


def passage_terms(batch: Batch, log_probs: Tensor, event: Tensor, log_weight: Tensor,
                  policy: Policy) -> Tensor:
    """log of each row's term for p(τ(A) = k) at its current step k, the path so far having
    avoided A: under the proposal, its weight times p(A | prefix) (the last step of τ(A) = k
    summed exactly, as the restricted proposal's last step is); under the uniform policy, its
    weight times |A|·p(a | prefix) for one a drawn uniformly from A (Eq. 7's last step)."""
    if policy == "proposal":
        return log_weight + sparse_log_mass(log_probs, event).to(log_weight.device)
    choice = Categorical.from_logits(torch.zeros_like(log_probs).masked_fill_(~event, -torch.inf))
    a = choice.sample(batch.generator)
    return log_weight + log_probs.gather(1, a[:, None])[:, 0].double() + choice.log_total().double()


def _uniform_draw(batch: Batch, nodes: Tensor, log_counts: Tensor) -> tuple[Tensor, Tensor]:
    """One symbol per row, drawn with chance ∝ the decided completions below its child, and
    the log of that chance. It depends on the lattice node only, so each distinct node's row
    is built once, and nothing over the model's output is (the model's p only weights)."""
    device = log_counts.device
    lattice_nodes, at = distinct(nodes, len(batch.lattice.free))
    children = batch.lattice.child_table(lattice_nodes.to(device))  # built on the device
    below = torch.where(batch.domain(lattice_nodes), log_counts[children.clamp_min(0)], -torch.inf)
    choice = Categorical.from_logits(below)
    at = at.to(device)
    drawn = choice.sample(batch.generator, at)
    return drawn, below[at, drawn] - choice.log_total()[at]


def sample_rows(batch: Batch, row_branch: Tensor, policy: Policy,
                charge: Charge | None = None, passages: bool = False) -> Paths:
    """Roll out every row from the root of its branch, in row chunks sized for the device
    (which also bound memory; `seqq.models.batching`). With a `charge`, calls are paid in
    draw order (rows past their task's cut stop unaccepted). With `passages`, every branch's
    query is a hitting time and each path also scores every earlier horizon (`rollout`)."""
    events = first_passage_masks(batch) if passages else None

    def run(part: Tensor) -> Paths:
        rows = row_branch[part]
        tasks = batch.branch_task[rows].to(batch.device)
        state = batch.counter.select(batch.root_state, tasks)
        event = None if events is None else events[
            batch.lattice.query[batch.branch_root[rows]].to(batch.device)]
        return rollout(batch, batch.branch_root[rows], batch.root_log_probs[tasks], state,
                       policy, None if charge is None else charge.select(part), event)

    return Paths.cat(map_row_chunks(batch.counter, torch.arange(len(row_branch)), run))


def first_passage_masks(batch: Batch) -> Tensor:
    """[Q, V] bool on the device: the first-passage set A of each of the batch's queries."""
    missing = [q.name for q in batch.queries if q.first_passage is None]
    if missing:
        raise QueryError(f"every horizon in one pass needs hitting-time queries τ(A) = K, "
                         f"got {missing[0]!r}")
    return torch.stack([q.first_passage.mask(batch.vocab_size)
                        for q in batch.queries]).to(batch.device)
