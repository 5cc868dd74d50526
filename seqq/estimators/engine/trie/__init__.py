"""One prefix trie over the restricted proposal tree of every query of a batch (004 Alg. 2).

Every sampling estimator walks this trie, so a prefix evaluated once is never paid for again:
each expanded node keeps the model's log p(· | prefix) row and its state, and a walk only calls
the model for prefixes that are new (all new prefixes at one depth go through one batched call).

Each node also keeps its *unsampled* restricted mass m(node) = q(leaves below it not yet removed)
(UniqueRandomizer's trie, which is also the hybrid's pruned tree of App. D): removing a leaf sets
its mass to zero and recomputes its ancestors from their children. Children never created keep
their full mass q(node)·q(v | node), read off the parent's row. Masses are joint q-masses in log
space, float64.

Walks draw i.i.d. paths either from q (`policy="proposal"`) or from the residual
q(· | not removed) (`policy="residual"`); `sample_without_replacement` draws distinct paths
from the residual with stochastic beam search (Gumbel-top-k, top-down).

With `messages` (a surrogate's backward messages, twisted.py) the trie's proposal is the twisted
q̃(v | node) ∝ p(v | node)·1[allowed]·ψ(v), ψ the surrogate's chance of completing the query
after v; each node then also carries its surrogate state. Every trie method (importance, wor,
hindsight_gumbel) works unchanged on q̃, with weights p/q̃ exact whatever the surrogate is.

One concern per module:
- `tree`: the `Trie` — its state (levels, proposal memo, removed leaves), its construction
  (from a batch, from a finished beam search) and the public methods estimators call;
- `levels`, `row_blocks`: storage — a depth's node arrays, grown in place, and their lookup;
- `proposals`: q(· | node) at expanded nodes and the memo that builds it once per step;
- `expansion`: new children (no model call) and model rows for new nodes;
- `residual`: removal and the residual masses;
- `walks`: i.i.d. draws by policy;
- `without_replacement`: stochastic beam search over the residual;
- `gumbel`: the stateless Gumbel and top-k maths it relies on.
"""

from seqq.estimators.engine.trie.levels import Level
from seqq.estimators.engine.trie.tree import Trie
from seqq.estimators.engine.trie.walks import Policy

__all__ = ["Level", "Policy", "Trie"]
