"""What a method is: one frozen declaration that the whole project reads.

A method is a name, a typed options class (defaults and valid values in one place), a run
function, what it guarantees (`Guarantee`) and what it can do: answer a union from its parts,
take a surrogate twist, return bounds that hold with certainty, spend a budget, sample until a
relative standard error. The API's validation, ground truth's sampler and the README's options
column ask the registry (`seqq.estimators.registry`) for these declarations, so adding a method
is one module in `seqq/estimators/methods/`. How a method is shown (colour, the paper's methods,
its figures, the README's words) is the reports' concern, kept by name in
`seqq.reports.presentation`; which method sets a sweep's budget is the results schema's
(`seqq.results.schema.BUDGET_SETTER`).

A run function gets the prepared `Batch`, the budgets (model calls per task, or None), its
options and the twist (`Messages` of a surrogate, or None); it returns an `Answer` per branch,
which the driver (`seqq.estimators.driver`) turns into named `Estimate`s.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, Protocol

from torch import Tensor

from seqq.errors import QueryError
from seqq.estimators.engine.batch import Batch
from seqq.estimators.engine.summary import BranchResult
from seqq.estimators.engine.twist import Messages

SurrogateUse = Literal["none", "optional", "required"]
Budgets = Sequence[int] | None


@dataclass(frozen=True)
class Check:
    """A rule an option's value must follow, and how to say so when it does not."""

    holds: Callable[[Any], bool]
    must: str  # completes "<method> option <name> must …"


def is_int(x: object) -> bool:
    """Integers of any kind (Python, NumPy, 0-d integer tensors), but not bools."""
    if isinstance(x, bool):
        return False
    try:
        operator.index(x)
    except TypeError:
        return False
    return True


