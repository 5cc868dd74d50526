"""Ancestral sampling from any `SequenceModel`: many rows stepped together, seeded."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from seqq.models.batching import map_row_chunks
from seqq.models.protocol import SequenceModel


@torch.inference_mode()
def sample_continuations(model: SequenceModel, starts: Sequence[Sequence[int]], steps: int,
                         generator: torch.Generator) -> Tensor:
    """[len(starts), steps] symbols drawn from the model after each start, all rows stepped
    together (in the device's row chunks); `steps` · len(starts) model calls."""
    def draw(rows: Tensor) -> Tensor:
        log_probs, state = model.initial_state([list(starts[i]) for i in rows.tolist()])
        drawn = []
        for k in range(steps):
            symbols = torch.multinomial(log_probs.double().exp().cpu(), 1, generator=generator)
            drawn.append(symbols[:, 0])
            if k + 1 < steps:
                log_probs, state = model.step(state, symbols[:, 0].to(log_probs.device))
        return torch.stack(drawn, 1) if drawn else torch.empty(len(rows), 0, dtype=torch.long)

    return torch.cat(map_row_chunks(model, torch.arange(len(starts)), draw))
