"""Sampling estimators: importance sampling under the restricted (or twisted) proposal (Eq. 5-9),
drawn through the prefix trie; naive Monte Carlo from p and uniform Monte Carlo over Q (Eq. 7),
rolled out without a trie (their paths ignore q, so a cached q-tree would not serve them).
All tasks' samples run in shared batches. Each declares the one pass that answers every horizon
of a hitting time (`horizons.every_horizon`); importance also declares ground truth's samplers,
which draw as it does and stop on their own error (`adaptive_importance.py`, and
`horizons.every_horizon_truths`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.estimators.adaptive_importance import adaptive_importance, streamed_importance
from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.budget import draw_in_rounds, iid_draws
from seqq.estimators.engine.rollout import Paths, Policy, sample_rows
from seqq.estimators.engine.summary import BranchResult, segment_average, segment_mean
from seqq.estimators.engine.trie import Trie
from seqq.estimators.engine.twist import Messages
from seqq.estimators.horizons import every_horizon, every_horizon_truths
from seqq.estimators.method import (
    POSITIVE,
    Adaptive,
    Answer,
    Budgets,
    Guarantee,
    Method,
    Options,
    option,
)


@dataclass(frozen=True)
class SampleOptions(Options):
    samples: int | None = option(None, POSITIVE, "samples per query (1000); caps a budget's")


def _streamed_draws(batch: Batch, budgets: Sequence[int] | None, samples: int | None,
                    policy: Policy) -> tuple[Tensor, Paths]:
    return draw_in_rounds(batch, budgets, samples,
                          lambda rows, charge: sample_rows(batch, rows, policy, charge))


def importance(batch: Batch, budgets: Budgets, options: SampleOptions,
               twist: Messages | None) -> Answer:
    """p̂ = mean p(x)/q(x), x ~ q i.i.d.; the weight is Π_k p(V_k | x_<k).

    Paths are drawn through the prefix trie, so a prefix shared by several samples costs one
    call. `samples` per query (default 1000); with a budget, draws continue in rounds until
    the budget is spent (`samples` then caps the count), so duplicates buy extra samples.
    With a twist, x ~ q̃ ∝ p·1[allowed]·β (the surrogate's chance of completing the query
    steers every step) and the weights p/q̃ stay exact.
    """
    trie = Trie(batch, twist)
    eligible = torch.ones(len(batch.branch_task), dtype=torch.bool)
    draws = iid_draws(trie, budgets, options.samples, "proposal", eligible)
    N = len(batch.branch_task)
    log_value, variance, count = segment_mean(draws.log_w, draws.row_branch, N)
    entropy = segment_average(-draws.log_q, draws.row_branch, N)
    return Answer(BranchResult(log_value, variance, count.long(), entropy),
                  weights=(draws.row_branch, draws.log_w))


def uniform(batch: Batch, budgets: Budgets, options: SampleOptions, twist: None) -> Answer:
    """p̂ = |Q| · mean p(x), x ~ U(Q) (Eq. 7), with |Q| counted on the query's lattice up to
    the point where each path is decided; unbiased but may exceed 1."""
    row_branch, paths = _streamed_draws(batch, budgets, options.samples, "uniform")
    # a uniform path's weight p(x)/q(x) is p(x)·|Q below its root|
    log_value, variance, count = segment_mean(paths.log_weight, row_branch,
                                              len(batch.branch_task))
    return Answer(BranchResult(log_value, variance, count.long(), None),
                  weights=(row_branch, paths.log_weight))


def naive(batch: Batch, budgets: Budgets, options: SampleOptions, twist: None) -> Answer:
    """p̂ = mean 1[x ∈ Q], x ~ p, each path sampled only until the query is decided; zero for
    rare queries."""
    row_branch, paths = _streamed_draws(batch, budgets, options.samples, "model")
    log_w = torch.where(paths.accepted, 0.0, -torch.inf).double()
    log_value, variance, count = segment_mean(log_w, row_branch, len(batch.branch_task))
    return Answer(BranchResult(log_value, variance, count.long(), None),
                  weights=(row_branch, log_w))


METHODS = (
    Method(name="naive", run=naive, options=SampleOptions, guarantee=Guarantee.UNBIASED,
           horizons=every_horizon("model")),
    Method(name="uniform", run=uniform, options=SampleOptions, guarantee=Guarantee.UNBIASED,
           horizons=every_horizon("uniform")),
    Method(name="importance", run=importance, options=SampleOptions,
           guarantee=Guarantee.UNBIASED, horizons=every_horizon("proposal"),
           adaptive=Adaptive(adaptive_importance, streamed_importance, every_horizon_truths)),
    Method(name="twisted", run=importance, options=SampleOptions, guarantee=Guarantee.UNBIASED,
           surrogate="required"),
)
