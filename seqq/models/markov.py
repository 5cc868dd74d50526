"""Markov models of any order (order 0 = i.i.d.): cheap models with exact query answers.

They implement the `SequenceModel` protocol *and* an exact forward DP over contexts, so they
serve as oracles: every estimator is checked against `log_probability` at any horizon.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from seqq.errors import QueryError
from seqq.models.automaton import ContextAutomaton


class MarkovModel(ContextAutomaton):
    """p(x_k | x_{k-n..k-1}) from a table [V**n, V]; the context id is the base-V number of the
    last n symbols, so appending v maps context c to (c·V + v) mod V**n."""

    def __init__(self, transition: Tensor, order: int):
        V = transition.shape[-1]
        if transition.shape != (V**order, V):
            raise ValueError(f"an order-{order} table must have shape {(V**order, V)}")
        self.order, self.vocab_size = order, V
        self.vocab = [str(i) for i in range(V)]  # abstract symbols: named by their ids
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
        """The same chain with every conditional ∝ p^{1/T} (docs/decisions.md §10)."""
        return MarkovModel(torch.softmax(self.log_table / temperature, -1), self.order)

    def __repr__(self) -> str:  # names a surrogate in the sweep's `options` column
        return f"MarkovModel(order={self.order}, vocab_size={self.vocab_size})"

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
