"""Twisted importance sampling: the restricted proposal steered by a cheap Markov surrogate's
chance of completing the query (seed-notes §3, F5).

The restricted proposal q (Eq. 5) looks one step ahead only: for p(τ(a) = K) it walks happily
into prefixes from which `a` at step K is unlikely. The optimal proposal is
p(x_k | x_<k)·P(X_{k+1:L} ∈ V_{k+1} × … × V_L | x_≤k). The twist replaces the second factor by
β_{k+1}, the same probability under a surrogate Markov model (e.g. an n-gram from `fit_ngram`),
which one backward DP per product gives for every surrogate context, with no model calls:

    β_{L+1} = 1,    β_k(c) = Σ_{x ∈ V_k} p_s(x | c) · β_{k+1}(shift(c, x)).

Samples come from q̃(x_k | x_<k) ∝ p(x_k | x_<k)·1[x_k ∈ V_k]·β_{k+1}(shift(c_k, x_k)) and carry
the exact weight p/q̃ = Π_k Z_k / β_{k+1}(shift(c_k, x_k)), Z_k = Σ_{x ∈ V_k} p(x | x_<k)
β_{k+1}(shift(c_k, x)): unbiased for any surrogate, zero variance when the surrogate is the model.
A sample costs the same calls as one of `importance`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from seqq.errors import QueryError
from seqq.estimators.batch import Batch, subset
from seqq.estimators.estimate import Estimate
from seqq.estimators.montecarlo import weighted_samples
from seqq.models.markov import MarkovModel

MESSAGE_ELEMENTS = 2**25  # float64 message values held at once (256 MB); more run in task groups
LOG_FLOOR = -69.0  # log twists are clipped at 1e-30 of a step's largest: a surrogate that rules a
# path out must not stop the proposal from drawing it, or the estimate would lose that path's mass


def twisted(batch: Batch, budgets: Sequence[int] | None, samples: int | None = None,
            surrogate: MarkovModel | None = None) -> list[Estimate]:
    """Importance sampling from the restricted proposal twisted by `surrogate`'s backward
    messages; S samples per product, each costing what an `importance` sample costs. An
    order-0 surrogate cannot tell futures apart, so it gives plain importance sampling."""
    if surrogate is None:
        raise QueryError("method 'twisted' needs surrogate=<MarkovModel>; fit one on training "
                         "sequences with seqq.models.ngram.fit_ngram(sequences, vocab_size)")
    if surrogate.vocab_size != batch.vocab_size:
        raise QueryError(f"the surrogate has {surrogate.vocab_size} symbols but the model has "
                         f"{batch.vocab_size}; fit it on sequences of the model's vocabulary")
    if surrogate.order == 0:
        return weighted_samples(batch, budgets, samples, "twisted")
    estimates = []
    for tasks in task_groups(batch, surrogate):
        part = subset(batch, tasks)
        part_budgets = None if budgets is None else [budgets[t] for t in tasks.tolist()]
        found = weighted_samples(part, part_budgets, samples, "twisted",
                                 Messages.of(part, surrogate).rows)
        # the counter is indexed by the batch's tasks, not the part's
        estimates += [replace(e, model_calls=int(batch.counter.calls[t]))
                      for t, e in zip(tasks.tolist(), found, strict=True)]
    return estimates


def task_groups(batch: Batch, surrogate: MarkovModel) -> list[Tensor]:
    """Consecutive tasks whose messages (products × K × V^n values) take about
    `MESSAGE_ELEMENTS` at most; usually one group, many for e.g. count queries at large K."""
    cells = batch.masks.shape[1] * surrogate.num_contexts
    per_task = torch.bincount(batch.branch_task, minlength=batch.num_tasks) * cells
    bucket = (torch.cumsum(per_task, 0) - per_task) // MESSAGE_ELEMENTS
    sizes = torch.unique_consecutive(bucket, return_counts=True)[1]
    return list(torch.arange(batch.num_tasks).split(sizes.tolist()))


@dataclass(frozen=True)
class SurrogateTwist:
    """The `Twist` of some rows: each row's product and the last n−1 symbols of its surrogate
    context (a base-V id), which with the next symbol x name the context β is read at."""

    log_twist: Tensor  # [U, K, S, V] float64, see `Messages`
    product: Tensor  # [R]
    suffix: Tensor  # [R]

    def log_values(self, depth: int) -> Tensor:
        return self.log_twist[self.product, depth, self.suffix]

    def select(self, index: Tensor) -> SurrogateTwist:
        return replace(self, product=self.product[index], suffix=self.suffix[index])

    def advance(self, drawn: Tensor) -> SurrogateTwist:
        S, V = self.log_twist.shape[2:]
        return replace(self, suffix=(self.suffix * V + drawn) % S)


@dataclass(frozen=True)
class Messages:
    """Backward messages of a batch's distinct products under an order-n surrogate (n ≥ 1).

    `log_twist[u, d, s, x]` = log β_{d+2} of the context (s, x), i.e. the twist of symbol x when
    sampling depth d after a context ending in s, up to a constant per (u, d) that cancels in
    both q̃ and the weight."""

    log_twist: Tensor  # [U, K, S, V] float64, on the model's device
    product: Tensor  # [N] distinct product of each branch
    suffix: Tensor  # [N] the last n−1 symbols of each branch's history (0-padded), base-V id

    @classmethod
    def of(cls, batch: Batch, surrogate: MarkovModel) -> Messages:
        masks, product = torch.unique(batch.masks.cpu().flatten(1), dim=0, return_inverse=True)
        masks = masks.view(-1, *batch.masks.shape[1:])
        length = int(batch.lengths.max()) if len(batch.lengths) else 0  # no products: no work
        log_twist = backward_messages(surrogate, masks, length)
        suffix = suffix_ids(batch.histories, surrogate.order, surrogate.vocab_size)
        device = batch.device
        return cls(log_twist.to(device), product.to(device),
                   suffix[batch.branch_task].to(device))

    def rows(self, branch: Tensor) -> SurrogateTwist:
        branch = branch.to(self.product.device)
        return SurrogateTwist(self.log_twist, self.product[branch], self.suffix[branch])


def backward_messages(surrogate: MarkovModel, masks: Tensor, length: int) -> Tensor:
    """log β_{d+2} per product and depth d as [U, K, S, V] (see `Messages`), by the backward DP
    over all V^n surrogate contexts; positions from `length` on are free, so β = 1 there.
    Each depth is rescaled to max 1, which keeps long horizons from underflowing."""
    V, n = surrogate.vocab_size, surrogate.order
    S = V ** (n - 1)
    table = surrogate.log_table.exp().view(V, S, V)  # p_s(x | c) with c = (oldest a, rest s)
    U, K = masks.shape[:2]
    log_twist = torch.zeros(U, K, S, V, dtype=torch.float64)
    beta = torch.ones(U, S, V, dtype=torch.float64)  # β_{d+2}, indexed by its context (s, x)
    for d in range(min(length, K) - 1, 0, -1):
        flow = masks[:, d, None, :] * beta  # β_{d+2}(s, x)·1[x ∈ V_{d+1}]
        beta = torch.einsum("asx,usx->uas", table, flow).reshape(U, S, V)  # β_{d+1}(c), c = (a, s)
        beta = beta / beta.amax((1, 2), keepdim=True).clamp_min(torch.finfo(beta.dtype).tiny)
        log_twist[:, d - 1] = beta.log().clamp_min(LOG_FLOOR)
    return log_twist


def suffix_ids(histories: Sequence[Sequence[int]], order: int, vocab_size: int) -> Tensor:
    """Base-V id of each history's last order−1 symbols, left-padded with symbol 0 (`<BOS>`
    where the vocabulary has one) when the history is shorter: any choice keeps the estimate
    exact, the twist only guides."""
    width = order - 1
    tails = [([0] * width + [int(s) for s in h])[len(h):] if width else [] for h in histories]
    powers = vocab_size ** torch.arange(width - 1, -1, -1, dtype=torch.long)
    return (torch.tensor(tails, dtype=torch.long).view(len(histories), width) * powers).sum(-1)
