"""Sum-and-sample (001 Eq. 4): a head S of distinct paths of Q summed exactly, the rest importance
sampled from the residual q(· | ∉ S):  p̂ = p(S) + (1 − q(S)) · mean p(x)/q(x),  x ~ q(· | ∉ S).

It is unbiased for *any* head, however it was chosen (beam search for the hybrid, WOR draws for
`wor`), because the tail draws are fresh given S. When S exhausts Q the estimate is exact. The
head also gives bounds that hold with certainty: p(S) ≤ p(Q) ≤ p(S) + 1 − q(S) (Thm. 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from seqq.estimators.engine.budget import Draws, iid_draws
from seqq.estimators.engine.summary import BranchResult, segment_average, segment_mean
from seqq.estimators.engine.trie import Trie


def head_plus_tail(trie: Trie, budgets: Sequence[int] | None, samples: int | Tensor | None,
                   log_head: Tensor, head_entropy: Tensor,
                   too_small: Callable[[int], str] | None = None,
                   active: Tensor | None = None) -> tuple[BranchResult, Draws]:
    """p(S) + R·mean w over tail draws from the trie's residual (S already removed from it).

    `log_head` is log p(S) per branch, `head_entropy` Σ_{x∈S} −q log q; R = the root's
    residual mass. Branches whose residual is empty are exact (variance 0); only `active`
    branches (default all) draw. Returns the result and the tail draws."""
    log_rest = trie.root_residual()
    eligible = torch.isfinite(log_rest) if active is None else torch.isfinite(log_rest) & active
    draws = iid_draws(trie, budgets, samples, "residual", eligible, too_small)
    return combine(log_head, head_entropy, log_rest, draws), draws


def combine(log_head: Tensor, head_entropy: Tensor, log_rest: Tensor, draws: Draws
            ) -> BranchResult:
    """The sum-and-sample estimate per branch from its head sums and its tail draws."""
    N = len(log_head)
    log_tail, var_tail, count = segment_mean(draws.log_w, draws.row_branch, N)
    has_tail = count > 0
    log_value = torch.where(has_tail, torch.logaddexp(log_head, log_rest + log_tail), log_head)
    variance = torch.where(has_tail, var_tail * torch.exp(2 * log_rest), 0.0)
    tail_entropy = segment_average(-draws.log_q, draws.row_branch, N)
    entropy = head_entropy + torch.where(has_tail, log_rest.exp() * tail_entropy, 0.0)
    return BranchResult(log_value, variance, count.long(), entropy, log_head, log_rest)
