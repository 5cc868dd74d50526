"""The restricted proposal q at the nodes of a twisted trie, and H(q) estimated from q̃'s draws.

A twisted trie keeps the masses of q̃ (`proposals.py`); the restricted entropy H(q) that ground
truth reports (docs/decisions.md §12) is about the untwisted q(x) = Π_k p(x_k | x_<k) / p(V_k |
x_<k). Every node below a root has an expanded parent, whose model row gives p(V_k | x_<k)
without a model call (unless the byte cap dropped it: it is expanded again), so log q(node) =
log p(node) − Σ of its ancestors' log normalisers. They are computed for the parents the trie
holds when asked, and only for those added since.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from seqq.estimators.engine.categorical import Categorical
from seqq.estimators.engine.memory import rows_within
from seqq.estimators.engine.trie.tree import Trie


class RestrictedLogQ:
    """log q(node) of the restricted proposal for the nodes of a (twisted) trie."""

    def __init__(self, trie: Trie):
        self.trie = trie
        self.log_norm: list[Tensor] = []  # per depth: log p(V_k | node) of expanded nodes (nan)
        self.above: list[Tensor] = []  # per depth: Σ of the ancestors' log normalisers

    def _update(self) -> None:
        batch = self.trie.batch
        for depth, level in enumerate(self.trie.levels):
            if depth == len(self.log_norm):
                self.log_norm.append(torch.zeros(0, dtype=torch.float64))
                self.above.append(torch.zeros(0, dtype=torch.float64))
            norm, above, n = self.log_norm[depth], self.above[depth], level.size
            norm = torch.cat([norm, torch.full((n - len(norm),), math.nan, dtype=torch.float64)])
            below = (torch.zeros(n, dtype=torch.bool) if depth + 1 == len(self.trie.levels)
                     else torch.zeros(n, dtype=torch.bool).index_fill_(
                         0, self.trie.levels[depth + 1].parent, True))
            todo = (below & torch.isnan(norm)).nonzero().flatten()  # the parents of nodes
            for part in todo.split(rows_within(self.trie.V)):
                rows = level.log_probs.index_select(self.trie.rows(depth, part))
                domain = batch.domain(level.lattice_node[part], sparse=True)
                norm[part] = Categorical.from_logits(rows, domain).log_total().cpu()
            new = torch.arange(len(above), n)
            if depth == 0:
                grown = torch.zeros(len(new), dtype=torch.float64)
            else:
                parent = level.parent[new]
                grown = self.above[depth - 1][parent] + self.log_norm[depth - 1][parent]
            self.log_norm[depth], self.above[depth] = norm, torch.cat([above, grown])

    def log_q(self, depths: Tensor, nodes: Tensor) -> Tensor:
        """log q of the nodes given with their depths (float64, CPU)."""
        self._update()
        out = torch.zeros(len(nodes), dtype=torch.float64)
        for d in torch.unique(depths).tolist():
            at = depths == d
            out[at] = self.trie.levels[d].log_p[nodes[at]] - self.above[d][nodes[at]]
        return out


def restricted_entropy(log_q: RestrictedLogQ, head: list[tuple[Tensor, Tensor, Tensor]],
                       tail_depth: Tensor, tail_leaf: Tensor, tail_branch: Tensor,
                       tail_log_q: Tensor, N: int) -> Tensor:
    """H(q) per branch by sum-and-sample under the twisted proposal: Σ_{x∈S} −q log q over the
    head S (rounds of (depth, leaf, branch)), plus the tail's share of it from the draws from
    q̃(· | ∉ S) (`tail_log_q` = log q̃), weighted by r = q/q̃ and normalised by their own sum:
    (1 − q(S))·Σ r·(−log q) / Σ r. The q-mass left to the tail, 1 − q(S), is known exactly, so
    the ratio (self-normalised) form spares H the variance of the weights' scale, which under
    a twist steered towards p can be large; it is consistent, not unbiased, as fits a
    diagnostic. Draws outside the query's mass add nothing."""
    entropy = torch.zeros(N, dtype=torch.float64)
    head_mass = torch.zeros(N, dtype=torch.float64)
    for depths, leaves, branch in head:
        lq = log_q.log_q(depths, leaves)
        entropy.index_add_(0, branch, torch.where(torch.isfinite(lq), -lq.exp() * lq, 0.0))
        head_mass.index_add_(0, branch, lq.exp())
    lq = log_q.log_q(tail_depth, tail_leaf)
    valid = torch.isfinite(lq) & torch.isfinite(tail_log_q)
    r = torch.where(valid, torch.exp(lq - tail_log_q), 0.0)
    total = torch.zeros(N, dtype=torch.float64).index_add_(0, tail_branch, r)
    weighted = torch.zeros(N, dtype=torch.float64).index_add_(
        0, tail_branch, torch.where(valid, r * -lq, 0.0))
    rest = (1 - head_mass).clamp_min(0)
    return entropy + torch.where(total > 0, rest * weighted / total.clamp_min(1e-300), 0.0)
