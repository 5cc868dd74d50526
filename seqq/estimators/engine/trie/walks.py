"""I.i.d. walks down the trie: one path per row, drawn step by step from q
(`policy="proposal"`) or from the residual q(· | not removed) (`policy="residual"`).

Rows at one node share its distribution: each step builds it once per distinct node and draws
every row from its node's row of it. New prefixes are expanded as the walk reaches them, so a
prefix shared by several rows, or several walks, is paid for once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import torch
from torch import Tensor

from seqq.estimators.engine.allowance import NO_CUT, Charge
from seqq.estimators.engine.categorical import Categorical
from seqq.estimators.engine.distinct import distinct
from seqq.estimators.engine.trie.proposals import proposal
from seqq.estimators.engine.trie.residual import residual_logits, residual_proposal

if TYPE_CHECKING:
    from seqq.estimators.engine.trie.tree import Trie

Policy = Literal["proposal", "residual"]


def walk(trie: Trie, row_branch: Tensor, policy: Policy = "proposal",
         charge: Charge | None = None) -> tuple[Tensor, Tensor]:
    """One i.i.d. path per row from its branch's root: from q, or from the residual
    q(· | not removed). Returns (depth, node) of each row's leaf; rows stop at their
    lattice node is free, or early (node −1) where their prefix has no mass in the domain.
    With a `charge`, new prefixes are paid in draw order and rows past their task's cut
    stop (node −1; `charge.kept()` says which rows to keep)."""
    rows = torch.arange(len(row_branch))
    node = row_branch.clone()
    leaf_depth = torch.zeros(len(rows), dtype=torch.long)
    leaf = torch.full((len(rows),), -1)
    depth = 0
    while len(rows):
        if depth and charge is not None:
            rows, node = _pay(trie, depth, rows, node, charge)
        nodes, inverse = distinct(node, trie.levels[depth].size)
        if depth:
            trie.keeper.next_step()
            trie.expand(depth, nodes)
            trie.keeper.settle(trie, spare=True)
        alive, drawn = _draw(trie, *_choice(trie, depth, nodes, policy), inverse)
        if not bool(alive.all()):
            rows, node, drawn = rows[alive], node[alive], drawn[alive]
        node = trie.child_nodes(depth, node, drawn)
        done = trie.finished(depth + 1, node)
        if bool(done.any()):
            leaf_depth[rows[done]], leaf[rows[done]] = depth + 1, node[done]
            rows, node = rows[~done], node[~done]
        depth += 1
    trie.keeper.settle(trie)
    return leaf_depth, leaf


def _choice(trie: Trie, depth: int, nodes: Tensor, policy: Policy
            ) -> tuple[Categorical, Tensor | None]:
    """The distribution the policy draws from at distinct expanded nodes, and each node's
    row in it (None: row i is node i). The residual falls back on float64 rows where its
    float32 weights underflow."""
    if policy == "proposal":
        return proposal(trie, depth, nodes)
    residual = residual_proposal(trie, depth, nodes)
    if residual is None:
        return Categorical.from_logits(residual_logits(trie, depth, nodes)), None
    return residual


def _draw(trie: Trie, choice: Categorical, rows_of_nodes: Tensor | None, inverse: Tensor
          ) -> tuple[Tensor, Tensor]:
    """(alive, symbol) of walking rows, each drawn from its node's row of `choice`:
    node `inverse[i]`, at row `rows_of_nodes[node]` of `choice` (None: row = node)."""
    generator = trie.batch.generator
    if rows_of_nodes is None and len(inverse) == len(choice.weights):
        # one walking row per node (deep in a walk): a draw per row of `choice`, permuted
        alive = torch.isfinite(choice.log_total()).cpu()
        return alive[inverse], choice.sample(generator).cpu()[inverse]
    at = inverse.to(trie.batch.device)
    if rows_of_nodes is not None:
        at = rows_of_nodes[at]
    alive = torch.isfinite(choice.log_total())[at].cpu()
    return alive, choice.sample(generator, at).cpu()


def _pay(trie: Trie, depth: int, rows: Tensor, node: Tensor, charge: Charge
         ) -> tuple[Tensor, Tensor]:
    """Pay for the new prefixes among the rows' nodes, each charged to the first draw that
    reaches it, and keep the rows before their task's cut."""
    level = trie.levels[depth]
    new = level.row[node] < 0
    if new.any():
        nodes, inverse = distinct(node[new], level.size)
        first = torch.full((len(nodes),), NO_CUT).scatter_reduce(
            0, inverse, charge.draw[rows[new]], reduce="amin")
        charge.allowance.pay(trie.batch.branch_task[level.branch[nodes]], first)
    keep = charge.allowance.keeps(charge.task[rows], charge.draw[rows])
    return rows[keep], node[keep]
