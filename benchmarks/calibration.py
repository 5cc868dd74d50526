"""(h) Calibration: do the intervals cover? Every method that takes a budget answers queries whose
exact value is known, many times each with independent seeds, at equal model-call budgets: the
coverage of its 95 % interval (`ci_low ≤ p ≤ ci_high`) among unflagged runs (`warning` is None) and
among all, the share of runs flagged, and the median relative absolute error. Oracles: a random
order-2 Markov chain (V = 12) and an order-4 HPYP n-gram fitted on the tiny Shakespeare train split
(V = 66), both exact by forward DP, at K = 3..30; the paper authors' Shakespeare LSTM and a tiny
random GPT-2 (2 layers of width 16, V = 24, peaky head), exact by enumeration (each query alone),
at K ≤ 4. Queries (hitting times, counts with thresholds, A before B, A within K, X_K ∈ A, over one
to three symbols, each from its own history) are drawn at random and chosen so that their exact p
spread evenly on a log scale from 1e-9 to 0.5. `twisted` is steered by an order-2 HPYP (one symbol
of context, below every oracle's) fitted on the family's data or on sequences sampled from the
oracle, and so is `smc+surrogate` (smc with that twist); the other methods run untwisted. Runs of
one query are copies of one task inside one `estimate_many` call (each task draws independently).
Methods without a budget (`coverage_beam`) are left out; deterministic ones (the beams, `exact`)
run once per query and are judged by their certain bounds, which must hold in every run. The same
runs also give the coverage of other interval constructions (item 2 of issue 31): the plain normal
p̂ ± z·SE clipped to [0, 1] (t quantile for replicates), and for the i.i.d. samplers whose estimate
is the mean of its weights (naive, uniform, importance, twisted, mixture, klm) a percentile
bootstrap of that mean, and for the replicate methods (smc, randomized_beam, hindsight_gumbel)
Cox's interval for a log-normal mean fitted to the replicates' logs (issue 42, item 1).
"""

from __future__ import annotations

import math
import sys
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from scipy import stats

import seqq
from benchmarks.plans import Calibration, Plan
from benchmarks.report import Section, describe, table
from seqq import queries as Q
from seqq.errors import BudgetError
from seqq.estimators import METHODS, Guarantee, driver
from seqq.estimators.estimate import (
    FLOAT_FLOOR,
    REPLICATED,
    SAMPLED,
    Estimate,
    floored,
    interval,
)
from seqq.estimators.surrogates import fit_surrogate
from seqq.models import MarkovModel
from seqq.models.automaton import ContextAutomaton
from seqq.models.protocol import SequenceModel
from seqq.models.sampling import sample_continuations
from seqq.queries import Query

LEVEL = 0.95
TARGET = (0.90, 0.98)  # issue 31: coverage of unflagged runs on every family and budget
MAX_FLAGGED = 0.10  # issue 31: at most this share flagged at 65k calls
P_RANGE = (1e-9, 0.5)
CANDIDATES = 8  # random queries drawn per query kept (the kept ones spread p evenly)
MAX_ENUMERATION = 40_000  # model calls an enumerated family's exact answer may cost
CALLS_PER_CALL = 1_000_000  # budget summed over the tasks of one estimate_many call
FIGURES = Path(__file__).parent / "figures"  # coverage against p, PNG + PDF
RUNS_CSV = Path("outputs") / "benchmarks"  # every run, one row each (not committed)
IID = ("naive", "uniform", "importance", "twisted", "mixture", "klm")  # value = mean weight
DIAGNOSTICS = ("ess", "pareto_k", "nonzero", "replicate_rel_se")  # columns of the runs' CSV
P_BINS = (1e-9, 1e-7, 1e-5, 1e-3, 1e-2, 1e-1, 0.5)


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


