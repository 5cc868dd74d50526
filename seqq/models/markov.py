"""Markov models of any order (order 0 = i.i.d.): cheap models with exact query answers.

They implement the `SequenceModel` protocol *and* an exact forward DP over contexts, so they
serve as oracles: every estimator is checked against `log_probability` at any horizon.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from seqq.errors import QueryError


class MarkovModel:
    """p(x_k | x_{k-n..k-1}) from a table [V**n, V]; the context id is the base-V number of the
    last n symbols, so appending v maps context c to (c·V + v) mod V**n."""

    def __init__(self, transition: Tensor, order: int):
        V = transition.shape[-1]
        if transition.shape != (V**order, V):
            raise ValueError(f"an order-{order} table must have shape {(V**order, V)}")
        self.order, self.vocab_size = order, V
        probs = transition.double()
        self.log_table = torch.log(probs / probs.sum(-1, keepdim=True))
        self.num_contexts = V**order
        contexts = torch.arange(self.num_contexts)[:, None]
        self.next_context = (contexts * V + torch.arange(V)) % self.num_contexts  # [C, V]

    @classmethod
    def random(cls, vocab_size: int, order: int = 1, concentration: float = 0.5,
               seed: int = 0) -> MarkovModel:
        """Transition rows drawn from Dirichlet(concentration): small values give peaky rows."""
        g = torch.Generator().manual_seed(seed)
        alpha = torch.full((vocab_size**order, vocab_size), concentration, dtype=torch.float64)
        gammas = torch._standard_gamma(alpha, generator=g)
        return cls(gammas.clamp_min(1e-300), order)

    @classmethod
    def iid(cls, probs: Sequence[float] | Tensor) -> MarkovModel:
        """The i.i.d. model: every step draws from `probs`."""
        return cls(torch.as_tensor(probs, dtype=torch.float64)[None], order=0)

    def tempered(self, temperature: float) -> MarkovModel:
        """The same chain with every conditional ∝ p^{1/T} (decisions.md §10)."""
        return MarkovModel(torch.softmax(self.log_table / temperature, -1), self.order)

    # --- SequenceModel protocol -------------------------------------------------------------
    def _context(self, history: Sequence[int]) -> int:
        if len(history) < self.order:
            raise QueryError(
                f"an order-{self.order} Markov model needs a history of at least {self.order} "
                f"symbols, got {len(history)}"
            )
        c = 0
        for s in list(history)[len(history) - self.order:]:
            if not 0 <= int(s) < self.vocab_size:
                raise QueryError(f"history symbol {s} is outside the vocabulary 0..{self.vocab_size - 1}")
            c = c * self.vocab_size + int(s)
        return c

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
        """log p(X_{1:K} ∈ ∪_i Π_k V_k^(i) | history) by forward DP over contexts, any K."""
        logs = [self._product_log_prob(history, m) for m in masks]
        return torch.logsumexp(torch.tensor(logs, dtype=torch.float64), 0).item() if logs else -float("inf")

    def _product_log_prob(self, history: Sequence[int], mask: Tensor) -> float:
        alpha = torch.zeros(self.num_contexts, dtype=torch.float64)
        alpha[self._context(history)] = 1.0
        log_scale = 0.0
        table = self.log_table.exp()
        for domain in mask:  # α_{k}(c') = Σ_c α_{k-1}(c) p(v|c) 1[v ∈ V_k], c' = next(c, v)
            flow = alpha[:, None] * table * domain.to(table)
            alpha = torch.zeros_like(alpha).index_add_(0, self.next_context.flatten(), flow.flatten())
            total = alpha.sum()
            if total <= 0:
                return -float("inf")
            alpha, log_scale = alpha / total, log_scale + total.log().item()
        return log_scale

    def restricted_entropy(self, history: Sequence[int], mask: Tensor) -> float:
        """H(q) = -E_q[log q(X)] of one product's restricted proposal, exactly (nats)."""
        mu = torch.zeros(self.num_contexts, dtype=torch.float64)
        mu[self._context(history)] = 1.0
        entropy = 0.0
        for domain in mask:
            logits = self.log_table.masked_fill(~domain, -float("inf"))
            log_q = logits - torch.logsumexp(logits, -1, keepdim=True)
            q = log_q.exp().nan_to_num(0.0)
            entropy += (mu[:, None] * -(q * log_q.nan_to_num(0.0, neginf=0.0))).sum().item()
            mu = torch.zeros_like(mu).index_add_(0, self.next_context.flatten(),
                                                 (mu[:, None] * q).flatten())
        return entropy
