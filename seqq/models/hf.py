"""Any HuggingFace causal LM (GPT-2, SmolLM2, ...) under the `SequenceModel` protocol.

Histories are encoded once, left-padded in one batch with an attention mask and explicit position
ids, so every row sees exactly its own tokens at positions 0..L-1. The state holds the KV cache;
`select` gathers its rows (duplicating them for samples and beams) and `step` feeds one token per
row. States are never mutated: each call builds a new cache object whose layers start from the
old tensors (the cache appends by concatenation, which leaves those tensors untouched).

The history's keys and values are stored once per history, not once per row
(`SharedHistoryLayer`): estimators keep the state of every prefix they expand (thousands of rows
per horizon step), and a full cache per row would copy the history into each of them. Rows
keep only the keys and values of the tokens after the history; each step joins the two for
attention and lets the joined copy go.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor
from transformers.cache_utils import DynamicLayer

from seqq.errors import QueryError
from seqq.models.device import resolve_device


@dataclass(frozen=True)
class HFState:
    cache: object  # transformers Cache (DynamicCache)
    mask: Tensor  # [B, T] 1 for real tokens, 0 for left padding
    positions: Tensor  # [B] position id of the next token
    longest: int  # an upper bound on `positions`, kept on the host so steps never wait on it


class SharedHistoryLayer(DynamicLayer):
    """One layer's KV cache: the histories' keys/values once ([H, heads, L_h, d]), which history
    each row continues (`owner`, [B]), and each row's own keys/values after it ([B, heads, s, d])."""

    def __init__(self, history_keys: Tensor, history_values: Tensor, owner: Tensor):
        super().__init__()
        self.history_keys, self.history_values, self.owner = history_keys, history_values, owner
        self.dtype, self.device = history_keys.dtype, history_keys.device
        empty = history_keys.new_zeros((len(owner), *history_keys.shape[1:2], 0,
                                        history_keys.shape[-1]))
        self.keys, self.values = empty, empty
        self.is_initialized = True

    def update(self, key_states: Tensor, value_states: Tensor, *args, **kwargs
               ) -> tuple[Tensor, Tensor]:
        """Append the new tokens to the rows' own part; return the whole [B, heads, L, d]."""
        self.keys = torch.cat([self.keys, key_states], -2)
        self.values = torch.cat([self.values, value_states], -2)
        return (torch.cat([self.history_keys.index_select(0, self.owner), self.keys], -2),
                torch.cat([self.history_values.index_select(0, self.owner), self.values], -2))

    def get_seq_length(self) -> int:
        return self.history_keys.shape[-2] + self.keys.shape[-2]

    def reorder_cache(self, beam_idx: Tensor) -> None:
        self.keys = self.keys.index_select(0, beam_idx)
        self.values = self.values.index_select(0, beam_idx)
        self.owner = self.owner.index_select(0, beam_idx)

    @classmethod
    def concat(cls, layers: Sequence[SharedHistoryLayer]) -> SharedHistoryLayer:
        """The rows of several layers as one; histories they do not share are stacked."""
        first = layers[0]
        joined = copy.copy(first)
        if all(layer.history_keys is first.history_keys for layer in layers):
            joined.owner = torch.cat([layer.owner for layer in layers])
        else:
            offset, owners = 0, []
            for layer in layers:
                owners.append(layer.owner + offset)
                offset += len(layer.history_keys)
            joined.history_keys = torch.cat([layer.history_keys for layer in layers])
            joined.history_values = torch.cat([layer.history_values for layer in layers])
            joined.owner = torch.cat(owners)
        joined.keys = torch.cat([layer.keys for layer in layers])
        joined.values = torch.cat([layer.values for layer in layers])
        return joined


def _share_histories(cache):
    """The cache of freshly encoded histories with each layer's keys/values as the shared
    history part; caches with other layer kinds (sliding windows, quantised) stay as they are."""
    if not all(type(layer) is DynamicLayer for layer in cache.layers):
        return cache
    shared = _fork(cache)
    shared.layers = [SharedHistoryLayer(layer.keys, layer.values,
                                        torch.arange(len(layer.keys), device=layer.keys.device))
                     for layer in cache.layers]
    return shared


def _concat_layers(layers: Sequence) -> object:
    if isinstance(layers[0], SharedHistoryLayer):
        return SharedHistoryLayer.concat(layers)
    joined = copy.copy(layers[0])
    joined.keys = torch.cat([layer.keys for layer in layers])
    joined.values = torch.cat([layer.values for layer in layers])
    return joined


