"""Independent exact answers for tests: brute-force enumeration of V^K through the protocol."""

from __future__ import annotations

import itertools
import math
import os
from collections import Counter

import torch

from seqq.models.protocol import SequenceModel
from seqq.queries import Query

# The neural test models' device: SEQQ_TEST_DEVICE=cuda runs every oracle test that uses them on
# a GPU (scripts/gpu_check.sh); CI and the default run them on the CPU.
DEVICE = os.environ.get("SEQQ_TEST_DEVICE", "cpu")


def path_log_probs(model: SequenceModel, history: list[int], K: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every path of length K and its log p, by expanding all V^k prefixes level by level."""
    V = model.vocab_size
    log_probs, state = model.initial_state([history])
    paths = torch.zeros(1, 0, dtype=torch.long)
    joint = torch.zeros(1, dtype=torch.float64)
    for k in range(K):
        joint = (joint[:, None] + log_probs.double().cpu()).flatten()
        parent = torch.arange(len(paths)).repeat_interleave(V)
        token = torch.arange(V).repeat(len(paths))
        paths = torch.cat([paths[parent], token[:, None]], 1)
        if k + 1 < K:
            state = model.select(state, parent)
            log_probs, state = model.step(state, token)
    return paths, joint


def brute_force(model: SequenceModel, history: list[int], query: Query) -> float:
    paths, joint = path_log_probs(model, history, query.horizon)
    inside = query.contains(paths, model.vocab_size)
    return math.exp(torch.logsumexp(joint[inside], 0).item()) if inside.any() else 0.0


def chain_masks(query: Query, V: int) -> torch.Tensor:
    """[K, V] allowed symbols per position of a product query (its lattice is a chain)."""
    lattice = query.lattice(V)
    assert (lattice.successor[:query.horizon] >= 0).all(), "not a product query"
    return lattice.allowed[:query.horizon]


def all_paths(V: int, K: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product(range(V), repeat=K)))


def random_markov(V: int = 6, order: int = 1, seed: int = 3):
    from seqq.models import MarkovModel

    return MarkovModel.random(vocab_size=V, order=order, concentration=0.7, seed=seed)


def tiny_lstm(V: int = 5, seed: int = 0):
    """A random non-Markov model with peaky conditionals, so beams and tails differ."""
    from seqq.models import LSTMModel, LSTMNet

    torch.manual_seed(seed)
    net = LSTMNet(vocab_size=V, hidden_size=16, num_layers=2, dropout=0.0, embedding_size=8)
    with torch.no_grad():
        net.head.weight.mul_(4.0)
    return LSTMModel(net, device=DEVICE)


def tiny_gpt2(V: int = 5, seed: int = 0):
    """A random 2-layer GPT-2 behind the HF adapter: attention + KV caches, V symbols."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from seqq.models.hf import HFCausalLM

    torch.manual_seed(seed)
    config = GPT2Config(n_layer=2, n_embd=16, n_head=2, n_positions=32, vocab_size=V,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)  # tied to the embeddings: peakier conditionals
    return HFCausalLM(model, device=DEVICE)


class PrefixRecording:
    """Wraps a model and records every prefix it evaluates (history + symbols stepped), apart
    from seqq's own counter: `rows` is the calls it served, and a method that never pays twice
    for a prefix records no duplicate (`distinct`)."""

    def __init__(self, model: SequenceModel):
        self.model, self.vocab_size, self.evaluated = model, model.vocab_size, []

    @property
    def rows(self) -> int:
        return len(self.evaluated)

    def distinct(self, copies: int = 1) -> bool:
        """No prefix evaluated more than `copies` times (a replicate method runs `copies`
        independent copies of each task, each paying for its own prefixes)."""
        return max(Counter(self.evaluated).values(), default=0) <= copies

    def initial_state(self, histories):
        prefixes = [tuple(h) for h in histories]
        self.evaluated += prefixes
        log_probs, inner = self.model.initial_state(histories)
        return log_probs, (inner, prefixes)

    def step(self, state, tokens):
        inner, prefixes = state
        prefixes = [p + (t,) for p, t in zip(prefixes, tokens.tolist(), strict=True)]
        self.evaluated += prefixes
        log_probs, inner = self.model.step(inner, tokens)
        return log_probs, (inner, prefixes)

    def select(self, state, index):
        inner, prefixes = state
        return self.model.select(inner, index), [prefixes[i] for i in index.tolist()]

    def concat(self, states):
        return (self.model.concat([s[0] for s in states]), [p for s in states for p in s[1]])


class WithoutConcat:
    """`model` without `concat`: its states cannot be joined, so steps from several states
    must run apart."""

    def __init__(self, model):
        self.model, self.vocab_size = model, model.vocab_size
        self.device = getattr(model, "device", None)

    def initial_state(self, histories):
        return self.model.initial_state(histories)

    def step(self, state, tokens):
        return self.model.step(state, tokens)

    def select(self, state, index):
        return self.model.select(state, index)
