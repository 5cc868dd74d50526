"""Twisted importance sampling: the restricted proposal steered by a cheap surrogate's chance of
completing the query (seed-notes §3, F5).

The restricted proposal q (Eq. 5) looks one step ahead only: for p(τ(a) = K) it walks happily
into prefixes from which `a` at step K is unlikely. The optimal proposal is
p(x_k | x_<k)·P(X_{k+1:L} ∈ V_{k+1} × … × V_L | x_≤k). The twist replaces the second factor by
β_{k+1}, the same probability under a surrogate whose future can be summed exactly: any
`ContextAutomaton` (an HPYP / interpolated Kneser–Ney n-gram from `fit_surrogate`, a
`MarkovModel`). One backward DP per product over the surrogate's C context states gives it for
every state, with no model calls:

    β_{L+1} = 1,    β_k(c) = Σ_{x ∈ V_k} p_s(x | c) · β_{k+1}(next(c, x)).

Samples come from q̃(x_k | x_<k) ∝ p(x_k | x_<k)·1[x_k ∈ V_k]·β_{k+1}(next(c_k, x_k)) and carry
the exact weight p/q̃ = Π_k Z_k / β_{k+1}(next(c_k, x_k)), Z_k = Σ_{x ∈ V_k} p(x | x_<k)
β_{k+1}(next(c_k, x)): unbiased for any surrogate, zero variance when the surrogate is the model.
A sample costs the same calls as one of `importance`. `smc` runs on the same twist.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from seqq.errors import QueryError
from seqq.estimators.batch import Batch, effective_lengths, subset
from seqq.estimators.estimate import Estimate
from seqq.estimators.montecarlo import weighted_samples
from seqq.models.automaton import ContextAutomaton
from seqq.models.hpyp import HPYPModel
from seqq.models.markov import MarkovModel

MESSAGE_ELEMENTS = 2**25  # float64 message values held at once (256 MB); more run in task groups
STEP_ELEMENTS = 2**24  # products × C × V gathered at once by one DP step
LOG_FLOOR = -69.0  # log twists are clipped at 1e-30 of a step's largest: a surrogate that rules a
# path out must not stop the proposal from drawing it, or the estimate would lose that path's mass
DEFAULT_ORDER = 5  # HPYP order of `fit_surrogate`: 4 symbols of context
SURROGATE_TABLE = 2**27  # worst-case C × V of a surrogate `fit_surrogate` picks its order for


def fit_surrogate(sequences: Sequence[Sequence[int]], vocab: Sequence[str],
                  order: int | None = None) -> ContextAutomaton:
    """The twist's surrogate, fitted in seconds: an HPYP model with Kneser–Ney seating (an
    interpolated-KN n-gram) of `order` n ≥ 2. `order=None` takes the largest n ≤ DEFAULT_ORDER
    whose worst-case table (every training context seen, C ≤ 1 + Σ_{L<n} min(V^L, tokens))
    stays within SURROGATE_TABLE entries; when not even a bigram fits (GPT-2's vocabulary) it
    is i.i.d., whose flat twist makes `twisted` plain importance sampling."""
    V = len(vocab)
    if order is not None:
        return HPYPModel.fit(sequences, vocab, order)
    tokens = sum(len(s) for s in sequences)
    for n in range(DEFAULT_ORDER, 1, -1):
        if (1 + sum(min(V**L, tokens) for L in range(1, n))) * V <= SURROGATE_TABLE:
            return HPYPModel.fit(sequences, vocab, n)
    return MarkovModel.iid(torch.ones(V))


def twisted(batch: Batch, budgets: Sequence[int] | None, samples: int | None = None,
            surrogate: ContextAutomaton | None = None) -> list[Estimate]:
    """Importance sampling from the restricted proposal twisted by `surrogate`'s backward
    messages; S samples per product, each costing what an `importance` sample costs. A
    one-state surrogate cannot tell futures apart, so it gives plain importance sampling."""
    check_surrogate(batch, surrogate, "twisted")
    if surrogate.num_contexts == 1:
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


def check_surrogate(batch: Batch, surrogate: ContextAutomaton | None, method: str) -> None:
    if surrogate is None:
        raise QueryError(f"method {method!r} needs surrogate=<ContextAutomaton>; fit one on "
                         "training sequences with seqq.estimators.twisted.fit_surrogate("
                         "sequences, vocab)")
    if not isinstance(surrogate, ContextAutomaton):
        raise QueryError(f"{method}: the surrogate must be a ContextAutomaton (HPYPModel, "
                         f"MarkovModel), got {type(surrogate).__name__}")
    if surrogate.vocab_size != batch.vocab_size:
        raise QueryError(f"the surrogate has {surrogate.vocab_size} symbols but the model has "
                         f"{batch.vocab_size}; fit it on sequences of the model's vocabulary")


def message_cells(batch: Batch, surrogate: ContextAutomaton) -> int:
    """Message values one branch may need: K × C (fewer when products repeat)."""
    return batch.masks.shape[1] * surrogate.num_contexts


def task_groups(batch: Batch, surrogate: ContextAutomaton) -> list[Tensor]:
    """Consecutive tasks whose messages (products × K × C values) take about
    `MESSAGE_ELEMENTS` at most; usually one group, many for e.g. count queries at large K."""
    per_task = torch.bincount(batch.branch_task, minlength=batch.num_tasks)
    per_task = per_task * message_cells(batch, surrogate)
    bucket = (torch.cumsum(per_task, 0) - per_task) // MESSAGE_ELEMENTS
    sizes = torch.unique_consecutive(bucket, return_counts=True)[1]
    return list(torch.arange(batch.num_tasks).split(sizes.tolist()))


@dataclass(frozen=True)
class SurrogateTwist:
    """The `Twist` of some rows: each row's product and surrogate context state; with the next
    symbol x they name the state next(c, x) whose β is the twist of x."""

    log_beta: Tensor  # [U, K, C] float64, see `Messages`
    next_context: Tensor  # [C, V] the surrogate's transitions, on the same device
    product: Tensor  # [R]
    context: Tensor  # [R]

    def log_values(self, depth: int) -> Tensor:
        return self.log_beta[self.product[:, None], depth, self.next_context[self.context]]

    def select(self, index: Tensor) -> SurrogateTwist:
        index = index.to(self.product.device)
        return replace(self, product=self.product[index], context=self.context[index])

    def advance(self, drawn: Tensor) -> SurrogateTwist:
        return replace(self, context=self.next_context[self.context, drawn.to(self.context.device)])


@dataclass(frozen=True)
class Messages:
    """Backward messages of a batch's distinct products under a surrogate automaton.

    `log_beta[u, d, c]` = log β_{d+2}(c): the twist of symbol x when sampling depth d from
    state c' is log_beta[u, d, next(c', x)], up to a constant per (u, d) that cancels in q̃, in
    the IS weight and in SMC's telescoping incremental weights."""

    log_beta: Tensor  # [U, K, C] float64, on the model's device
    next_context: Tensor  # [C, V] long, on the model's device
    product: Tensor  # [N] distinct product of each branch
    context: Tensor  # [N] surrogate state after each branch's history

    @classmethod
    def of(cls, batch: Batch, surrogate: ContextAutomaton) -> Messages:
        device = batch.device
        masks, product = torch.unique(batch.masks.flatten(1), dim=0, return_inverse=True)
        masks = masks.view(-1, *batch.masks.shape[1:])
        next_context = surrogate.next_context.to(device)
        log_beta = backward_messages(surrogate.log_table.exp().to(device), next_context, masks)
        context = start_contexts(surrogate, batch.histories).to(device)
        return cls(log_beta, next_context, product, context[batch.branch_task.to(device)])

    def rows(self, branch: Tensor) -> SurrogateTwist:
        branch = branch.to(self.product.device)
        return SurrogateTwist(self.log_beta, self.next_context, self.product[branch],
                              self.context[branch])


