"""How much each mode measures: `smoke` (tests, seconds), `quick` (< 3 minutes; section (h)
20 minutes on one core, (l) ~5 minutes on two idle cores, 11 at load 8), `full`."""

from __future__ import annotations

from dataclasses import dataclass

from seqq.models.batching import SIZES


@dataclass(frozen=True)
class Calibration:
    """How much section (h) measures: exact-DP oracle families (Markov, HPYP: K = 3..30) and
    enumerated ones (the authors' LSTM, a tiny GPT-2, a random GRU, the rare set: K ≤ 4; see
    benchmarks/calibration_oracles.py), queries per family with p spread over a log range, and
    independent runs of each query, each at its own budget drawn log-uniformly from `budgets`
    (the same draws for every method), so that no budget is privileged (issue 51)."""

    families: tuple[str, ...]
    budgets: tuple[int, int]  # least and most model calls a run's budget is drawn between
    queries: int  # per exact-DP family
    runs: int  # runs of each query per method
    neural_queries: int  # the same for the enumerated families
    neural_runs: int
    bootstrap: int = 200  # resamples of the bootstrap interval (i.i.d. sampling methods)
    methods: tuple[str, ...] | None = None  # None: every method that takes a budget, and auto

    def __post_init__(self) -> None:
        if not 1 <= self.budgets[0] <= self.budgets[1]:
            raise ValueError(f"calibration budgets must be a range lo ≤ hi, got {self.budgets}")


@dataclass(frozen=True)
class LMCost:
    """How much section (l) measures: a grid of batch sizes × history lengths for the bare
    step and stock decoding, and every estimator at one cell of it."""

    subject: str  # benchmarks.lm_cost.SUBJECTS name
    batches: tuple[int, ...]  # rows stepped at once (split between the shards: even)
    lengths: tuple[int, ...]  # history lengths in tokens
    steps: int  # decoding steps per row after its history
    distinct: int  # distinct histories the rows of a cell continue (as estimators' samples do)
    cell: tuple[int, int]  # (batch, history length) the estimators are compared at
    histories: int  # histories the estimators answer (split between the shards)
    calls: int  # model calls per history each estimator (and the judge, at most) spends
    K: int = 4  # the hitting-time horizon
    repeats: int = 1  # interleaved repeats; medians are reported

    def __post_init__(self) -> None:
        if self.cell not in self.cells:
            raise ValueError(f"the estimators' cell {self.cell} is not in the grid")

    @property
    def cells(self) -> list[tuple[int, int]]:
        return [(batch, length) for length in self.lengths for batch in self.batches]


@dataclass(frozen=True)
class Plan:
    models: tuple[str, ...]  # benchmarks.zoo names, for the throughput section
    samples: int  # samples (and beam widths) per query for LSTMs
    lm_samples: int  # the same for transformer LMs (V = 50k makes every row 50k log-probs)
    K: int  # horizon of the hitting-time queries
    histories: int  # (history, query) pairs answered by one estimate_many call
    lm_histories: int  # the same for transformer LMs
    repeats: int  # interleaved repeats; medians are reported
    scaling_hidden: int  # LSTM hidden size of the scaling section (V varies along its axis)
    scaling: dict[str, tuple[int, ...]]  # axis -> values; the others stay at their base values
    scaling_base: dict[str, int]
    scaling_methods: tuple[str, ...]
    gt_models: tuple[str, ...]  # benchmarks.zoo names, for the ground-truth cost section
    gt_ks: tuple[int, ...]
    gt_histories: int
    chunk_model: str
    chunk_rows: int  # rows stepped at once in the row-chunk section (20 000 in the issue)
    chunk_reference: int  # the batch size chunked stepping is compared against (1 000)
    chunk_steps: int  # chained steps per row in the row-chunk section
    overhead_models: tuple[str, ...]  # benchmarks.zoo names, for where an estimate's time goes
    overhead_methods: tuple[str, ...]
    overhead_samples: tuple[int, ...]  # samples (beam widths) per query along S, for LSTMs
    overhead_lm_samples: tuple[int, ...]  # the same for transformer LMs
    calibration: Calibration  # section (h)
    judge: tuple[int, int]  # section (k): queries per exact oracle, seeds per query
    lm: LMCost  # section (l)
    chunk_sizes: tuple[int, ...] = SIZES  # batch sizes the chunk measurement tries


