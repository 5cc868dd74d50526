"""Typed reads of a Hydra config: a value of the wrong kind is a `ConfigError` naming the key,
what it must be and what it got, before any data or model is loaded."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from seqq.errors import ConfigError

_MISSING = object()


def value(cfg: DictConfig, key: str) -> Any:
    found = OmegaConf.select(cfg, key, default=_MISSING)
    if found is _MISSING:
        raise ConfigError(f"the config has no key {key}; check its spelling (seqq <command> --help)")
    return OmegaConf.to_container(found, resolve=True) if isinstance(
        found, DictConfig | ListConfig) else found


def _fail(key: str, wanted: str, got: Any) -> ConfigError:
    return ConfigError(f"{key} must be {wanted}, got {got!r}")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def integer(cfg: DictConfig, key: str, minimum: int | None = None,
            optional: bool = False) -> int | None:
    x = value(cfg, key)
    wanted = "a whole number" + (f" >= {minimum}" if minimum is not None else "") + (
        " or null" if optional else "")
    if x is None and optional:
        return None
    if not _is_int(x) or (minimum is not None and x < minimum):
        raise _fail(key, wanted, x)
    return x


def number(cfg: DictConfig, key: str, above: float | None = None, at_most: float | None = None,
           optional: bool = False) -> float | None:
    x = value(cfg, key)
    if x is None and optional:
        return None
    bounds = (f" > {above}" if above is not None else "") + (
        f" and <= {at_most}" if at_most is not None else "")
    ok = isinstance(x, int | float) and not isinstance(x, bool)
    if not ok or (above is not None and not x > above) or (at_most is not None and x > at_most):
        raise _fail(key, "a number" + bounds + (" or null" if optional else ""), x)
    return float(x)


def boolean(cfg: DictConfig, key: str) -> bool:
    x = value(cfg, key)
    if not isinstance(x, bool):
        raise _fail(key, "true or false", x)
    return x


def choice(cfg: DictConfig, key: str, choices: Iterable[str]) -> str:
    x, choices = value(cfg, key), list(choices)
    if x not in choices:
        raise _fail(key, f"one of {', '.join(map(str, choices))}", x)
    return x


def integers(cfg: DictConfig, key: str, minimum: int | None = None) -> list[int]:
    """A non-empty list of whole numbers (a single number counts as a list of one)."""
    x = value(cfg, key)
    items = x if isinstance(x, list) else [x]
    if not items or not all(_is_int(i) and (minimum is None or i >= minimum) for i in items):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise _fail(key, f"a list of whole numbers{bound}", x)
    return items


def numbers(cfg: DictConfig, key: str, above: float | None = None,
            at_most: float | None = None) -> list[float]:
    x = value(cfg, key)
    items = x if isinstance(x, list) else [x]
    ok = bool(items) and all(
        isinstance(i, int | float) and not isinstance(i, bool)
        and (above is None or i > above) and (at_most is None or i <= at_most) for i in items)
    if not ok:
        bounds = (f" > {above}" if above is not None else "") + (
            f" and <= {at_most}" if at_most is not None else "")
        raise _fail(key, f"a list of numbers{bounds}", x)
    return [float(i) for i in items]


def names(cfg: DictConfig, key: str, known: Sequence[str], optional: bool = False) -> list[str]:
    """A list of names from `known` (a comma-separated string works too)."""
    x = value(cfg, key)
    if x is None and optional:
        return []
    items = x.split(",") if isinstance(x, str) else x if isinstance(x, list) else [x]
    unknown = [i for i in items if i not in known]
    if not items or unknown:
        raise ConfigError(f"{key}: unknown {unknown[0]!r}; choose from {', '.join(known)}"
                          if unknown else f"{key} is empty; choose from {', '.join(known)}")
    return items
