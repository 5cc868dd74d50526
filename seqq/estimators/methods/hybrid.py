"""The paper's beam + importance-sampling hybrid (§4.2, App. D).

The hybrid keeps the tail-splitting beam set B exactly and importance-samples Q∖B from
q_B = q(· | ∉ B): the beam tree becomes the prefix trie, B's leaves are removed from it (which
is App. D's pruning), and samples walk the trie, paying only for prefixes outside it. The weight
of a tail sample is p(x)·(1 − q(B)) / q(x) (docs/decisions.md §5), the sum-and-sample estimator
of `engine/sum_and_sample.py` with the beam as its head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.beam_search import Level, TailSplit, beam_search, beam_sizes, leaves
from seqq.estimators.engine.sum_and_sample import head_plus_tail
from seqq.estimators.engine.trie import Trie
from seqq.estimators.engine.twist import Messages
from seqq.estimators.method import POSITIVE, Answer, Budgets, Guarantee, Method, Options, option

DEFAULT_MAX_WIDTH = 1500
DEFAULT_TAIL_SAMPLES = 100


@dataclass(frozen=True)
class HybridOptions(Options):
    samples: int | None = option(None, POSITIVE, "tail samples per query (100)")
    max_width: int = option(DEFAULT_MAX_WIDTH, POSITIVE, "beams per step at most")


def hybrid(batch: Batch, budgets: Budgets, options: HybridOptions,
           twist: Messages | None) -> Answer:
    """p(B) from tail-splitting beam search + IS of p(Q∖B) under the pruned proposal q_B.

    The beam tree becomes the prefix trie with B removed (App. D's pruning), so tail samples
    pay only for prefixes outside the explored tree. `samples` tail samples per query
    (default 100); with a budget, tail samples are drawn until the budget is spent.
    With a twist the tail is drawn from q̃ restricted to Q∖B instead: still unbiased
    (sum-and-sample holds for any tail proposal).
    """
    N = len(batch.branch_task)
    levels = beam_search(batch, TailSplit(torch.full((N,), options.max_width)))
    log_pB, _ = leaves(levels, N)
    trie = Trie.from_beam(batch, levels, twist)
    trie.remove([(d, level.final.nonzero().flatten()) for d, level in enumerate(levels)])
    samples = options.samples
    tail_samples = samples if budgets is not None else samples or DEFAULT_TAIL_SAMPLES
    result, draws = head_plus_tail(trie, budgets, tail_samples, log_pB,
                            _beam_entropy(levels, N), lambda t: (
        f"the beam used {int(batch.task_calls()[t])} of the {int(budgets[t])} model "
        "calls, leaving none for a tail sample"))
    sizes = beam_sizes(levels, N)
    extras = [{"beam_sizes": sizes[b].tolist(), "beam_mass": log_pB[b].exp().sum().item()}
              for b in batch.task_branches()]
    return Answer(result, extras=extras, weights=(draws.row_branch, draws.log_w))


def _beam_entropy(levels: list[Level], num_branches: int) -> Tensor:
    """Σ_{x∈B} q(x)·(−log q(x)) per branch: the beam's exact share of H(q)."""
    total = torch.zeros(num_branches, dtype=torch.float64)
    for level in levels:
        f = level.final.nonzero().flatten()
        total.index_add_(0, level.branch[f], -level.log_q[f].exp() * level.log_q[f])
    return total


METHODS = (Method(
    name="hybrid", run=hybrid, options=HybridOptions, guarantee=Guarantee.UNBIASED,
    surrogate="optional", certain_bounds=True),)
