"""The model outputs of one trie level, kept as the blocks the model produced them in.

A level gains rows walk by walk (a sweep's walks go through the trie a chunk of rows at a
time), so a single [r, V] tensor would have to be re-allocated and copied as it grows, and over
a large vocabulary that copy can cost more than the model step that made the rows
(docs/performance.md). Blocks are never copied; reads select from each block the rows that
live there. A block the trie's byte cap drops (`eviction.py`) frees its memory; its rows are
then never read again. Row indices are given on the CPU (the trie's bookkeeping lives there), so splitting
them by block needs no device synchronisation.
"""

from __future__ import annotations

import torch
from torch import Tensor


class RowBlocks:
    """Rows 0..len-1 of an [r, V] matrix stored as consecutive blocks."""

    def __init__(self, first: Tensor):
        self.blocks: list[Tensor | None] = [first] if len(first) else []
        self.width, self.device, self.dtype = first.shape[1], first.device, first.dtype
        # the first row of each block, then the number of rows
        self.starts = torch.tensor([0, len(first)] if len(first) else [0])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def append(self, block: Tensor) -> None:
        if len(block):
            self.blocks.append(block)
            self.dtype = torch.promote_types(self.dtype, block.dtype)  # as torch.cat would
            self.starts = torch.cat([self.starts, self.starts[-1:] + len(block)])

    def drop(self, block: int) -> None:
        """Free a block's memory (`eviction`); its rows are never read again."""
        self.blocks[block] = None

    def block_of(self, rows: Tensor) -> Tensor:
        """The block each row (CPU index) lives in."""
        return torch.searchsorted(self.starts, rows, right=True) - 1

    def whole(self) -> Tensor:
        """All rows as one tensor (a copy only when there are several blocks)."""
        if len(self.blocks) == 1:
            return self.blocks[0]
        if not self.blocks:
            return torch.zeros(0, self.width, dtype=self.dtype, device=self.device)
        return torch.cat(self.blocks)

    def _split(self, rows: Tensor) -> list[tuple[int, Tensor, Tensor]]:
        """(block, positions in `rows`, rows local to the block) for each block `rows` touch."""
        block = self.block_of(rows)
        parts = []
        for b in torch.unique(block).tolist():
            at = (block == b).nonzero().flatten()
            parts.append((b, at, rows[at] - self.starts[b]))
        return parts

    def index_select(self, rows: Tensor) -> Tensor:
        """[n, V]: the rows (CPU indices), on the blocks' device."""
        if len(self.blocks) == 1:
            return self.blocks[0].index_select(0, rows.to(self.device))
        out = torch.empty(len(rows), self.width, dtype=self.dtype, device=self.device)
        for b, at, local in self._split(rows):
            out.index_copy_(0, at.to(self.device),
                            self.blocks[b].index_select(0, local.to(self.device)).to(self.dtype))
        return out

    def pick(self, rows: Tensor, columns: Tensor) -> Tensor:
        """[n]: entry (rows[i], columns[i]) for each i; rows on the CPU, columns on the device."""
        if len(self.blocks) == 1:
            return self.blocks[0][rows.to(self.device), columns]
        out = torch.empty(len(rows), dtype=self.dtype, device=self.device)
        for b, at, local in self._split(rows):
            dev_at = at.to(self.device)
            out[dev_at] = self.blocks[b][local.to(self.device), columns[dev_at]].to(self.dtype)
        return out
