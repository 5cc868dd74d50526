"""Models whose next-symbol distribution is a function of a finite context state that each
symbol updates deterministically (Markov chains, n-gram / HPYP models).

Such a model is a finite automaton: `log_table[c]` is p(· | state c) and
`next_context[c, v]` the state after appending v. That makes every query exact at any
horizon by forward DP over (state × query-lattice node), which is what `seqq.exact` and ground truth
use; subclasses only say how a history maps to its state (`_context`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

from seqq.queries import Query
from seqq.queries.lattice import Lattice


class ContextAutomaton:
    """Subclasses set `vocab_size`, `num_contexts` (C), `log_table` [C, V] (float64, rows
    log-normalised), `next_context` [C, V] (long) and implement `_context(history) -> int`."""

    vocab_size: int
    num_contexts: int
    log_table: Tensor
    next_context: Tensor

    def _context(self, history: Sequence[int]) -> int:
        raise NotImplementedError

    # --- SequenceModel protocol -------------------------------------------------------------
    def initial_state(self, histories: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor]:
        state = torch.tensor([self._context(h) for h in histories], dtype=torch.long)
        return self.log_table[state], state

    def step(self, state: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor]:
        state = self.next_context[state, tokens.cpu()]
        return self.log_table[state].to(tokens.device), state

    def select(self, state: Tensor, index: Tensor) -> Tensor:
        return state[index.cpu()]

    def concat(self, states: Sequence[Tensor]) -> Tensor:
        return torch.cat(list(states))

    # --- exact oracles -----------------------------------------------------------------------
    def log_probability(self, history: Sequence[int], query: Query) -> float:
        """log p(X_{1:K} ∈ Q | history) by forward DP over (context state × lattice node).

        Mass flows down the query's lattice layer by layer; a node's mass over contexts is kept
        normalised with a log scale, so long horizons do not underflow. Mass reaching a free
        node is final (every continuation is accepted), so trailing free steps cost nothing.
        """
        lattice = query.lattice(self.vocab_size)
        root = int(lattice.roots[0])
        if root < 0:
            return -float("inf")
        finished: list[float] = []
        alpha = {root: self._start(history)}
        for node, (scale, mass) in self._flow(lattice, alpha, by_proposal=False):
            if lattice.free[node]:
                finished.append(scale + mass.sum().log().item())
        if not finished:
            return -float("inf")
        return torch.logsumexp(torch.tensor(finished, dtype=torch.float64), 0).item()

    def restricted_entropy(self, history: Sequence[int], query: Query) -> float:
        """H(q) = -E_q[log q(X)] of the query's restricted proposal, exactly (nats): the
        q-flow over (context × lattice node) times each step's entropy of q(· | c, node)."""
        lattice = query.lattice(self.vocab_size)
        root = int(lattice.roots[0])
        if root < 0:
            return 0.0
        entropy = 0.0
        for node, (scale, mu) in self._flow(lattice, {root: self._start(history)}, by_proposal=True):
            if lattice.free[node]:
                continue
            live = mu.nonzero().flatten()
            logits = self.log_table[live].masked_fill(~lattice.allowed[node].cpu(), -float("inf"))
            log_q = logits - torch.logsumexp(logits, -1, keepdim=True)
            h = -(log_q.exp() * log_q.nan_to_num(0.0, neginf=0.0)).sum(-1)
            entropy += math.exp(scale) * (mu[live] * h.nan_to_num(0.0)).sum().item()
        return entropy

    def _start(self, history: Sequence[int]) -> tuple[float, Tensor]:
        start = torch.zeros(self.num_contexts, dtype=torch.float64)
        start[self._context(history)] = 1.0
        return 0.0, start

    def _flow(self, lattice: Lattice, alpha: dict[int, tuple[float, Tensor]],
              by_proposal: bool) -> Iterator[tuple[int, tuple[float, Tensor]]]:
        """Yield (node, (log scale, mass over contexts)) for every lattice node in depth order,
        pushing each open node's mass to its children: by p(v | c), or, `by_proposal`, by the
        restricted proposal q(v | c, node) (the q-flow)."""
        while alpha:
            depth = min(int(lattice.depth[n]) for n in alpha)
            layer = sorted(n for n in alpha if int(lattice.depth[n]) == depth)
            for node in layer:
                scale, mass = alpha.pop(node)
                yield node, (scale, mass)
                if lattice.free[node]:
                    continue
                live = mass.nonzero().flatten()
                allowed = lattice.allowed[node].cpu()
                step = self._probs[live] * allowed
                if by_proposal:
                    step = step / step.sum(-1, keepdim=True).clamp_min(1e-300)
                children = lattice.child_table(torch.tensor([node]))[0]
                for child in torch.unique(children[children >= 0]).tolist():
                    into = (children == child)
                    flow = mass[live, None] * step[:, into]
                    moved = torch.zeros_like(mass).index_add_(
                        0, self.next_context[live][:, into].flatten(), flow.flatten())
                    total = moved.sum()
                    if total <= 0:
                        continue
                    moved, log_total = moved / total, scale + total.log().item()
                    if child in alpha:
                        old_scale, old = alpha[child]
                        top = max(old_scale, log_total)
                        merged = old * math.exp(old_scale - top) + moved * math.exp(log_total - top)
                        alpha[child] = (top, merged)
                    else:
                        alpha[child] = (log_total, moved)

    @property
    def _probs(self) -> Tensor:
        """exp(log_table), computed once per table (tempered copies get their own)."""
        cached = self.__dict__.get("_probs_cache")
        if cached is None or cached[0] is not self.log_table:
            cached = (self.log_table, self.log_table.exp())
            self.__dict__["_probs_cache"] = cached
        return cached[1]