def _is_real(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


POSITIVE = Check(lambda v: is_int(v) and v >= 1, "be a positive integer (a count)")
NON_NEGATIVE = Check(lambda v: is_int(v) and v >= 0, "be an integer ≥ 0")
UNIT = Check(lambda v: _is_real(v) and 0 < v <= 1, "lie in (0, 1]")
FRACTION = Check(lambda v: _is_real(v) and 0 <= v <= 1, "lie in [0, 1]")
OPEN_UNIT = Check(lambda v: _is_real(v) and 0 < v < 1, "lie in (0, 1)")


def option(default: Any = None, check: Check | None = None, doc: str = "") -> Any:
    """An options field: its default, the rule for its values (None passes: "the default"),
    and one line for the documentation."""
    return field(default=default, metadata={"check": check, "doc": doc})


@dataclass(frozen=True)
class Options:
    """Base of every method's options: a frozen dataclass of `option` fields."""

    def check_with(self, method: str, twisted: bool) -> None:
        """Rules between options, or between an option and a twist (none by default)."""


@dataclass(frozen=True)
class NoOptions(Options):
    pass


@dataclass(frozen=True)
class Answer:
    """A run's per-branch result: the driver sums branches into tasks and names them."""

    result: BranchResult
    is_lower_bound: bool = False
    extras: list[dict] | None = None  # one per task
    weights: tuple[Tensor, Tensor] | None = None  # (branch, log weight) of each draw behind it


Run = Callable[[Batch, Budgets, Any, Messages | None], Answer]
# One pass over a batch of hitting times τ(A) = K: an answer for every k = 1..K (index k − 1)
HorizonsRun = Callable[[Batch, Budgets, Any], list[Answer]]


class Until(Protocol):
    """Sample until each task's relative standard error is below `rel_tol` (exact once the
    draws exhaust Q) or its calls reach `max_calls`: each branch's result, and per task
    whether it met the target. `on_stage(done)` reports the tasks finished so far; `twist`
    steers the draws by a surrogate's messages (the twisted ground-truth rule), `projected`
    and `min_tail` shape its stages."""

    def __call__(self, batch: Batch, rel_tol: float, max_calls: int | Tensor, *,
                 on_stage: Callable[[int], None] | None = None, twist: Messages | None = None,
                 projected: bool = False, min_tail: int = 0) -> tuple[BranchResult, Tensor]:
        ...


@dataclass(frozen=True)
class Adaptive:
    """Samplers that stop on their own error, for ground truth: `absolute` draws as its method
    does until the paper's Eq. 66 rule holds, `sampled` until a relative SE
    (`adaptive_importance.py`), `horizons` answers a family of hitting times from one set of
    paths (`horizons.py`). Each records `GroundTruth`s named `origin` in `results`."""

    absolute: Callable[..., None]
    sampled: Callable[..., None]
    horizons: Callable[..., None]


class Guarantee(Enum):
    """What a method's value promises about p(Q): it chooses the method's intervals and the
    oracle the registry-wide tests hold it to."""

    UNBIASED = "unbiased"
    EXACT = "exact"
    LOWER_BOUND = "lower bound"


@dataclass(frozen=True, kw_only=True)
class Method:
    """One estimator: what it computes with, guarantees and takes (declared with keywords
    only). Nothing here is about showing it: that is `seqq.reports.presentation`'s."""

    name: str
    run: Run
    options: type[Options]
    guarantee: Guarantee
    surrogate: SurrogateUse = "none"  # a twist it takes (`surrogate=`), passed by the driver
    by_part: bool = False  # answers unions built with `union(..., compile=False)` by parts
    certain_bounds: bool = False  # `lower` ≤ p ≤ `upper` with certainty (untwisted)
    takes_budget: bool = True  # spends at most `budget=` calls (else refuses or ignores one)
    cost_cap: str | None = None  # without a budget, its option refusing a costlier query
    until: Until | None = None  # samples until a relative SE (ground truth's `rule="relative"`)
    adaptive: Adaptive | None = None  # ground truth's `absolute` and `sampled` rules
    horizons: HorizonsRun | None = None  # answers τ(A) = k for every k ≤ K from one set of paths
    replicates: int = 0  # independent copies the driver runs inside the budget, for an interval
    log_replicates: bool = False  # its replicates' interval is Cox's on their logs (RESULTS (h))

    @property
    def interval_kind(self) -> str:
        """How the driver builds this method's intervals (`seqq.estimators.uncertainty`)."""
        if self.guarantee is Guarantee.EXACT:
            return "exact"
        if self.guarantee is Guarantee.LOWER_BOUND:
            return "none"
        if self.replicates:
            return "log-replicates" if self.log_replicates else "replicates"
        return "log-normal"

    def option_names(self) -> list[str]:
        names = [f.name for f in dataclasses.fields(self.options)]
        return names + (["surrogate"] if self.surrogate != "none" else [])

    def parse_options(self, given: Mapping[str, Any], twisted: bool = False) -> Options:
        """The options object for `given` (name → value; None means the default), or a
        one-line `QueryError` naming the method, the option and what it must be."""
        allowed = set(self.option_names())
        unknown = sorted(set(given) - allowed)
        if unknown:
            raise QueryError(f"method {self.name!r} takes no option {unknown[0]!r}; it takes "
                             f"{sorted(allowed) or 'none'}")
        values = {}
        for f in dataclasses.fields(self.options):
            value = given.get(f.name)
            if value is None:
                continue
            check = f.metadata.get("check")
            if check is not None and not check.holds(value):
                raise QueryError(f"{self.name} option {f.name} must {check.must}, "
                                 f"got {value!r}")
            values[f.name] = value
        if self.surrogate == "required" and not twisted:
            raise QueryError(f"method {self.name!r} needs surrogate=<ContextAutomaton>; fit one "
                             "on training sequences with seqq.estimators.surrogates."
                             "fit_surrogate(sequences, vocab)")
        options = self.options(**values)
        options.check_with(self.name, twisted)
        return options