@dataclass
class Run:
    family: str
    budget: int
    method: str
    task: int
    K: int
    p: float
    value: float
    stderr: float | None
    kind: str
    ci: tuple[float, float] | None
    normal: tuple[float, float] | None
    bootstrap: tuple[float, float] | None
    flagged: bool
    bounds: tuple[float, float] | None
    calls: int
    diagnostics: dict[str, float] = field(default_factory=dict)
    label: str = ""  # the query
    cox: tuple[float, float] | None = None  # replicate methods: Cox's log-normal-mean interval
    t_mean: tuple[float, float] | None = None  # replicate methods: log-normal t on their mean

    @property
    def covered(self) -> bool:
        return _inside(self.ci, self.p)

    @property
    def rae(self) -> float:
        return abs(self.value - self.p) / self.p


def _inside(interval: tuple[float, float] | None, p: float) -> bool:
    return interval is not None and interval[0] <= p <= interval[1]


# --- oracles -------------------------------------------------------------------------------

def _queries(rng: np.random.Generator, symbols: Sequence[int], ks: Sequence[int],
             n: int) -> list[tuple[str, Query]]:
    """n random queries over sets of one to three of `symbols`, horizons from `ks`."""
    out = []
    while len(out) < n:
        K = int(rng.choice(ks))
        size = int(rng.choice([1, 1, 2, 3]))
        picked = rng.choice(len(symbols), size=size + 1, replace=False)
        a = sorted(int(symbols[i]) for i in picked[:size])
        b = [int(symbols[picked[size]])]
        kind = rng.choice(["hit", "before", "at_least", "exactly", "within", "at"],
                          p=[0.2, 0.15, 0.3, 0.15, 0.1, 0.1])
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


def spread(tasks: Sequence[Task], n: int) -> list[Task]:
    """n of `tasks` whose p lie closest to n points evenly spaced in log p over P_RANGE."""
    lo, hi = (math.log(x) for x in P_RANGE)
    pool = [t for t in tasks if P_RANGE[0] / 3 <= t.p <= P_RANGE[1]]
    chosen: list[Task] = []
    for target in np.linspace(lo, hi, n):
        left = [t for t in pool if t not in chosen]
        if left:
            chosen.append(min(left, key=lambda t: abs(math.log(t.p) - target)))
    return sorted(chosen, key=lambda t: t.p)


def _exact_tasks(model: SequenceModel, rng: np.random.Generator, histories: Callable[[], list[int]],
                 symbols: Sequence[int], ks: Sequence[int], n: int,
                 truth: Callable[[list[int], Query], float | None]) -> list[Task]:
    tasks = []
    for label, query in _queries(rng, symbols, ks, CANDIDATES * n):
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


def _sampled_surrogate(model: SequenceModel, vocab: Sequence[str], starts: list[list[int]],
                       steps: int) -> ContextAutomaton:
    """An order-2 HPYP fitted on sequences sampled from the oracle itself."""
    drawn = sample_continuations(model, starts, steps, torch.Generator().manual_seed(0))
    sequences = [s + d for s, d in zip(starts, drawn.tolist(), strict=True)]
    return fit_surrogate(sequences, vocab, order=2, skip_first=False)


def markov(size: int, device: str | None) -> Oracle:
    model = MarkovModel.random(vocab_size=12, order=2, concentration=0.5, seed=7)
    rng = np.random.default_rng(1)
    oracle = Oracle("markov", model, "random order-2 Markov chain, V = 12, Dirichlet(0.5) rows",
                    _sampled_surrogate(model, model.vocab, [[0, 1]] * 200, 100))
    oracle.tasks = _exact_tasks(model, rng, lambda: rng.integers(0, 12, 4).tolist(),
                                range(12), range(3, 31), size, _dp(model))
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
    oracle = Oracle("hpyp", model, "order-4 HPYP (interpolated Kneser–Ney) on the tiny "
                    "Shakespeare train split, V = 66", fit_surrogate(train, vocab, order=2))
    oracle.tasks = _exact_tasks(model, rng, lambda: _windows(rng, test, 30),
                                range(1, len(vocab)), range(3, 31), size, _dp(model))
    return oracle


