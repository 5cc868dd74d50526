"""Estimators of p(X_{1:K} ∈ Q | history); each takes a prepared `Batch` and returns Estimates."""

from seqq.estimators.estimate import Estimate
from seqq.estimators.exact import exact
from seqq.estimators.montecarlo import importance, naive, twisted, uniform
from seqq.estimators.randomized_beam import randomized_beam
from seqq.estimators.search import coverage, hybrid, tail, top_b
from seqq.estimators.smc import smc
from seqq.estimators.union import klm, mixture
from seqq.estimators.wor import hindsight_gumbel, wor

METHODS = {
    "exact": exact,
    "naive": naive,
    "uniform": uniform,
    "importance": importance,
    "beam": top_b,
    "coverage_beam": coverage,
    "tail_beam": tail,
    "hybrid": hybrid,
    "smc": smc,
    "randomized_beam": randomized_beam,
    "twisted": twisted,
    "wor": wor,
    "hindsight_gumbel": hindsight_gumbel,
    "mixture": mixture,
    "klm": klm,
}

# Methods that estimate a union from its parts' own lattices (`prepare(..., by_part=True)`),
# so they also answer unions built with `union(..., compile=False)`.
BY_PART = frozenset({"mixture", "klm"})

__all__ = ["BY_PART", "METHODS", "Estimate"]
