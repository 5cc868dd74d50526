"""The trie's storage: one `Level` of node arrays per depth, grown in place, with a lookup
from (parent, symbol) to node.

A node is a prefix of one branch (a task's query); its fields are parallel arrays over the
level's nodes, so every walk step reads and writes whole index tensors, never Python objects.
An expanded node also owns a row: the model's output after its prefix and the model state
that continues it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from seqq.estimators.engine.trie.row_blocks import RowBlocks
from seqq.models.counting import OwnedState


@dataclass
class Level:
    """The nodes at one depth, for all branches. Node i has been expanded when row[i] ≥ 0:
    log_probs[row[i]] is p(next | node) and its state is row `index[row]` of `chunks[chunk[row]]`.

    Levels grow as walks add nodes and rows (`append`): each field is a view of the used part
    of a buffer that doubles when full, so growing a level by many small walks costs time
    linear in its size, not quadratic (as re-concatenating every field would)."""

    branch: Tensor  # [n] branch (task) of the batch
    lattice_node: Tensor  # [n] the query-lattice node the prefix has reached
    parent: Tensor  # [n] node index at the previous depth, -1 at roots
    token: Tensor  # [n] symbol at this depth, -1 at roots
    log_p: Tensor  # [n] float64 joint log p of the prefix
    log_q: Tensor  # [n] float64 joint log q of the prefix
    log_w: Tensor  # [n] float64 log p − log q of the prefix (Σ_j log p(V_j | x_<j) untwisted)
    log_m: Tensor  # [n] float64 log of the unsampled q-mass below the node
    row: Tensor  # [n] row of an expanded node, -1 otherwise
    log_probs: RowBlocks  # [r, V] model output per expanded node (model's device)
    log_mass: Tensor  # [r] log normaliser of each expanded node's proposal (`proposals.normalisers`)
    context: Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))  # [n]
    chunk: Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))  # [r]
    index: Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))  # [r]
    chunks: list[OwnedState] = field(default_factory=list)
    keys: Tensor | None = None  # sorted parent·V + token of the nodes (lookup), built lazily
    order: Tensor | None = None  # node of each key
    buffers: dict[str, Tensor] = field(default_factory=dict, repr=False)  # behind the fields

    @property
    def size(self) -> int:
        return len(self.branch)

    def append(self, **fields: Tensor) -> None:
        """Add entries at the end of the named fields (all node fields, or all row fields).
        `log_probs` gain a block (`RowBlocks`: model outputs are never copied). An empty
        field adopts its new entries as they are (a level's first walk copies nothing), so
        callers hand over tensors they own, one per field."""
        for name, new in fields.items():
            used = getattr(self, name)
            if isinstance(used, RowBlocks):
                used.append(new)
                continue
            dtype = (used.dtype if used.dtype == new.dtype
                     else torch.promote_types(used.dtype, new.dtype))
            if not len(used):
                adopted = new.to(dtype)
                self.buffers[name] = adopted
                setattr(self, name, adopted)
                continue
            n, end = len(used), len(used) + len(new)
            buffer = self.buffers.get(name, used)
            if buffer.data_ptr() != used.data_ptr():  # the field was replaced: start afresh
                buffer = used
            if end > len(buffer) or buffer.dtype != dtype:
                grown = new.new_empty((max(end, 2 * len(buffer)), *new.shape[1:]), dtype=dtype)
                grown[:n] = used
                buffer = grown
            buffer[n:end] = new
            self.buffers[name] = buffer
            setattr(self, name, buffer[:end])

    def index_keys(self, keys: Tensor, nodes: Tensor) -> None:
        """Merge new nodes (sorted, distinct `keys` absent so far) into the lookup's order."""
        if self.keys is None:
            return  # built at the next lookup
        position = torch.searchsorted(self.keys, keys) + torch.arange(len(keys))
        is_new = torch.zeros(len(self.keys) + len(keys), dtype=torch.bool)
        is_new[position] = True
        merged_keys, merged_order = self.keys.new_empty(len(is_new)), self.order.new_empty(
            len(is_new))
        merged_keys[position], merged_order[position] = keys, nodes
        merged_keys[~is_new], merged_order[~is_new] = self.keys, self.order
        self.keys, self.order = merged_keys, merged_order

    def lookup(self, keys: Tensor, V: int) -> Tensor:
        """The node of each key parent·V + token, −1 where there is none (the sorted keys are
        built at the first lookup, then kept up to date by `index_keys`)."""
        if self.size == 0:
            return torch.full((len(keys),), -1)
        if self.keys is None:
            self.keys, self.order = torch.sort(self.parent * V + self.token)
        pos = torch.searchsorted(self.keys, keys).clamp_max(self.size - 1)
        return torch.where(self.keys[pos] == keys, self.order[pos], -1)


def empty_level(V: int, device: torch.device) -> Level:
    """A depth no walk has reached yet."""
    long, f64 = torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.float64)
    return Level(long, long, long, long, f64, f64, f64, f64, long,
                 RowBlocks(torch.zeros(0, V, device=device)),
                 torch.zeros(0, dtype=torch.float64, device=device))
