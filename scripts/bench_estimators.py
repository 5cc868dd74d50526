"""Estimator throughput vs raw model throughput, in the same run (issue: IS ≥ 80%, hybrid ≥ 50%).

Throughput is model calls per second (one call = one row of one step). The raw number is the
model's own batched `step`, chained as in generation, on the same number of rows the estimator
steps at once (samples × queries), with nothing else around it. `queries` > 1 is the sweep path:
several (history, query) pairs answered by one `estimate_many`.
"""

from __future__ import annotations

import argparse
import time

import torch

import seqq
from seqq import queries as Q
from seqq.models import LSTMModel, LSTMNet


def raw_throughput(model: LSTMModel, rows: int, steps: int) -> float:
    _, state = model.initial_state([[0, 1, 2]])
    state = model.select(state, torch.zeros(rows, dtype=torch.long))
    tokens = torch.randint(model.vocab_size, (rows,))
    model.step(state, tokens)  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        _, state = model.step(state, tokens)
    return rows * steps / (time.perf_counter() - start)


def method_throughput(model: LSTMModel, method: str, K: int, queries: int, repeats: int,
                      **options) -> float:
    histories = [[0, 1, 2 + i] for i in range(queries)]
    query = Q.hitting_time(3, K)
    seqq.estimate_many(model, histories, query, method, seed=0, **options)  # warm-up
    calls, start = 0, time.perf_counter()
    for seed in range(repeats):
        estimates = seqq.estimate_many(model, histories, query, method, seed=seed, **options)
        calls += sum(e.model_calls for e in estimates)
    return calls / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vocab", type=int, default=100)
    parser.add_argument("--hidden", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--queries", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--K", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"LSTM (2 layers), V = {args.vocab}, hitting-time queries at K = {args.K}, "
          f"{args.samples} samples per query\n")
    print("| hidden | device | queries | raw calls/s | IS calls/s | IS/raw | hybrid calls/s "
          "| hybrid/raw |")
    print("|---|---|---|---|---|---|---|---|")
    for hidden in args.hidden:
        model = LSTMModel(LSTMNet(args.vocab, hidden_size=hidden, num_layers=2, dropout=0.0),
                          device=args.device)
        for queries in args.queries:
            raw = raw_throughput(model, args.samples * queries, steps=args.K * args.repeats)
            is_ = method_throughput(model, "importance", args.K, queries, args.repeats,
                                    samples=args.samples)
            hyb = method_throughput(model, "hybrid", args.K, queries, args.repeats,
                                    samples=args.samples)
            print(f"| {hidden} | {model.device} | {queries} | {raw:,.0f} | {is_:,.0f} "
                  f"| {is_ / raw:.0%} | {hyb:,.0f} | {hyb / raw:.0%} |")


if __name__ == "__main__":
    main()