def authors_lstm(size: int, device: str | None) -> Oracle:
    from seqq.models.loading import load_model

    model = load_model({"type": "authors", "dataset": "shakespeare", "device": device})
    vocab, train, test = _shakespeare_text()
    index = {c: i for i, c in enumerate(model.vocab)}
    recode = [index.get(c, index["<BOS>"]) for c in vocab]  # every character is in both
    train = [[recode[s] for s in block] for block in train]
    test = [[recode[s] for s in block] for block in test]
    rng = np.random.default_rng(3)
    bos = index["<BOS>"]
    oracle = Oracle("authors-lstm", model, "the paper authors' Shakespeare LSTM (2×128, V = 68)",
                    fit_surrogate(train, model.vocab, order=2), enumerated=True)
    oracle.tasks = _exact_tasks(model, rng, lambda: [bos, *_windows(rng, test, 40)],
                                [i for i in range(model.vocab_size) if i != bos], (2, 3, 4),
                                size, _enumerated(model))
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
    rng = np.random.default_rng(4)
    starts = [rng.integers(0, V, 3).tolist() for _ in range(400)]
    oracle = Oracle("gpt2", model, "a random GPT-2 (2 layers of width 16, V = 24, head ×8)",
                    _sampled_surrogate(model, [str(v) for v in range(V)], starts, 24),
                    enumerated=True)
    oracle.tasks = _exact_tasks(model, rng, lambda: rng.integers(0, V, 3).tolist(), range(V),
                                (2, 3, 4), size, _enumerated(model))
    return oracle


FAMILIES: dict[str, tuple[Callable[[int, str | None], Oracle], bool]] = {
    "markov": (markov, False), "hpyp": (hpyp, False),  # exact by DP
    "authors-lstm": (authors_lstm, True), "gpt2": (gpt2, True),  # by enumeration (K ≤ 4)
}


# --- runs ----------------------------------------------------------------------------------

VARIANTS = {"smc+surrogate": "smc"}  # a method run with the family's surrogate, by its label


def budgeted_methods() -> list[str]:
    """Every registered method that takes a budget (all but `exact` and `coverage_beam`), and
    the VARIANTS."""
    return [*(name for name, m in METHODS.items() if m.takes_budget), *VARIANTS]


def registered(label: str) -> str:
    return VARIANTS.get(label, label)


def deterministic(method: str) -> bool:
    return METHODS[registered(method)].guarantee is Guarantee.LOWER_BOUND


@contextmanager
def recorded_weights() -> Iterator[list]:
    """Each estimate's log weights, in the order the driver hands them to `with_uncertainty`
    (one call per returned estimate; replicate methods pass none)."""
    seen: list = []
    inner = driver.with_uncertainty

    def recording(estimate, kind, level, log_weights=None, **kw):
        seen.append(None if log_weights is None else log_weights.double().cpu().numpy())
        return inner(estimate, kind, level, log_weights, **kw)

    driver.with_uncertainty = recording
    try:
        yield seen
    finally:
        driver.with_uncertainty = inner


def normal_interval(e: Estimate, level: float = LEVEL) -> tuple[float, float] | None:
    """p̂ ± q·SE clipped to [0, 1] (q: normal, or Student's t for replicates), held to the
    same float floor as every interval of `seqq.estimators.uncertainty` (constructions are
    compared on their shape alone); the estimate's own interval where it has no standard
    error (exact, zero, bounds)."""
    if e.interval_kind not in SAMPLED or e.stderr is None:
        return None if e.ci_low is None else (e.ci_low, e.ci_high)
    q = (1 + level) / 2
    z = stats.norm.ppf(q) if e.interval_kind == "log-normal" else stats.t.ppf(q, e.dof)
    return floored(e.value, e.value - z * e.stderr, e.value + z * e.stderr)


def bootstrap_interval(log_w: np.ndarray, value: float, resamples: int, seed: int,
                       level: float = LEVEL) -> tuple[float, float] | None:
    """Percentile bootstrap of the mean weight (None unless `value` is that mean). Resampled
    as counts over the distinct weights, so a trie's repeated paths cost nothing."""
    if log_w is None or not len(log_w) or resamples < 1:
        return None
    w = np.exp(log_w)
    if not math.isclose(w.mean(), value, rel_tol=1e-6, abs_tol=1e-300):
        return None
    distinct, counts = np.unique(w, return_counts=True)
    rng = np.random.default_rng(seed)
    drawn = rng.multinomial(len(w), counts / len(w), size=resamples)
    means = drawn @ distinct / len(w)
    alpha = (1 - level) / 2
    return floored(value, float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha)))


