"""Every method seqq knows, built from one list of method modules.

Each module in `seqq/estimators/methods/` ends with `METHODS = (Method(...), ...)`; listing the
module below registers them. `register` adds one from anywhere (a user's own method, a test's
toy): everything that lists, validates, colours or documents methods reads `METHODS` here.
"""

from __future__ import annotations

from seqq.errors import QueryError
from seqq.estimators.method import Method
from seqq.estimators.methods import (
    beam,
    exact,
    hybrid,
    montecarlo,
    randomized_beam,
    smc,
    unions,
    wor,
)

MODULES = (exact, montecarlo, beam, hybrid, smc, randomized_beam, wor, unions)
METHODS: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Add `method` to the registry (a name may be registered once)."""
    if method.name in METHODS and METHODS[method.name] is not method:
        raise ValueError(f"a method named {method.name!r} is already registered")
    METHODS[method.name] = method
    return method


def unregister(name: str) -> None:
    """Remove a method added with `register` (tests; a user's experiments)."""
    METHODS.pop(name, None)


for _module in MODULES:
    for _method in _module.METHODS:
        register(_method)


def get(name: str) -> Method:
    """The method called `name`, or a one-line error listing the known ones."""
    if name not in METHODS:
        raise QueryError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}")
    return METHODS[name]


def budget_setter() -> Method:
    """The method whose calls at S samples set every other method's budget in a sweep."""
    return next(m for m in METHODS.values() if m.sets_budget)


def paper_methods() -> list[str]:
    return [m.name for m in METHODS.values() if m.in_paper]


def readme_table() -> str:
    """The README's table of methods, one row per registered method."""
    head = ("| method | what it computes | unbiased | bounds `lower`/`upper` | options |\n"
            "|---|---|---|---|---|")
    return "\n".join([head, *(m.readme_row() for m in METHODS.values())])


LONG_HORIZON = 10  # beyond this many steps `seqq ask` prefers SMC to sampling without replacement
SHORT_PICK = ("wor", "unbiased, with bounds that hold with certainty, and exact once its draws "
              "exhaust the query")
LONG_PICK = ("smc", "it resamples toward the paths that can still satisfy the query, the most "
             "accurate method on rare long-horizon events in benchmarks/RESULTS.md (j)")


def automatic(horizon: int) -> tuple[str, str]:
    """The method `seqq ask` uses when exact enumeration costs too much, and why, in words."""
    if horizon > LONG_HORIZON:
        return LONG_PICK[0], f"K = {horizon} > {LONG_HORIZON}: {LONG_PICK[1]}"
    return SHORT_PICK[0], f"K = {horizon} ≤ {LONG_HORIZON}: {SHORT_PICK[1]}"


if __name__ == "__main__":  # python -m seqq.estimators.registry: the README's table
    print(readme_table())
