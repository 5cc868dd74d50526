"""Every method seqq knows, found in `seqq/estimators/methods/`.

Each module there ends with `METHODS = (Method(...), ...)`; the registry imports every module of
that package and registers what it declares, so adding a method is one new module (and `make
readme` for the README's table). `register` adds one from anywhere else (a user's own method, a
test's toy). Everything that lists, validates or documents methods reads `METHODS` here, and
code that needs a method in a role (the exact one, ground truth's sampler) asks the functions
below rather than naming it: `ROLES` says what each role's method declares, and `discover`
checks that exactly one method of `methods/` declares it. How methods are shown is the reports'
table (`seqq.reports.presentation`), which nothing here imports.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable

import seqq.estimators.methods as method_modules
from seqq.errors import QueryError
from seqq.estimators.method import Guarantee, Method

# The order of the README's table and of every listing of methods: the ground truth, the
# paper's families, then later ones. A module not named here follows them, alphabetically.
ORDER = ("exact", "montecarlo", "beam", "hybrid", "smc", "randomized_beam", "wor", "unions")
METHODS: dict[str, Method] = {}
ROLES: dict[str, Callable[[Method], bool]] = {
    "exact": lambda m: m.guarantee is Guarantee.EXACT,  # seqq.exact, ground truth's enumeration
    "until": lambda m: m.until is not None,  # ground truth's rule="relative"
    "adaptive": lambda m: m.adaptive is not None,  # ground truth's rules "absolute", "sampled"
}


def discover() -> list[Method]:
    """The methods declared by the modules of `seqq.estimators.methods`, modules in `ORDER`;
    a `ValueError` unless each of `ROLES` is declared by exactly one of them."""
    rank = {name: i for i, name in enumerate(ORDER)}
    names = sorted((module.name for module in pkgutil.iter_modules(method_modules.__path__)),
                   key=lambda name: (rank.get(name, len(ORDER)), name))
    found = [method for name in names
             for method in importlib.import_module(f"{method_modules.__name__}.{name}").METHODS]
    for role in ROLES:
        _the_one(role, found)
    return found


def _the_one(role: str, methods: Iterable[Method]) -> Method:
    """The one method in `methods` with `role`, or a `ValueError` naming those that have it."""
    holders = [m for m in methods if ROLES[role](m)]
    if len(holders) != 1:
        raise ValueError(f"exactly one method must have the {role} role; "
                         f"{', '.join(m.name for m in holders) or 'none'} "
                         f"{'has' if len(holders) == 1 else 'have'} it")
    return holders[0]


def register(method: Method) -> Method:
    """Add `method` to the registry (a name may be registered once)."""
    if method.name in METHODS and METHODS[method.name] is not method:
        raise ValueError(f"a method named {method.name!r} is already registered")
    METHODS[method.name] = method
    return method


def unregister(name: str) -> None:
    """Remove a method added with `register` (tests; a user's own trials)."""
    METHODS.pop(name, None)


for _method in discover():
    register(_method)


def get(name: str) -> Method:
    """The method called `name`, or a one-line error listing the known ones."""
    if name not in METHODS:
        raise QueryError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}")
    return METHODS[name]


def exact_method() -> Method:
    """The method whose answers are exact (enumeration): `seqq.exact`, `seqq ask`'s first try."""
    return _the_one("exact", METHODS.values())


def until_method() -> Method:
    """The method that samples until a relative standard error (its `until`): ground truth's
    `rule="relative"`."""
    return _the_one("until", METHODS.values())


def adaptive_method() -> Method:
    """The method whose samplers stop on their own error (its `adaptive`): ground truth's
    `rule="absolute"` and `rule="sampled"`."""
    return _the_one("adaptive", METHODS.values())