def replicate_interval(e: Estimate, kind: str, level: float = LEVEL
                       ) -> tuple[float, float] | None:
    """A replicate method's interval built as `kind` ("replicates": log-normal t on their mean;
    "log-replicates": Cox's on their logs) whatever the method's own kind, so (h) compares the
    two on the same runs (issue 42, item 1). None for other methods, or Cox with a replicate
    of 0 (no log)."""
    values = e.extras.get("replicates")
    if e.interval_kind not in REPLICATED or not values or (
            kind == "log-replicates" and min(values) <= 0):
        return None
    return interval(kind, e.value, e.stderr, e.dof, level, replicates=values)


def _seed(*parts: object) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode()) & 0x7FFFFFFF


def measure(oracle: Oracle, method: str, budget: int, runs: int, resamples: int) -> list[Run]:
    """`runs` independent estimates of every task (one if the method is deterministic)."""
    copies = 1 if deterministic(method) else runs
    twisted = method in VARIANTS or METHODS[method].surrogate == "required"
    options = {"surrogate": oracle.surrogate} if twisted else {}
    per_call = max(1, CALLS_PER_CALL // (budget * copies))
    out: list[Run] = []
    for start in range(0, len(oracle.tasks), per_call):
        chunk = list(enumerate(oracle.tasks))[start:start + per_call]
        histories = [list(t.history) for _, t in chunk for _ in range(copies)]
        queries = [t.query for _, t in chunk for _ in range(copies)]
        seed = _seed(oracle.family, method, budget, start)
        try:
            with recorded_weights() as weights:
                estimates = seqq.estimate_many(oracle.model, histories, queries,
                                               registered(method), budget=budget, seed=seed,
                                               level=LEVEL, **options)
        except BudgetError:
            continue  # this budget cannot buy the method's least run on these tasks
        assert len(weights) == len(estimates), "the driver's uncertainty hook moved"
        for j, (e, log_w) in enumerate(zip(estimates, weights, strict=True)):
            i, task = chunk[j // copies]
            boot = (bootstrap_interval(log_w, e.value, resamples, seed + j)
                    if method in IID and e.interval_kind == "log-normal" else None)
            bounds = None if e.lower is None else (e.lower, e.upper)
            out.append(Run(oracle.family, budget, method, i, task.K, task.p, e.value, e.stderr,
                           e.interval_kind, None if e.ci_low is None else (e.ci_low, e.ci_high),
                           normal_interval(e), boot, e.warning is not None, bounds,
                           e.model_calls, e.diagnostics, task.label,
                           replicate_interval(e, "log-replicates"),
                           replicate_interval(e, "replicates")))
    return out


def exact_bounds(oracle: Oracle) -> list[Run]:
    """`exact` (enumeration) on every task it can afford, all in one batch: its value and
    bounds against the oracle's answer computed alone (DP, or enumeration in another batch)."""
    affordable = _enumerated(oracle.model)
    cheap = [(i, t) for i, t in enumerate(oracle.tasks)
             if oracle.enumerated or affordable(list(t.history), t.query) is not None]
    if not cheap:
        return []
    estimates = seqq.estimate_many(oracle.model, [list(t.history) for _, t in cheap],
                                   [t.query for _, t in cheap], "exact",
                                   max_calls=MAX_ENUMERATION)
    return [Run(oracle.family, 0, "exact", i, t.K, t.p, e.value, e.stderr, e.interval_kind,
                (e.ci_low, e.ci_high), (e.ci_low, e.ci_high), None, e.warning is not None,
                None if e.lower is None else (e.lower, e.upper), e.model_calls, e.diagnostics,
                t.label)
            for (i, t), e in zip(cheap, estimates, strict=True)]


# --- summaries -----------------------------------------------------------------------------

def _share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else math.nan


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.0f} %"


def _cell(x: float, n: int) -> str:
    return "-" if not n else f"{_pct(x)} ({n})"


@dataclass(frozen=True)
class Cell:
    """One method on one family at one budget."""

    runs: int
    unflagged: int
    coverage_unflagged: float
    coverage_all: float
    flagged: float
    median_rae: float
    bounds: int  # runs with certain bounds
    bounds_hold: float

    @classmethod
    def of(cls, runs: Sequence[Run]) -> Cell:
        kept = [r for r in runs if not r.flagged]
        bounded = [r for r in runs if r.bounds is not None]
        return cls(len(runs), len(kept), _share([r.covered for r in kept]),
                   _share([r.covered for r in runs]), _share([r.flagged for r in runs]),
                   float(np.median([r.rae for r in runs])) if runs else math.nan,
                   len(bounded), _share([_inside(r.bounds, r.p) for r in bounded]))

    def meets(self) -> bool:
        return TARGET[0] <= self.coverage_unflagged <= TARGET[1]


def _outside(coverage: float) -> float:
    """How far a coverage lies outside the target band (0 inside it)."""
    return max(TARGET[0] - coverage, coverage - TARGET[1], 0.0)


def cells(runs: Sequence[Run]) -> dict[tuple[str, int, str], Cell]:
    groups: dict[tuple[str, int, str], list[Run]] = {}
    for r in runs:
        groups.setdefault((r.family, r.budget, r.method), []).append(r)
    return {key: Cell.of(group) for key, group in groups.items()}


def verdicts(by_cell: dict[tuple[str, int, str], Cell], methods: Sequence[str],
             top_budget: int) -> list[list[str]]:
    """Per method: the range of its unflagged coverage over families and budgets, its
    flagged share at the largest budget, and whether both meet issue 31's target."""
    rows = []
    for method in methods:
        if deterministic(method):
            continue
        top = [c.flagged for k, c in by_cell.items() if k[2] == method and k[1] == top_budget]
        mine = {k: c for k, c in by_cell.items() if k[2] == method and c.unflagged}
        if not mine:
            rows.append([method, "-", "every run flagged", _pct(max(top)) if top else "-",
                         "no: every run flagged"])
            continue
        cov = [c.coverage_unflagged for c in mine.values()]
        worst = max(mine, key=lambda k: (_outside(mine[k].coverage_unflagged),
                                         abs(mine[k].coverage_unflagged - LEVEL)))
        ok_cov = all(c.meets() for c in mine.values()) and len(mine) == len(
            [k for k in by_cell if k[2] == method])
        ok_flag = bool(top) and max(top) <= MAX_FLAGGED
        rows.append([method, f"{_pct(min(cov))} – {_pct(max(cov))}",
                     f"{worst[0]} @ {worst[1]:,}: {_pct(mine[worst].coverage_unflagged)}",
                     _pct(max(top)) if top else "-",
                     "yes" if ok_cov and ok_flag else
                     "no: " + ", ".join(x for x, bad in (("coverage", not ok_cov),
                                                         ("flagged", not ok_flag)) if bad)])
    return rows


def interval_rows(runs: Sequence[Run], families: Sequence[str],
                  methods: Sequence[str]) -> list[list[str]]:
    """Coverage of unflagged runs by construction, per family (all budgets) and overall;
    where an interval missed, the share that missed below p (p above the interval)."""
    rows = []
    names = {"log-normal": "log-normal", "replicates": "log-normal t",
             "log-replicates": "Cox log-normal mean t"}
    pick: dict[str, Callable[[Run], tuple[float, float] | None]] = {
        "current": lambda r: r.ci, "normal": lambda r: r.normal,
        "bootstrap": lambda r: r.bootstrap, "log-normal t": lambda r: r.t_mean,
        "Cox log-normal mean t": lambda r: r.cox}
    for method in methods:
        if deterministic(method):
            continue
        kind = METHODS[registered(method)].interval_kind
        replicated = kind in REPLICATED
        mine = [r for r in runs if r.method == method and not r.flagged]
        for name, get in pick.items():
            if (name == "bootstrap" and method not in IID) or name == names[kind] or (
                    name in names.values() and not replicated):
                continue
            if name == "current":
                name = f"{names[kind]} (current)"
            elif name == "normal" and replicated:
                name = "normal t"
            cols = []
            for fam in [*families, None]:
                sel = [r for r in mine if (fam is None or r.family == fam)
                       and get(r) is not None]
                cols.append(_cell(_share([_inside(get(r), r.p) for r in sel]), len(sel)))
            missed = [r for r in mine if get(r) is not None and not _inside(get(r), r.p)]
            low = _share([get(r)[1] < r.p for r in missed])
            rows.append([method, name, *cols, _pct(low)])
    return rows


def figure(runs: Sequence[Run], methods: Sequence[str], budgets: Sequence[int],
           out: Path) -> list[Path]:
    """Coverage of unflagged runs against exact p (binned), one panel per budget, one line
    per sampling method, all families pooled."""
    from seqq.reports.plotting import grid, legend, method_colors, save, suptitle

    shown = [m for m in methods if not deterministic(m)]
    colors = method_colors(shown)
    markers = "osD^v<>pP*Xhd"
    fig, axes = grid(1, len(budgets), size=(4.6, 3.6), sharey=True)
    for ax, budget in zip(axes[0], budgets, strict=True):
        ax.axhspan(100 * TARGET[0], 100 * TARGET[1], color="0.88", label="target 90–98 %")
        ax.axhline(100 * LEVEL, color="0.4", lw=0.8, ls="--", label="nominal 95 %")
        for j, method in enumerate(shown):
            xs, ys = [], []
            for lo, hi in zip(P_BINS[:-1], P_BINS[1:], strict=True):
                sel = [r for r in runs if r.method == method and r.budget == budget
                       and not r.flagged and lo <= r.p < hi * (1 + 1e-12)]
                if len(sel) >= 3:
                    xs.append(math.sqrt(lo * hi))
                    ys.append(100 * _share([r.covered for r in sel]))
            ax.plot(xs, ys, marker=markers[j % len(markers)], ms=4, lw=1.2,
                    ls=("-", "--", "-.", ":")[j % 4], color=colors[method], label=method)
        ax.set_xscale("log")
        ax.set_xlim(P_BINS[0] / 2, 1)
        ax.set_ylim(-3, 103)
        ax.set_xlabel("exact p (bins 1e-9, 1e-7, 1e-5, 1e-3, 0.01, 0.1, 0.5)", fontsize=8)
        ax.set_title(f"budget {budget:,} model calls", fontsize=9)
    axes[0][0].set_ylabel("coverage of the 95 % interval,\nunflagged runs (%)")
    suptitle(fig, "Calibration: how often the 95 % interval holds the exact value")
    legend(fig, axes)
    return save(fig, out, "calibration_coverage")


def _write_runs(runs: Sequence[Run], path: Path) -> None:
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["family", "budget", "method", "task", "K", "p", "value", "stderr", "kind",
                      "ci_low", "ci_high", "normal_low", "normal_high", "boot_low", "boot_high",
                      "flagged", "lower", "upper", "calls", *DIAGNOSTICS, "query"])
        for r in runs:
            pairs = [x if x is not None else ("", "") for x in (r.ci, r.normal, r.bootstrap)]
            bounds = r.bounds if r.bounds is not None else ("", "")
            out.writerow([r.family, r.budget, r.method, r.task, r.K, r.p, r.value,
                          "" if r.stderr is None else r.stderr, r.kind,
                          *(v for pair in pairs for v in pair), int(r.flagged), *bounds, r.calls,
                          *(r.diagnostics.get(d, "") for d in DIAGNOSTICS), r.label])


