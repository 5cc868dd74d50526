"""Errors seqq raises on bad input; each message names the problem and the fix.

Every one derives from `SeqqError`, which the command line prints as one line (exit status 2);
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence


def did_you_mean(given: str, known: Sequence[str]) -> str:
    """"did you mean X? " for the closest known name to a misspelt one, else ""."""
    close = difflib.get_close_matches(given, list(known), n=1, cutoff=0.6)
    return f"did you mean {close[0]}? " if close else ""


class SeqqError(ValueError):
    """Bad input the user can fix: the message says what is wrong and what to do instead."""


class QueryError(SeqqError):
    """A query that cannot be answered as asked (bad symbol, empty domain, overlapping union...)."""


class BudgetError(SeqqError):
    """A model-call budget too small for the method to produce even one estimate."""


class ConfigError(SeqqError):
    """A command-line or config value that is invalid (unknown method, a word where a number
    belongs, an unknown figure or device...)."""


class DataError(SeqqError):
    """A dataset that cannot be read or prepared (bad format, unknown name, bad options)."""


class MissingRawData(DataError):
    """A raw data file that is not on this machine; the message says what to put where."""


class ResultsError(SeqqError):
    """Sweep results that cannot be read: a path that does not exist or holds no result parts."""


class CheckpointError(SeqqError):
    """A checkpoint that is missing, unreadable, or does not match the model or vocabulary."""


class ModelLoadError(SeqqError):
    """A model whose weights cannot be loaded here (no hub access, missing package or file)."""


class ModelError(SeqqError):
    """A model that breaks the `SequenceModel` protocol (wrong shape, not log-probabilities...)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep, carrying what was saved; a KeyboardInterrupt, so that nothing on
    the way out (Hydra's job runner included) mistakes it for a failed job and carries on."""
