"""The paper's LSTM (App. F.2) and its `SequenceModel` adapter."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from seqq.errors import QueryError
from seqq.models.device import resolve_device

LSTMState = tuple[Tensor, Tensor]  # (h, c), each [layers, B, hidden]


class LSTMNet(nn.Module):
    """Embedding → multi-layer LSTM → linear head over the vocabulary."""

    def __init__(self, vocab_size: int, hidden_size: int = 512, num_layers: int = 2,
                 dropout: float = 0.3, embedding_size: int | None = None):
        super().__init__()
        embedding_size = embedding_size or hidden_size
        self.config = dict(vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers,
                           dropout=dropout, embedding_size=embedding_size)
        self.embed = nn.Embedding(vocab_size, embedding_size)
        self.lstm = nn.LSTM(embedding_size, hidden_size, num_layers, batch_first=True,
                            dropout=dropout if num_layers > 1 else 0.0)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, tokens: Tensor, state: LSTMState | None = None) -> tuple[Tensor, LSTMState]:
        """Logits [B, T, V] for every position of `tokens` [B, T], and the final state."""
        out, state = self.lstm(self.embed(tokens), state)
        return self.head(self.drop(out)), state


class LSTMModel:
    """Runs an `LSTMNet` in eval mode under the protocol; hidden states are the query state.

    `vocab` names the symbols by id (the training vocabulary a checkpoint carries).
    """

    def __init__(self, net: LSTMNet, device: str | torch.device | None = None,
                 vocab: Sequence[str] | None = None):
        self.device = resolve_device(device)
        self.net = net.to(self.device).eval()
        self.vocab_size = net.config["vocab_size"]
        if vocab is not None and len(vocab) != self.vocab_size:
            raise ValueError(f"vocab has {len(vocab)} symbols, the network {self.vocab_size}")
        self.vocab = list(vocab) if vocab is not None else [str(i) for i in range(self.vocab_size)]

    @torch.inference_mode()
    def initial_state(self, histories: Sequence[Sequence[int]]) -> tuple[Tensor, LSTMState]:
        lengths = torch.tensor([len(h) for h in histories])
        if (lengths == 0).any():
            raise QueryError("an LSTM history must hold at least one symbol; start it with <BOS>")
        padded = torch.zeros(len(histories), int(lengths.max()), dtype=torch.long)
        for i, h in enumerate(histories):
            padded[i, : len(h)] = torch.as_tensor(list(h), dtype=torch.long)
        if (padded < 0).any() or (padded >= self.vocab_size).any():
            raise QueryError(f"history symbols must be ids in 0..{self.vocab_size - 1}")
        packed = nn.utils.rnn.pack_padded_sequence(
            self.net.embed(padded.to(self.device)), lengths, batch_first=True, enforce_sorted=False
        )
        out, state = self.net.lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        last = out[torch.arange(len(histories)), lengths.to(self.device) - 1]
        return torch.log_softmax(self.net.head(last).float(), -1), state

    @torch.inference_mode()
    def step(self, state: LSTMState, tokens: Tensor) -> tuple[Tensor, LSTMState]:
        logits, state = self.net(tokens.to(self.device)[:, None], state)
        return torch.log_softmax(logits[:, 0].float(), -1), state

    def select(self, state: LSTMState, index: Tensor) -> LSTMState:
        index = index.to(self.device)  # index_select: cheaper than state[0][:, index] on CPU
        return state[0].index_select(1, index), state[1].index_select(1, index)

    def concat(self, states: Sequence[LSTMState]) -> LSTMState:
        return torch.cat([s[0] for s in states], 1), torch.cat([s[1] for s in states], 1)