def _shown(path: Path, root: Path) -> str:
    """`path` relative to `root` where it lies below it (the figure beside RESULTS.md)."""
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


# --- the section ---------------------------------------------------------------------------

def run(plan: Plan, device: str | None, methods: Sequence[str] | None = None) -> Section:
    cal: Calibration = plan.calibration
    methods = list(methods or budgeted_methods())
    runs: list[Run] = []
    oracles: list[Oracle] = []
    started = time.perf_counter()
    for family in cal.families:
        build, neural = FAMILIES[family]
        size = cal.neural_queries if neural else cal.queries
        if not size:
            continue
        print(f"  {family}: oracle and {size} queries", file=sys.stderr, flush=True)
        oracle = build(size, device)
        oracles.append(oracle)
        runs += exact_bounds(oracle)
        for budget in cal.neural_budgets if neural else cal.budgets:
            for method in methods:
                t0 = time.perf_counter()
                got = measure(oracle, method, budget,
                              cal.neural_runs if neural else cal.runs, cal.bootstrap)
                runs += got
                print(f"  {family} @ {budget}: {method} ({len(got)} runs, "
                      f"{time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    minutes = (time.perf_counter() - started) / 60
    sampled = [r for r in runs if r.method != "exact"]
    by_cell = cells(sampled)
    budgets = sorted({r.budget for r in sampled})
    families = [o.family for o in oracles]
    _write_runs(runs, RUNS_CSV / f"calibration_{'_'.join(map(str, budgets))}.csv")
    paths = figure(sampled, methods, budgets, FIGURES) if sampled else []

    body = [describe(__doc__), "",
            f"{len(runs):,} runs in {minutes:.1f} min. Oracles:", ""]
    for o in oracles:
        ps = [t.p for t in o.tasks]
        ks = [t.K for t in o.tasks]
        body.append(f"- **{o.family}**: {o.about}; {len(o.tasks)} queries, p from "
                    f"{min(ps):.1e} to {max(ps):.2g}, K from {min(ks)} to {max(ks)}; "
                    f"`twisted`'s surrogate: order-2 HPYP, {o.surrogate.num_contexts:,} contexts.")
    body += ["", f"Target (issue 31): coverage of unflagged runs {_pct(TARGET[0])}–"
             f"{_pct(TARGET[1])} on every family and budget, at most {_pct(MAX_FLAGGED)} flagged "
             f"at 65k calls (here: at the largest budget measured, {max(budgets):,}).", ""]
    top = max(budgets)
    body += ["### Which methods meet the target", ""]
    body += table(["method", "coverage unflagged (min – max)", "furthest from target",
                   f"flagged at {top:,} (worst family)", "meets the target"],
                  verdicts(by_cell, methods, top))
    for family in families:
        for budget in budgets:
            rows = []
            for method in methods:
                c = by_cell.get((family, budget, method))
                if c is None:
                    rows.append([method, 0, "-", "-", "-", "-", "cannot run at this budget"])
                    continue
                note = ("deterministic: interval = certain bounds" if deterministic(method)
                        else "")
                rows.append([method, c.runs, _pct(c.coverage_unflagged), _pct(c.coverage_all),
                             _pct(c.flagged), f"{c.median_rae:.3g}",
                             f"{_pct(c.bounds_hold)} of {c.bounds}" if c.bounds else note])
            body += ["", f"### {family}, budget {budget:,} model calls", ""]
            body += table(["method", "runs", "coverage unflagged", "coverage all", "flagged",
                           "median RAE", "certain bounds hold"], rows)
    exact_runs = [r for r in runs if r.method == "exact"]
    if exact_runs:
        body += ["", "### `exact` (enumeration, all affordable queries in one batch)", ""]
        body += table(["family", "queries", "lower ≤ p ≤ upper", "largest |value − p| / p"],
                      [[f, len(rs), _pct(_share([_inside(r.bounds, r.p) for r in rs])),
                        f"{max(r.rae for r in rs):.2g}"]
                       for f in families if (rs := [r for r in exact_runs if r.family == f])])
    body += ["", "### Interval constructions on the same runs (unflagged, all budgets)", "",
             "Coverage (runs). Every construction is held to the same float floor "
             f"(p̂·(1 ± {FLOAT_FLOOR:.2g})), so they differ in shape only. `misses below`: of the "
             "intervals that missed, the share that lay wholly below p (p above the interval).",
             ""]
    body += table(["method", "interval", *families, "all", "misses below"],
                  interval_rows(sampled, families, methods))
    if paths:
        here = Path(__file__).parent
        body += ["", f"Figure: `{_shown(paths[0], here.parent)}` (and `.pdf`): coverage of "
                 "unflagged runs against exact p, one panel per budget, families pooled, bins "
                 "with at least 3 runs.", "", f"![coverage against p]({_shown(paths[0], here)})"]
    return Section("h", "Calibration of intervals against exact answers", body)
