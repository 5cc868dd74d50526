"""The exact oracles of section (h): models whose answers are known exactly, and queries on them.

Families: a random order-2 Markov chain and an order-4 HPYP n-gram on tiny Shakespeare (exact by
forward DP, K = 3..30); the paper authors' Shakespeare LSTM, a tiny random GPT-2 and a user's own
random GRU written against `seqq.models.protocol` (exact by enumeration, K ≤ 4); and the rare
set: hitting times at K = 4 on the authors' LSTM with p between 1e-7 and 1e-4, where replicate
methods were confidently wrong (issue 42). Every oracle's surrogate (for `twisted`,
`smc+surrogate` and `auto`) is an order-2 HPYP fitted on sequences sampled from the oracle itself,
never on its training data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

import seqq
from seqq import queries as Q
from seqq.errors import BudgetError
from seqq.estimators.surrogates import fit_surrogate
from seqq.models import MarkovModel
from seqq.models.automaton import ContextAutomaton
from seqq.models.protocol import SequenceModel
from seqq.models.sampling import sample_continuations
from seqq.queries import Query

P_RANGE = (1e-9, 0.5)  # exact answers of the kept queries spread over this range
RARE_RANGE = (1e-7, 1e-4)  # the rare set's
CANDIDATES = 8  # random queries drawn per query kept (the kept ones spread p evenly)
MAX_ENUMERATION = 40_000  # model calls an enumerated family's exact answer may cost
RARE_ENUMERATION = 400_000  # a hitting time at K = 4 over V = 68 costs ~305k calls
SURROGATE_ROWS = 200  # sequences sampled from an oracle to fit its surrogate …
SURROGATE_STEPS = 100  # … of this many steps (fewer within a small context)


@dataclass(frozen=True)
class Task:
    history: tuple[int, ...]
    query: Query
    label: str
    K: int
    p: float


@dataclass
class Oracle:
    family: str
    model: SequenceModel
    about: str
    surrogate: ContextAutomaton
    enumerated: bool = False  # exact answers by enumeration (else by the model's DP)
    tasks: list[Task] = field(default_factory=list)


# --- queries -------------------------------------------------------------------------------

KINDS = ("hit", "before", "at_least", "exactly", "within", "at")
MIXED = (0.2, 0.15, 0.3, 0.15, 0.1, 0.1)  # how often each kind is drawn
COUNTS = (0.2, 0, 0.4, 0.4, 0, 0)  # the count family (the GRU): counts and hitting times


def _queries(rng: np.random.Generator, symbols: Sequence[int], ks: Sequence[int],
             n: int, mix: Sequence[float] = MIXED) -> list[tuple[str, Query]]:
    """n random queries over sets of one to three of `symbols`, horizons from `ks`, kinds
    drawn with the weights `mix`."""
    out = []
    while len(out) < n:
        K = int(rng.choice(ks))
        size = int(rng.choice([1, 1, 2, 3]))
        picked = rng.choice(len(symbols), size=size + 1, replace=False)
        a = sorted(int(symbols[i]) for i in picked[:size])
        b = [int(symbols[picked[size]])]
        kind = rng.choice(KINDS, p=mix)
        n_a = int(rng.integers(1, max(2, 2 * K // 3 + 1)))
        if kind == "hit":
            out.append((f"τ({a}) = {K}", Q.hitting_time(a, K)))
        elif kind == "before":
            out.append((f"{a} before {b} within {K}", Q.a_before_b(a, b, K)))
        elif kind == "at_least":
            out.append((f"count({a}, {K}) ≥ {n_a}", Q.count(a, n_a, K, op=">=")))
        elif kind == "exactly":
            out.append((f"count({a}, {K}) = {n_a}", Q.count(a, n_a, K)))
        elif kind == "within":
            out.append((f"{a} within {K}", Q.occurs_within(a, K)))
        else:
            out.append((f"X{K} ∈ {a}", Q.event_at(a, K)))
    return out


def spread(tasks: Sequence[Task], n: int, p_range: tuple[float, float] = P_RANGE) -> list[Task]:
    """n of `tasks` whose p lie closest to n points evenly spaced in log p over `p_range`."""
    lo, hi = (math.log(x) for x in p_range)
    pool = [t for t in tasks if p_range[0] / 3 <= t.p <= p_range[1]]
    chosen: list[Task] = []
    for target in np.linspace(lo, hi, n):
        left = [t for t in pool if t not in chosen]
        if left:
            chosen.append(min(left, key=lambda t: abs(math.log(t.p) - target)))
    return sorted(chosen, key=lambda t: t.p)


def _exact_tasks(rng: np.random.Generator, histories: Callable[[], list[int]],
                 queries: list[tuple[str, Query]], n: int,
                 truth: Callable[[list[int], Query], float | None]) -> list[Task]:
    tasks = []
    for label, query in queries:
        history = histories()
        p = truth(history, query)
        if p is not None and p > 0:
            tasks.append(Task(tuple(history), query, label, query.horizon, p))
    return spread(tasks, n)


def _dp(model: ContextAutomaton) -> Callable[[list[int], Query], float]:
    return lambda history, query: math.exp(model.log_probability(history, query))


def _enumerated(model: SequenceModel, max_calls: int = MAX_ENUMERATION
                ) -> Callable[[list[int], Query], float | None]:
    def truth(history: list[int], query: Query) -> float | None:
        try:  # each query alone: its answer computed in another batch than the runs'
            return seqq.estimate(model, history, query, "exact", max_calls=max_calls).value
        except BudgetError:
            return None
    return truth


def _sampled_surrogate(model: SequenceModel, vocab: Sequence[str], starts: Callable[[], list[int]],
                       steps: int = SURROGATE_STEPS) -> ContextAutomaton:
    """An order-2 HPYP fitted on sequences sampled from the oracle itself (never on its data:
    `auto` is judged without a surrogate fitted on the oracle's own training data)."""
    begun = [starts() for _ in range(SURROGATE_ROWS)]
    drawn = sample_continuations(model, begun, steps, torch.Generator().manual_seed(0))
    sequences = [s + d for s, d in zip(begun, drawn.tolist(), strict=True)]
    return fit_surrogate(sequences, vocab, order=2, skip_first=False)


# --- families ------------------------------------------------------------------------------

def markov(size: int, device: str | None) -> Oracle:
    model = MarkovModel.random(vocab_size=12, order=2, concentration=0.5, seed=7)
    rng = np.random.default_rng(1)
    oracle = Oracle("markov", model, "random order-2 Markov chain, V = 12, Dirichlet(0.5) rows",
                    _sampled_surrogate(model, model.vocab, lambda: [0, 1]))
    oracle.tasks = _exact_tasks(rng, lambda: rng.integers(0, 12, 4).tolist(),
                                _queries(rng, range(12), range(3, 31), CANDIDATES * size), size,
                                _dp(model))
    return oracle


def _shakespeare_text() -> tuple[list[str], list[list[int]], list[list[int]]]:
    from seqq.data import load_dataset

    data = load_dataset("shakespeare")
    return data.vocab, data.train, data.test


def _windows(rng: np.random.Generator, blocks: list[list[int]], length: int) -> list[int]:
    block = blocks[int(rng.integers(len(blocks)))]
    start = int(rng.integers(1, len(block) - length))
    return block[start:start + length]


def hpyp(size: int, device: str | None) -> Oracle:
    from seqq.models.hpyp import HPYPModel

    vocab, train, test = _shakespeare_text()
    model = HPYPModel.fit(train, vocab, order=4)
    rng = np.random.default_rng(2)
    starts = np.random.default_rng(12)  # the surrogate's own draws leave the tasks' alone
    oracle = Oracle("hpyp", model, "order-4 HPYP (interpolated Kneser–Ney) on the tiny "
                    "Shakespeare train split, V = 66",
                    _sampled_surrogate(model, vocab, lambda: _windows(starts, test, 8)))
    oracle.tasks = _exact_tasks(rng, lambda: _windows(rng, test, 30),
                                _queries(rng, range(1, len(vocab)), range(3, 31),
                                         CANDIDATES * size), size, _dp(model))
    return oracle


def _authors_shakespeare(device: str | None) -> tuple[SequenceModel, list[list[int]], int]:
    """The authors' Shakespeare LSTM, the test split in its symbols, and its `<BOS>`."""
    from seqq.models.loading import load_model

    model = load_model({"type": "authors", "dataset": "shakespeare", "device": device})
    vocab, _, test = _shakespeare_text()
    index = {c: i for i, c in enumerate(model.vocab)}
    recode = [index.get(c, index["<BOS>"]) for c in vocab]  # every character is in both
    return model, [[recode[s] for s in block] for block in test], index["<BOS>"]


def authors_lstm(size: int, device: str | None) -> Oracle:
    model, test, bos = _authors_shakespeare(device)
    rng = np.random.default_rng(3)
    history = lambda: [bos, *_windows(rng, test, 40)]  # noqa: E731
    starts = np.random.default_rng(13)
    oracle = Oracle("authors-lstm", model, "the paper authors' Shakespeare LSTM (2×128, V = 68)",
                    _sampled_surrogate(model, model.vocab,
                                       lambda: [bos, *_windows(starts, test, 8)]),
                    enumerated=True)
    symbols = [i for i in range(model.vocab_size) if i != bos]
    oracle.tasks = _exact_tasks(rng, history, _queries(rng, symbols, (2, 3, 4), CANDIDATES * size),
                                size, _enumerated(model))
    return oracle


def authors_rare(size: int, device: str | None) -> Oracle:
    """Rare hitting times τ(a) = 4 of single symbols on the authors' LSTM, p in RARE_RANGE:
    candidates are screened with importance sampling (cheap and, here, within a few percent),
    and only the kept ones enumerated (~305k calls, seconds each)."""
    model, test, bos = _authors_shakespeare(device)
    rng = np.random.default_rng(5)
    history = lambda: [bos, *_windows(rng, test, 40)]  # noqa: E731
    oracle = Oracle("authors-rare", model, "rare hitting times (K = 4, p from 1e-7 to 1e-4) on "
                    "the authors' Shakespeare LSTM",
                    _sampled_surrogate(model, model.vocab, history), enumerated=True)
    symbols = [i for i in range(model.vocab_size) if i != bos]
    pairs = [(history(), int(rng.choice(symbols))) for _ in range(CANDIDATES * size * 4)]
    screened = seqq.estimate_many(model, [h for h, _ in pairs],
                                  [Q.hitting_time([a], 4) for _, a in pairs], "importance",
                                  budget=1000, seed=0)
    candidates = [Task(tuple(h), Q.hitting_time([a], 4), f"τ([{a}]) = 4", 4, e.value)
                  for (h, a), e in zip(pairs, screened, strict=True) if e.value > 0]
    exact = _enumerated(model, RARE_ENUMERATION)
    oracle.tasks = sorted((Task(t.history, t.query, t.label, 4, p)
                           for t in spread(candidates, size, RARE_RANGE)
                           if (p := exact(list(t.history), t.query))), key=lambda t: t.p)
    return oracle


def gpt2(size: int, device: str | None) -> Oracle:
    from transformers import GPT2Config, GPT2LMHeadModel

    from seqq.models.hf import HFCausalLM

    V = 24
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=16, n_head=2, n_positions=32, vocab_size=V,
                        bos_token_id=0, eos_token_id=0)
    net = GPT2LMHeadModel(config)
    with torch.no_grad():
        net.lm_head.weight.mul_(8.0)  # tied to the embeddings: peaky conditionals
    model = HFCausalLM(net, device=device)
    rng, starts = np.random.default_rng(4), np.random.default_rng(14)
    history = lambda: rng.integers(0, V, 3).tolist()  # noqa: E731
    oracle = Oracle("gpt2", model, "a random GPT-2 (2 layers of width 16, V = 24, head ×8)",
                    _sampled_surrogate(model, [str(v) for v in range(V)],
                                       lambda: starts.integers(0, V, 3).tolist(), steps=24),
                    enumerated=True)
    oracle.tasks = _exact_tasks(rng, history, _queries(rng, range(V), (2, 3, 4), CANDIDATES * size),
                                size, _enumerated(model))
    return oracle