def backward_messages(probs: Tensor, next_context: Tensor, masks: Tensor) -> Tensor:
    """log β_{d+2} per product and depth d as [U, K, C] (see `Messages`), by the backward DP
    over the surrogate's states (`probs` p_s(x | c) [C, V], `next_context` [C, V]); from each
    product's last restricted position on, β = 1 exactly. Each depth is rescaled to max 1,
    which keeps long horizons from underflowing."""
    (U, K, V), C = masks.shape, len(probs)
    log_beta = torch.zeros(U, K, C, dtype=torch.float64, device=probs.device)
    if not U:
        return log_beta
    lengths = effective_lengths(masks.cpu()).to(probs.device)
    chunk = max(1, STEP_ELEMENTS // (C * V))
    beta = torch.ones(U, C, dtype=torch.float64, device=probs.device)  # β_{d+2}
    for d in range(int(lengths.max()) - 1, 0, -1):  # β_{d+1}(c) from β_{d+2}, V_{d+1} = masks[:, d]
        beta = torch.cat([_backward_step(part, m, probs, next_context) for part, m in
                          zip(beta.split(chunk), masks[:, d].double().split(chunk), strict=True)])
        beta = beta / beta.amax(1, keepdim=True).clamp_min(torch.finfo(beta.dtype).tiny)
        beta = torch.where((lengths <= d)[:, None], 1.0, beta)  # V_{d+1}, … all free
        log_beta[:, d - 1] = beta.log().clamp_min(LOG_FLOOR)
    return log_beta


def _backward_step(beta: Tensor, domain: Tensor, probs: Tensor, next_context: Tensor) -> Tensor:
    """Σ_{x ∈ domain} p_s(x | c)·β(next(c, x)) for every state c and product row: one gather
    and one batched mat-vec, no temporaries beyond the gathered [u, C, V]."""
    gathered = beta[:, next_context.flatten()].view(len(beta), *next_context.shape).mul_(probs)
    return torch.bmm(gathered, domain[:, :, None])[..., 0]


def start_contexts(surrogate: ContextAutomaton, histories: Sequence[Sequence[int]]) -> Tensor:
    """The surrogate's state after each history. An order-n `MarkovModel` needs n symbols, so
    shorter histories are left-padded with symbol 0 (`<BOS>` where the vocabulary has one): any
    choice keeps the estimate exact, the twist only guides."""
    width = surrogate.order if isinstance(surrogate, MarkovModel) else 0
    padded = [[0] * (width - len(h)) + list(h) for h in histories]
    return surrogate.initial_state(padded)[1]
