"""Tables 3–6 of the paper: how far importance sampling's estimate of the next symbol's
distribution after L sampled steps lies from a pseudo ground truth, KL(p̂ ‖ p̃), by the number of
samples S and the length L (docs/decisions.md §13, docs/reproduction.md "Tables 3–6").

For a history h, the distribution of X_{L+1} is p(v) = E[p(v | h, X_{1:L})] over paths X_{1:L}
drawn from the model: nothing restricts this query, so the proposal is the model itself and each
path's exact last step p(· | h, X_{1:L}) is one sample of the whole vector. p̂ averages S paths,
p̃ averages `truth_paths` independent ones. One pass of L_max steps serves every length, and the
estimates at every S come from one pool of max(S) paths cut into disjoint groups of S (many
replicates where S is small), so a history costs (truth_paths + max(S)) · L_max model steps.

Rows are written one part per history (`<sweep>/kl/`): a killed run resumes at the history in
flight.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from seqq.models import SequenceModel
from seqq.progress import progress_bar
from seqq.results.schema import KL_KEY
from seqq.results.store import PartStore
from seqq.sweeps.histories import History

CHUNK_PATHS = 10_000  # paths per batch: the memory of one batch of LSTM states


@dataclass(frozen=True)
class SymbolKLSpec:
    """`sweep.symbol_kl`: query lengths L, sample counts S, pseudo-ground-truth paths."""

    lengths: tuple[int, ...]
    samples: tuple[int, ...]
    truth_paths: int


Root = tuple[torch.Tensor, object]  # a history's log p(X_1 | h) [1, V] and its model state


@torch.inference_mode()
def path_distributions(model: SequenceModel, root: Root, paths: int, lengths: Sequence[int],
                       generator: torch.Generator) -> Iterator[tuple[int, torch.Tensor]]:
    """(L, [paths, V] float64) for each L of `lengths` in turn: row i = p(X_{L+1} | h, path
    i's first L symbols), paths drawn from the model after the history's encoded `root`
    (copied, not re-encoded). One length's rows are alive at a time."""
    rows = torch.zeros(paths, dtype=torch.long, device=root[0].device)
    log_probs, state = root[0][rows], model.select(root[1], rows)
    for step in range(max(lengths) + 1):
        if step in lengths:
            yield step, log_probs.double().exp()
        if step < max(lengths):
            drawn = torch.multinomial(log_probs.double().exp(), 1, generator=generator)[:, 0]
            log_probs, state = model.step(state, drawn)


def mean_distributions(model: SequenceModel, root: Root, paths: int, lengths: Sequence[int],
                       generator: torch.Generator) -> dict[int, torch.Tensor]:
    """The pseudo ground truth: each length's [V] mean over `paths` paths, in batches."""
    sums: dict[int, torch.Tensor] = {}
    for start in range(0, paths, CHUNK_PATHS):
        batch = min(CHUNK_PATHS, paths - start)
        for length, probs in path_distributions(model, root, batch, lengths, generator):
            sums[length] = sums.get(length, 0) + probs.sum(0)
    return {length: total / paths for length, total in sums.items()}


def kl(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """KL(p ‖ q) over the last axis, nats (both strictly positive: softmax outputs)."""
    return (p * (p / q).log()).sum(-1)


def history_rows(model: SequenceModel, history: History, spec: SymbolKLSpec, seed: int
                 ) -> list[dict]:
    """One row per (length, S): the mean KL(p̂ ‖ p̃) over the disjoint S-path groups of the pool,
    with its standard error and the number of groups, and the reverse KL(p̃ ‖ p̂) (the paper's
    cells match the first: docs/decisions.md §13)."""
    with torch.inference_mode():
        root = model.initial_state([list(history.tokens)])
    generator = torch.Generator(device=root[0].device).manual_seed(seed + history.history_id)
    truth = mean_distributions(model, root, spec.truth_paths, spec.lengths, generator)
    pool = max(spec.samples)
    rows = []
    for length, paths in path_distributions(model, root, pool, spec.lengths, generator):
        for samples in spec.samples:
            groups = pool // samples
            estimates = paths[:groups * samples].view(groups, samples, -1).mean(1)
            values = kl(estimates, truth[length][None]).cpu()
            reverse = kl(truth[length][None], estimates).cpu()
            rows.append({"history_id": history.history_id, "history_hash": history.digest,
                         "length": length, "samples": samples, "kl": float(values.mean()),
                         "kl_sem": float(values.std() / groups ** 0.5) if groups > 1
                         else float("nan"),
                         "kl_reverse": float(reverse.mean()), "groups": groups,
                         "truth_paths": spec.truth_paths})
    return rows


def run_histories(model: SequenceModel, histories: Sequence[History], spec: SymbolKLSpec, store_dir: Path,
        dataset: str, model_name: str, seed: int, progress: bool = True) -> int:
    """Every history not yet in `store_dir`, one part each; returns how many were computed."""
    store = PartStore(store_dir, KL_KEY)
    done = store.keys()
    todo = [h for h in histories
            if any((dataset, model_name, h.history_id, length, samples, spec.truth_paths) not in done
                   for length in spec.lengths for samples in spec.samples)]
    for history in progress_bar(todo, desc=f"{dataset}/{model_name} KL", unit="history",
                                disable=not progress):
        rows = pd.DataFrame(history_rows(model, history, spec, seed))
        rows.insert(0, "model", model_name)
        rows.insert(0, "dataset", dataset)
        store.write(rows, f"{dataset}-{model_name}-h{history.history_id}")
    return len(todo)

