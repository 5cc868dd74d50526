"""A toy method written the way a user adds one: its own module, ending in `METHODS`.

Copied into `seqq/estimators/methods/` it is found and listed like any other method
(`tests/test_registry.py` proves it; `make readme` then gives it its README row); from code
outside seqq, `seqq.estimators.register(TOY)` adds it.

`toy_paired` is naive Monte Carlo that draws its samples in antithetic-free pairs: each
"sample" is the mean of two independent draws from p. Unbiased, and different enough from
`naive` to need its own options and run function.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from seqq.estimators import Answer, Guarantee, Method, Options, option
from seqq.estimators.engine.budget import draw_in_rounds
from seqq.estimators.engine.rollout import sample_rows
from seqq.estimators.engine.summary import BranchResult, segment_mean
from seqq.estimators.method import POSITIVE


@dataclass(frozen=True)
class PairedOptions(Options):
    pairs: int | None = option(None, POSITIVE, "pairs of draws per query (200)")


def paired(batch, budgets, options: PairedOptions, twist) -> Answer:
    samples = None if options.pairs is None else 2 * options.pairs
    row_branch, paths = draw_in_rounds(batch, budgets, samples or 400,
                                       lambda rows, charge: sample_rows(batch, rows, "model",
                                                                        charge))
    hits = torch.where(paths.accepted, 0.0, -torch.inf).double()
    log_value, variance, count = segment_mean(hits, row_branch, len(batch.branch_task))
    return Answer(BranchResult(log_value, variance, count.long(), None))


TOY = Method(name="toy_paired", run=paired, options=PairedOptions, guarantee=Guarantee.UNBIASED)
METHODS = (TOY,)
