"""Estimators of p(X_{1:K} ∈ Q | history): `method.py` says what a method is, `methods/` holds
one module per family, `engine/` the machinery they share (batches, budgets, the prefix trie,
twists), `registry.py` the methods found in `methods/`, `driver.py` the one way to run them,
`auto.py` a chooser above the driver that picks a method per task, and `ground_truth.py` the
judge of them all: the cheapest sound answer per query (its samplers reached through the
registry's roles; `adaptive_importance.py` holds the importance samplers that stop on their own
error), and `horizons.py` every horizon of a hitting time from one set of paths."""

from seqq.estimators.estimate import Estimate
from seqq.estimators.method import Answer, Guarantee, Method, Options, option
from seqq.estimators.registry import METHODS, register, unregister

__all__ = ["METHODS", "Answer", "Estimate", "Guarantee", "Method", "Options", "option",
           "register", "unregister"]