PLANS = {
    "smoke": Plan(
        models=("lstm-tiny",), samples=40, lm_samples=20, K=4, histories=3, lm_histories=2,
        repeats=3, scaling_hidden=8,
        scaling={"N": (1, 2, 4), "S": (20, 40, 80), "K": (3, 6, 12), "V": (8, 16, 32)},
        scaling_base={"N": 2, "S": 20, "K": 4, "V": 12}, scaling_methods=("importance",),
        gt_models=("lstm-tiny",), gt_ks=(2, 3), gt_histories=2,
        chunk_model="lstm-tiny", chunk_rows=2000, chunk_reference=100, chunk_steps=4,
        overhead_models=("lstm-tiny",), overhead_methods=("importance", "beam"),
        overhead_samples=(5, 20, 80), overhead_lm_samples=(2, 4),
        chunk_sizes=(256, 512, 1024),
        calibration=Calibration(("markov",), (200, 2000), 3, 4, 1, 3, bootstrap=50),
        judge=(3, 2),
        lm=LMCost("gpt2-micro", batches=(4, 8), lengths=(4, 8), steps=2, distinct=4,
                  cell=(8, 8), histories=2, calls=40)),
    "quick": Plan(
        models=("lstm-128", "authors-shakespeare", "gpt2-tiny"), samples=1000, lm_samples=25,
        K=8, histories=4, lm_histories=2, repeats=3, scaling_hidden=128,
        scaling={"N": (2, 4, 8), "S": (250, 500, 1000), "K": (4, 8, 16), "V": (25, 100, 400)},
        scaling_base={"N": 4, "S": 250, "K": 8, "V": 100}, scaling_methods=("importance",),
        gt_models=("authors-shakespeare", "authors-moocs"), gt_ks=(5, 9), gt_histories=4,
        chunk_model="lstm-128", chunk_rows=20_000, chunk_reference=1000,
        chunk_steps=2, overhead_models=("lstm-128",), overhead_methods=("importance", "beam"),
        overhead_samples=(10, 100, 1000), overhead_lm_samples=(5, 25, 100),
        calibration=Calibration(("markov", "hpyp", "authors-lstm", "gpt2", "gru",
                                 "authors-rare"), (200, 65536), 12, 8, 12, 8),
        judge=(12, 3),
        lm=LMCost("smollm2", batches=(64, 256, 1024), lengths=(16, 64, 128), steps=2,
                  distinct=4, cell=(256, 64), histories=2, calls=600)),
    "full": Plan(
        models=("lstm-128", "lstm-512", "authors-shakespeare", "gpt2-tiny", "smollm2"),
        samples=1000, lm_samples=100, K=10, histories=8, lm_histories=4, repeats=3,
        scaling_hidden=128,
        scaling={"N": (2, 4, 8, 16, 32), "S": (250, 500, 1000, 2000, 4000),
                 "K": (4, 8, 16, 32), "V": (25, 100, 400, 1600)},
        scaling_base={"N": 4, "S": 500, "K": 8, "V": 100},
        scaling_methods=("importance", "hybrid"),
        gt_models=("authors-shakespeare", "authors-moocs"), gt_ks=(4, 5, 6, 7, 8, 9, 10, 11),
        gt_histories=8, chunk_model="lstm-128", chunk_rows=20_000, chunk_reference=1000,
        chunk_steps=2,
        overhead_models=("lstm-128", "lstm-512", "authors-shakespeare", "gpt2-tiny"),
        overhead_methods=("importance", "beam", "hybrid", "wor"),
        overhead_samples=(10, 100, 1000, 4000), overhead_lm_samples=(5, 25, 100, 400),
        calibration=Calibration(("markov", "hpyp", "authors-lstm", "gpt2", "gru",
                                 "authors-rare"), (200, 65536), 30, 24, 16, 24),
        judge=(30, 4),
        lm=LMCost("smollm2", batches=(64, 256, 512, 1024), lengths=(16, 32, 64, 128), steps=3,
                  distinct=8, cell=(256, 64), histories=4, calls=2000, repeats=3)),
}
