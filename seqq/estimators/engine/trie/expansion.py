"""Growing the trie: children created from their parents' rows (no model call), and rows
computed by the model for nodes not yet expanded.

A prefix is evaluated once: `expand` calls the model only for nodes without a row, all of one
depth in one chunked step, and keeps their states so that their children continue them, for as
long as the trie's byte cap holds them (`eviction.py`: a dropped node is expanded again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from seqq.estimators.engine.distinct import distinct
from seqq.estimators.engine.trie.proposals import child_steps, normalisers

if TYPE_CHECKING:
    from seqq.estimators.engine.trie.tree import Trie


def child_nodes(trie: Trie, depth: int, parents: Tensor, tokens: Tensor) -> Tensor:
    """Nodes at depth+1 for (parent, token) pairs, created where missing (no model call)."""
    V = trie.V
    child = trie.level(depth + 1)
    keys, inverse = distinct(parents * V + tokens, trie.levels[depth].size * V)
    if child.size:
        found = child.lookup(keys, V)
        new = (found < 0).nonzero().flatten()
    else:  # a depth no walk has reached yet: every child is new
        found, new = torch.empty_like(keys), slice(None)
    created = keys[new]
    if len(created):
        p, t = created // V, created % V
        parent = trie.levels[depth]
        step_p, step_q, step_w = child_steps(trie, depth, p, t)
        log_q = parent.log_q[p] + step_q
        context = (parent.context[p] if trie.messages is None
                   else trie.messages.next_context_cpu[parent.context[p], t])
        found[new] = child.size + torch.arange(len(created))
        child.index_keys(created, found[new])
        child.append(branch=parent.branch[p],
                     lattice_node=trie.batch.lattice.advance(parent.lattice_node[p], t),
                     parent=p, token=t, log_p=parent.log_p[p] + step_p, log_q=log_q,
                     log_w=parent.log_w[p] + step_w, log_m=log_q.clone(),
                     row=torch.full((len(created),), -1), context=context)
    return found[inverse]


def expand(trie: Trie, depth: int, nodes: Tensor) -> None:
    """Make sure the nodes (at depth ≥ 1, not finished) carry p(· | node):
    every node not yet expanded costs one model call, all of them in one chunked step.
    Its row chunks' new states are kept as the level's chunks, never joined (a join would
    copy every new state once more)."""
    level = trie.levels[depth]
    held = level.row[nodes]
    trie.keeper.touch(trie, depth, held[held >= 0])
    todo = distinct(nodes[held < 0], level.size)[0]
    if not len(todo):
        return
    parents = trie.levels[depth - 1]
    prow = parents.row[level.parent[todo]]
    trie.keeper.touch(trie, depth - 1, prow)
    chunk = parents.chunk[prow]
    if len(parents.chunks) > 1 and not bool((chunk[1:] >= chunk[:-1]).all()):
        by_chunk = torch.sort(chunk, stable=True).indices  # each parent chunk's rows together
        todo, prow, chunk = todo[by_chunk], prow[by_chunk], chunk[by_chunk]
    used, source = torch.unique_consecutive(chunk, return_inverse=True)  # the chunks read
    device = trie.batch.device
    log_probs, states = trie.batch.counter.step_parts(
        [parents.chunks[c] for c in used.tolist()], level.token[todo].to(device),
        parents.index[prow].to(device), source)
    sizes = torch.tensor([len(state.owners) for state in states])
    starts = sizes.cumsum(0) - sizes
    first_row, first_chunk = len(level.log_probs), len(level.chunks)
    level.row[todo] = first_row + torch.arange(len(todo))
    level.append(log_probs=log_probs, log_mass=normalisers(trie, depth, todo, log_probs),
                 chunk=torch.arange(len(level.chunks), len(level.chunks) + len(states)
                                    ).repeat_interleave(sizes),
                 index=torch.arange(len(todo)) - starts.repeat_interleave(sizes))
    level.chunks.extend(states)
    trie.keeper.add(trie, depth, todo, range(first_row, first_row + len(todo)),
                    range(first_chunk, len(level.chunks)))
