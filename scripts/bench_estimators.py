"""Estimator throughput vs raw model throughput, in the same run (issue: IS ≥ 80%, hybrid ≥ 50%).

Throughput is model calls per second (one call = one row of one step). The raw number is the
model's own batched `step` on the same batch size, with nothing else around it.
"""

from __future__ import annotations

import argparse
import time

import torch

import seqq
from seqq import queries as Q
from seqq.models import LSTMModel, LSTMNet


def raw_throughput(model: LSTMModel, rows: int, steps: int) -> float:
    log_probs, state = model.initial_state([[0, 1, 2]])
    state = model.select(state, torch.zeros(rows, dtype=torch.long))
    tokens = torch.randint(model.vocab_size, (rows,))
    model.step(state, tokens)  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        log_probs, state = model.step(state, tokens)
    return rows * steps / (time.perf_counter() - start)


def method_throughput(model: LSTMModel, method: str, K: int, repeats: int, **options) -> float:
    query = Q.hitting_time(3, K)
    seqq.estimate(model, [0, 1, 2], query, method, seed=0, **options)  # warm-up
    calls, start = 0, time.perf_counter()
    for seed in range(repeats):
        calls += seqq.estimate(model, [0, 1, 2], query, method, seed=seed, **options).model_calls
    return calls / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vocab", type=int, default=100)
    parser.add_argument("--hidden", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--K", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    print("| hidden | device | raw calls/s | IS calls/s | IS/raw | hybrid calls/s | hybrid/raw |")
    print("|---|---|---|---|---|---|---|")
    for hidden in args.hidden:
        net = LSTMNet(args.vocab, hidden_size=hidden, num_layers=2, dropout=0.0)
        model = LSTMModel(net, device=args.device)
        raw = raw_throughput(model, args.samples, steps=args.K * args.repeats)
        is_ = method_throughput(model, "importance", args.K, args.repeats, samples=args.samples)
        hyb = method_throughput(model, "hybrid", args.K, args.repeats, samples=args.samples)
        print(f"| {hidden} | {model.device} | {raw:,.0f} | {is_:,.0f} | {is_ / raw:.0%} "
              f"| {hyb:,.0f} | {hyb / raw:.0%} |")


if __name__ == "__main__":
    main()
