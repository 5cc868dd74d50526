"""The `Trie`: the state of one prefix trie over a batch's branches, and its public methods.

It holds the levels of nodes (`levels.py`), the proposal memo (`proposals.py`), the removed
leaves (`residual.py`) and the byte cap over its rows and states (`eviction.py`); each
method hands that state to the module that owns the concern.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from seqq.estimators.engine.allowance import Charge
from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.trie import expansion, residual, walks, without_replacement
from seqq.estimators.engine.trie.eviction import TRIE_BYTES, Keeper, materialise, storages
from seqq.estimators.engine.trie.levels import Level, empty_level
from seqq.estimators.engine.trie.proposals import Memo, child_steps, normalisers
from seqq.estimators.engine.trie.row_blocks import RowBlocks
from seqq.estimators.engine.trie.walks import Policy

if TYPE_CHECKING:
    from seqq.estimators.engine.twist import Messages


class Trie:
    """The prefix trie of all branches of a batch; roots are the branches (depth 0)."""

    def __init__(self, batch: Batch, messages: Messages | None = None,
                 max_bytes: int = TRIE_BYTES):
        """`max_bytes`: bytes of model rows and states the trie keeps (`eviction.py`)."""
        self.batch = batch
        self.messages = messages
        self.V = batch.vocab_size
        N = len(batch.branch_task)
        tasks = batch.branch_task.to(batch.device)
        zero = torch.zeros(N, dtype=torch.float64)
        roots = Level(
            branch=torch.arange(N), lattice_node=batch.branch_root.clone(),
            parent=torch.full((N,), -1), token=torch.full((N,), -1),
            log_p=zero, log_q=zero.clone(), log_w=zero.clone(), log_m=zero.clone(),
            row=torch.arange(N), log_probs=RowBlocks(batch.root_log_probs[tasks]),
            log_mass=torch.zeros(0, dtype=torch.float64),
            chunk=torch.zeros(N, dtype=torch.long), index=torch.arange(N),
            chunks=[batch.counter.select(batch.root_state, tasks)],
            context=(torch.zeros(N, dtype=torch.long) if messages is None
                     else messages.context.cpu()))
        self.levels = [roots]
        self.keeper = Keeper(max_bytes, storages(roots.chunks[0].inner))
        self.memo = Memo()
        # per depth, the sorted nodes with a removed leaf below them (or removed themselves):
        # every other node's residual q(· | node, not removed) is its proposal q(· | node)
        self.removed_below: dict[int, Tensor] = {}
        roots.log_mass = normalisers(self, 0, torch.arange(N), roots.log_probs.whole())

    @classmethod
    def from_beam(cls, batch: Batch, beam_levels: list, messages: Messages | None = None
                  ) -> Trie:
        """The trie holding a finished beam search's tree (App. D's partial view of Q's tree):
        its expanded nodes keep their rows and states, so samples pay nothing inside it. With
        `messages` the nodes' proposal masses are re-derived under the twisted q̃."""
        trie = cls(batch, messages)
        trie.levels = []
        for b in beam_levels:
            expanded = (b.row >= 0).nonzero().flatten()  # rows are the expanded nodes in order
            log_probs = (b.log_probs if b.log_probs is not None
                         else torch.zeros(0, batch.vocab_size, device=batch.device))
            trie.levels.append(Level(
                branch=b.branch, lattice_node=b.lattice_node, parent=b.parent, token=b.token,
                log_p=b.log_p, log_q=b.log_q, log_w=b.log_p - b.log_q, log_m=b.log_q.clone(),
                row=b.row.clone(), log_probs=RowBlocks(log_probs),
                log_mass=torch.zeros(len(expanded), dtype=torch.float64),  # set below
                context=torch.zeros(len(b.branch), dtype=torch.long),
                chunk=torch.zeros(len(expanded), dtype=torch.long),
                index=torch.arange(len(expanded)),
                chunks=[b.state] if b.state is not None else []))
        if messages is not None:
            trie.levels[0].context = messages.context.cpu()
        for depth, level in enumerate(trie.levels):  # a level's twist needs its parents' masses
            if depth and messages is not None:
                trie._twist_level(depth)
            level.log_mass = normalisers(trie, depth, (level.row >= 0).nonzero().flatten(),
                                         level.log_probs.whole())
        return trie

    def _twist_level(self, depth: int) -> None:
        """Surrogate states, log q̃ and log w of a level built without the twist."""
        level, parent = self.levels[depth], self.levels[depth - 1]
        p, t = level.parent, level.token
        _, log_q, log_w = child_steps(self, depth - 1, p, t)
        level.context = self.messages.next_context_cpu[parent.context[p], t]
        level.log_q = parent.log_q[p] + log_q
        level.log_w = parent.log_w[p] + log_w
        level.log_m = level.log_q.clone()

    # --- nodes ------------------------------------------------------------------------------
    def level(self, depth: int) -> Level:
        """The nodes at `depth`, created empty (with those above) if no walk reached it yet."""
        while len(self.levels) <= depth:
            self.levels.append(empty_level(self.V, self.batch.device))
        return self.levels[depth]

    def rows(self, depth: int, nodes: Tensor) -> Tensor:
        """The model rows of expanded nodes, re-expanding any the byte cap dropped (`eviction`)."""
        level = self.levels[depth]
        if depth and bool((level.row[nodes] < 0).any()):
            materialise(self, depth, nodes)
        return level.row[nodes]

    def finished(self, depth: int, nodes: Tensor) -> Tensor:
        """Which nodes end a path: nothing after them is restricted (their lattice node is free)."""
        return self.batch.lattice.free[self.levels[depth].lattice_node[nodes]]

    def node_values(self, depths: Tensor, nodes: Tensor, name: str) -> Tensor:
        """A per-node field (log_p, log_q, log_w) for nodes given with their depths."""
        out = torch.zeros(len(nodes), dtype=torch.float64)
        for d in torch.unique(depths).tolist():
            at = depths == d
            out[at] = getattr(self.levels[d], name)[nodes[at]]
        return out

    def child_nodes(self, depth: int, parents: Tensor, tokens: Tensor) -> Tensor:
        """Nodes at depth+1 for (parent, token) pairs, created where missing (no model call)."""
        return expansion.child_nodes(self, depth, parents, tokens)

    def expand(self, depth: int, nodes: Tensor) -> None:
        """Give the nodes (depth ≥ 1, not finished) their model rows: one model call per node
        not yet expanded (or dropped by the byte cap), all in one chunked step."""
        expansion.expand(self, depth, nodes)

    # --- residual ---------------------------------------------------------------------------
    def remove(self, depth_nodes: list[tuple[int, Tensor]]) -> None:
        """Take leaves out of the residual and recompute their ancestors' masses."""
        residual.remove(self, depth_nodes)

    def root_residual(self) -> Tensor:
        """log of the unsampled q-mass per branch (0 before anything is removed)."""
        return self.levels[0].log_m.clone()

    def residual_logits(self, depth: int, nodes: Tensor) -> Tensor:
        """[n, V] float64 log unsampled mass of every child of distinct expanded nodes."""
        return residual.residual_logits(self, depth, nodes)

    # --- draws ------------------------------------------------------------------------------
    def walk(self, row_branch: Tensor, policy: Policy = "proposal",
             charge: Charge | None = None) -> tuple[Tensor, Tensor]:
        """One i.i.d. path per row from its branch's root (`walks.walk`): (depth, leaf)."""
        return walks.walk(self, row_branch, policy, charge)

    def sample_without_replacement(self, draws: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """`draws[b]` distinct leaves per branch from the residual
        (`without_replacement.sample_without_replacement`): (depth, leaf, branch)."""
        return without_replacement.sample_without_replacement(self, draws)
