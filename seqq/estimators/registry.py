"""Every method seqq knows, found in `seqq/estimators/methods/`.

Each module there ends with `METHODS = (Method(...), ...)`; the registry imports every module of
that package and registers what it declares, so adding a method is one new module (and `make
readme` for the README's table). `register` adds one from anywhere else (a user's own method, a
test's toy). Everything that lists, validates, colours or documents methods reads `METHODS`
here, and code that needs a method in a role (the exact one, the sweep's budget setter, ground
truth's sampler) asks the functions below rather than naming it.
"""

from __future__ import annotations

import importlib
import pkgutil

import seqq.estimators.methods as method_modules
from seqq.errors import QueryError
from seqq.estimators.method import Guarantee, Method

# The order of the README's table and of every listing of methods: the ground truth, the
# paper's families, then later ones. A module not named here follows them, alphabetically.
ORDER = ("exact", "montecarlo", "beam", "hybrid", "smc", "randomized_beam", "wor", "unions")
METHODS: dict[str, Method] = {}


def discover() -> list[Method]:
    """The methods declared by the modules of `seqq.estimators.methods`, modules in `ORDER`."""
    rank = {name: i for i, name in enumerate(ORDER)}
    names = sorted((module.name for module in pkgutil.iter_modules(method_modules.__path__)),
                   key=lambda name: (rank.get(name, len(ORDER)), name))
    return [method for name in names
            for method in importlib.import_module(f"{method_modules.__name__}.{name}").METHODS]


def register(method: Method) -> Method:
    """Add `method` to the registry (a name may be registered once)."""
    if method.name in METHODS and METHODS[method.name] is not method:
        raise ValueError(f"a method named {method.name!r} is already registered")
    METHODS[method.name] = method
    return method


def unregister(name: str) -> None:
    """Remove a method added with `register` (tests; a user's experiments)."""
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
    return next(m for m in METHODS.values() if m.guarantee is Guarantee.EXACT)


def budget_setter() -> Method:
    """The method whose calls at S samples (its `level_option`) set every other method's budget
    in a sweep."""
    return next(m for m in METHODS.values() if m.level_option is not None)


def until_method() -> Method:
    """The method that samples until a relative standard error (its `until`): ground truth's
    `rule="relative"`."""
    return next(m for m in METHODS.values() if m.until is not None)


def paper_methods() -> list[str]:
    return [m.name for m in METHODS.values() if m.in_paper]