def _fork(cache):
    """A new cache object sharing the old key/value tensors, so updating it leaves `cache` intact."""
    forked = copy.copy(cache)
    forked.layers = [copy.copy(layer) for layer in cache.layers]
    return forked


class HFCausalLM:
    """Adapter from a `transformers` causal LM to the protocol; log-probs are float32 [B, V]."""

    def __init__(self, model, tokenizer=None, device: str | torch.device | None = None):
        self.device = resolve_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        config = model.config
        self.vocab_size = int(model.get_output_embeddings().out_features)
        self.context_length = int(getattr(config, "n_positions", None)
                                  or getattr(config, "max_position_embeddings", None) or 1 << 30)
        bos = tokenizer.bos_token_id if tokenizer is not None else None
        self.bos_id = bos if bos is not None else getattr(config, "bos_token_id", None)
        # transformers 5 renamed the KV cache argument `past_key_values` to `cache` (the old
        # name warns, and goes in 5.40); older releases know only the old one
        parameters = inspect.signature(self.model.forward).parameters
        self._cache_argument = "cache" if "cache" in parameters else "past_key_values"

    @cached_property
    def vocab(self) -> list[str]:
        """The tokenizer's token for every id (ids it lacks, e.g. padded embedding rows, are
        named by their number), so text can be turned into ids and back."""
        known = min(len(self.tokenizer), self.vocab_size) if self.tokenizer is not None else 0
        tokens = self.tokenizer.convert_ids_to_tokens(list(range(known))) if known else []
        return [*tokens, *(str(i) for i in range(known, self.vocab_size))]

    def check_fits(self, history_length: int, horizon: int) -> None:
        """Raise if a history of this length plus `horizon` new tokens exceeds the context."""
        if history_length + horizon > self.context_length:
            raise QueryError(
                f"a history of {history_length} tokens plus horizon {horizon} exceeds the model's "
                f"context of {self.context_length} tokens; use a shorter history")

    def _history(self, h: Sequence[int]) -> list[int]:
        ids = [int(t) for t in h]
        if not ids:
            if self.bos_id is None:
                raise QueryError("empty history and the model has no BOS token to start from")
            ids = [self.bos_id]
        if min(ids) < 0 or max(ids) >= self.vocab_size:
            raise QueryError(f"history token ids must lie in 0..{self.vocab_size - 1}")
        return ids

    def _log_probs(self, logits: Tensor) -> Tensor:
        return torch.log_softmax(logits[:, -1].float(), -1)

    @torch.inference_mode()
    def initial_state(self, histories: Sequence[Sequence[int]]) -> tuple[Tensor, HFState]:
        rows = [self._history(h) for h in histories]
        width = max(len(r) for r in rows)
        self.check_fits(width, 1)
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        mask = torch.zeros(len(rows), width, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, width - len(r):] = torch.tensor(r)
            mask[i, width - len(r):] = 1
        positions = (mask.cumsum(-1) - 1).clamp_min(0)
        ids, mask, positions = ids.to(self.device), mask.to(self.device), positions.to(self.device)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
        return self._log_probs(out.logits), HFState(_share_histories(out[self._cache_argument]),
                                                    mask, mask.sum(-1), width)

    @torch.inference_mode()
    def step(self, state: HFState, tokens: Tensor) -> tuple[Tensor, HFState]:
        if state.longest >= self.context_length:
            raise QueryError(f"the prefix reached the model's context of {self.context_length} "
                             "tokens; use a shorter history or horizon")
        tokens = tokens.to(self.device).long()
        mask = torch.cat([state.mask, torch.ones_like(state.mask[:, :1])], 1)
        out = self.model(input_ids=tokens[:, None], attention_mask=mask,
                         position_ids=state.positions[:, None], use_cache=True,
                         **{self._cache_argument: _fork(state.cache)})
        return self._log_probs(out.logits), HFState(out[self._cache_argument], mask,
                                                    state.positions + 1, state.longest + 1)

    def select(self, state: HFState, index: Tensor) -> HFState:
        index = index.to(self.device).long()
        cache = _fork(state.cache)
        cache.reorder_cache(index)  # index_select per layer: new tensors, duplicates allowed
        return HFState(cache, state.mask[index], state.positions[index], state.longest)

    def concat(self, states: Sequence[HFState]) -> HFState:
        """Rows of several states (same depth of one batch of histories) as one state."""
        cache = _fork(states[0].cache)
        cache.layers = [_concat_layers([s.cache.layers[i] for s in states])
                        for i in range(len(cache.layers))]
        return HFState(cache, torch.cat([s.mask for s in states]),
                       torch.cat([s.positions for s in states]), max(s.longest for s in states))
