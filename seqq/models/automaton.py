"""Models whose next-symbol distribution is a function of a finite context state that each
symbol updates deterministically (Markov chains, n-gram / HPYP models).

Such a model is a finite automaton: `log_table[c]` is p(· | state c) and
`next_context[c, v]` the state after appending v. That makes every product query exact at any
horizon by forward DP over states, which is what `seqq.exact` and ground truth
use; subclasses only say how a history maps to its state (`_context`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


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

    # --- exact oracle -----------------------------------------------------------------------
    def log_probability(self, history: Sequence[int], masks: Tensor) -> float:
        """log p(X_{1:K} ∈ ∪_i Π_k V_k^(i) | history) by forward DP over contexts, any K.

        Products are walked as a trie of their domains, so products sharing a prefix (Q4's
        (V∖(A∪B))^{i−1}) share its DP steps, and trailing unrestricted steps (Q4's V^{K−i}) are
        skipped: they keep the mass.
        """
        masks = masks.bool().cpu()
        if not len(masks):
            return -float("inf")
        restricted = ~masks.all(-1)  # [P, K]
        steps = torch.arange(1, masks.shape[1] + 1)
        lengths = (restricted * steps).amax(-1)  # last restricted step of each product
        start = torch.zeros(self.num_contexts, dtype=torch.float64)
        start[self._context(history)] = 1.0
        logs: list[float] = []
        pending = [(start, 0.0, torch.arange(len(masks)), 0)]
        while pending:
            alpha, log_scale, products, k = pending.pop()
            done = lengths[products] == k
            logs += [log_scale] * int(done.sum())
            products = products[~done]
            if not len(products):
                continue
            domains, group = torch.unique(masks[products, k], dim=0, return_inverse=True)
            for g, domain in enumerate(domains):
                members = products[group == g]
                if (lengths[members] == k + 1).all():  # last step: only the mass is needed
                    total = self._mass(alpha, domain)
                    logs += [log_scale + total.log().item()] * len(members) if total > 0 else []
                    continue
                moved = self._advance(alpha, domain)
                total = moved.sum()
                if total > 0:
                    pending.append((moved / total, log_scale + total.log().item(), members, k + 1))
        if not logs:
            return -float("inf")
        return torch.logsumexp(torch.tensor(logs, dtype=torch.float64), 0).item()

    @property
    def _probs(self) -> Tensor:
        """exp(log_table), computed once per table (tempered copies get their own)."""
        cached = self.__dict__.get("_probs_cache")
        if cached is None or cached[0] is not self.log_table:
            cached = (self.log_table, self.log_table.exp())
            self.__dict__["_probs_cache"] = cached
        return cached[1]

    def _advance(self, alpha: Tensor, domain: Tensor) -> Tensor:
        """α'(c') = Σ_{c, v ∈ domain: next(c, v) = c'} α(c) p(v | c), over the live states only."""
        live = alpha.nonzero().flatten()
        allowed = domain.nonzero().flatten()
        flow = alpha[live, None] * self._probs[live][:, allowed]
        return torch.zeros_like(alpha).index_add_(
            0, self.next_context[live][:, allowed].flatten(), flow.flatten())

    def _mass(self, alpha: Tensor, domain: Tensor) -> Tensor:
        """Σ_c α(c) p(domain | c): the probability of one more step inside `domain`."""
        live = alpha.nonzero().flatten()
        return alpha[live] @ self._probs[live] @ domain.to(alpha)

    def restricted_entropy(self, history: Sequence[int], mask: Tensor) -> float:
        """H(q) = -E_q[log q(X)] of one product's restricted proposal, exactly (nats)."""
        mu = torch.zeros(self.num_contexts, dtype=torch.float64)
        mu[self._context(history)] = 1.0
        entropy = 0.0
        for domain in mask.bool().cpu():
            live = mu.nonzero().flatten()
            logits = self.log_table[live].masked_fill(~domain, -float("inf"))
            log_q = logits - torch.logsumexp(logits, -1, keepdim=True)
            q = log_q.exp().nan_to_num(0.0)
            entropy += (mu[live, None] * -(q * log_q.nan_to_num(0.0, neginf=0.0))).sum().item()
            mu = torch.zeros_like(mu).index_add_(0, self.next_context[live].flatten(),
                                                 (mu[live, None] * q).flatten())
        return entropy