class RandomGRU:
    """A user's own model, written against `seqq.models.protocol` the way the README shows: a
    random one-layer GRU over V symbols with a sharpened head (peaky, as trained models are)."""

    def __init__(self, vocab_size: int = 12, hidden: int = 16, seed: int = 2,
                 sharpness: float = 3.0) -> None:
        torch.manual_seed(seed)
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.head = nn.Linear(hidden, vocab_size)
        with torch.no_grad():
            self.head.weight.mul_(sharpness)

    @torch.no_grad()
    def initial_state(self, histories: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.zeros(len(histories), self.cell.hidden_size)
        longest = max((len(x) for x in histories), default=0)
        for i in range(longest):  # rows whose history has ended keep their state
            rows = torch.tensor([r for r, x in enumerate(histories) if len(x) > i], dtype=torch.long)
            tokens = torch.tensor([histories[r][i] for r in rows.tolist()], dtype=torch.long)
            h[rows] = self.cell(self.embed(tokens), h[rows])
        return self.head(h).log_softmax(-1), h

    @torch.no_grad()
    def step(self, state: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.cell(self.embed(tokens.cpu()), state)
        return self.head(h).log_softmax(-1), h

    def select(self, state: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return state[index.cpu()]


def gru(size: int, device: str | None) -> Oracle:
    model = RandomGRU()
    rng = np.random.default_rng(6)
    history = lambda: rng.integers(0, 12, 3).tolist()  # noqa: E731
    oracle = Oracle("gru", model, "a user's own random GRU (V = 12, width 16, head ×3): "
                    "counts and hitting times", _sampled_surrogate(
                        model, [str(v) for v in range(12)], history), enumerated=True)
    oracle.tasks = _exact_tasks(rng, history, _queries(rng, range(12), (3, 4),
                                                       CANDIDATES * size, COUNTS),
                                size, _enumerated(model))
    return oracle


# family -> (builder, enumerated: judged at the neural budgets and sizes)
FAMILIES: dict[str, tuple[Callable[[int, str | None], Oracle], bool]] = {
    "markov": (markov, False), "hpyp": (hpyp, False),  # exact by DP
    "authors-lstm": (authors_lstm, True), "gpt2": (gpt2, True), "gru": (gru, True),
    "authors-rare": (authors_rare, True),  # by enumeration (K ≤ 4)
}
