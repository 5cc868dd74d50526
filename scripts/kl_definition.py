"""Which KL do the paper's Tables 3–6 average? (docs/reproduction.md, Tables 4 and 5.)

The paper says "average KL divergence between pseudo-ground truth and importance sampling
estimates" and nothing more. This script computes one reading on the authors' LSTMs and prints it
beside the paper's cells: the distribution of the symbol at step K (over all V symbols) as
importance sampling estimates it from S paths of the first K − 1 steps (drawn from the model,
the last step summed exactly), against a pseudo-ground truth from M/2 independent paths,
KL(p̂ ‖ p̃) and KL(p̃ ‖ p̂), averaged over histories and estimates.

    python scripts/kl_definition.py shakespeare --histories 10 --paths 8000

Its pseudo-ground truth (M/2 paths) adds about S/(M/2) to the expected KL: at S = 1000 and
M = 8000 a quarter. Shakespeare histories come from the test split (as Fig. 3's), MOOCs ones are
sampled from the model (its raw files are not shipped).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from seqq.data import load_dataset
from seqq.experiments.histories import model_histories, sample_histories
from seqq.models.loading import load_model
from seqq.paths import shipped

HORIZONS = (2, 3, 4, 5, 10, 20, 40, 60, 80, 100)
SAMPLES = (10, 100, 1000)
# The paper's cells (App. H) at the query lengths 2, 5, 10, 20, 40, 60, 80, 100
PAPER = {
    "shakespeare": {10: (0.24636, 0.39938, 0.49633, 0.53261, 0.50930, 0.54033, 0.54350, 0.53290),
                    100: (0.03151, 0.05687, 0.08451, 0.09082, 0.09006, 0.09358, 0.08501, 0.08865),
                    1000: (0.00311, 0.00619, 0.00953, 0.01038, 0.01092, 0.01040, 0.01036,
                           0.01075)},
    "moocs": {10: (0.19327, 0.37587, 0.59260, 0.80115, 0.98514, 1.09345, 1.10783, 1.17955),
              100: (0.03546, 0.07182, 0.10772, 0.14772, 0.18664, 0.21176, 0.21936, 0.22095),
              1000: (0.00503, 0.01018, 0.01519, 0.01939, 0.02337, 0.02429, 0.02431, 0.02450)},
}
PAPER_LENGTHS = (2, 5, 10, 20, 40, 60, 80, 100)


def histories(dataset: str, model, count: int) -> list[list[int]]:
    if dataset == "moocs":
        bos = list(model.vocab).index("<BOS>")
        return [list(h.tokens) for h in model_histories(model, count, 0, seed=0, bos=bos)]
    data = load_dataset("shakespeare", vocab=str(shipped("models/authors/shakespeare_vocab.json")))
    return [list(h.tokens) for h in sample_histories(data.test, count, 1, seed=0)]


@torch.inference_mode()
def next_symbol_distributions(model, history: list[int], paths: int, seed: int
                              ) -> dict[int, torch.Tensor]:
    """For each K of HORIZONS: [paths, V] p(X_K | x_<K) along paths drawn from the model."""
    generator = torch.Generator().manual_seed(seed)
    log_probs, state = model.initial_state([history] * paths)
    out = {}
    for k in range(1, max(HORIZONS) + 1):
        if k in HORIZONS:
            out[k] = log_probs.double().exp()
        if k < max(HORIZONS):
            drawn = torch.multinomial(log_probs.double().exp(), 1, generator=generator)[:, 0]
            log_probs, state = model.step(state, drawn)
    return out


def kl(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return (p * (p / q).log()).sum(-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=sorted(PAPER))
    parser.add_argument("--histories", type=int, default=10)
    parser.add_argument("--paths", type=int, default=8000, help="M: half pseudo-ground truth, "
                        "half the estimates' samples")
    args = parser.parse_args()
    if args.paths < 2 * max(SAMPLES):
        parser.error(f"--paths must be at least {2 * max(SAMPLES)} (half of them form the "
                     f"estimates of S = {max(SAMPLES)} samples)")
    model = load_model({"type": "authors", "dataset": args.dataset, "device": "cpu"})
    forward = {(S, K): [] for S in SAMPLES for K in HORIZONS}
    reverse = {key: [] for key in forward}
    for i, history in enumerate(histories(args.dataset, model, args.histories)):
        for K, P in next_symbol_distributions(model, history, args.paths, seed=i).items():
            half = args.paths // 2
            truth = P[:half].mean(0)
            for S in SAMPLES:
                groups = min(half // S, 200)
                estimates = P[half:half + groups * S].view(groups, S, -1).mean(1)
                forward[S, K] += kl(truth, estimates).tolist()
                reverse[S, K] += kl(estimates, truth).tolist()
    print(f"{args.dataset}: {args.histories} histories, {args.paths} paths each; K = "
          f"{', '.join(map(str, HORIZONS))}")
    for S in SAMPLES:
        print(f"S = {S:5d}  KL(p̂ ‖ p̃) " + " ".join(f"{np.mean(reverse[S, K]):.5f}"
                                                  for K in HORIZONS))
        print(f"{'':9s}  KL(p̃ ‖ p̂) " + " ".join(f"{np.mean(forward[S, K]):.5f}"
                                                  for K in HORIZONS))
        print(f"{'':9s}  paper (L = {', '.join(map(str, PAPER_LENGTHS))}) "
              + " ".join(f"{x:.5f}" for x in PAPER[args.dataset][S]))


if __name__ == "__main__":
    main()
