"""Errors seqq raises on bad input; each message names the problem and the fix."""


class QueryError(ValueError):
    """A query that cannot be answered as asked (bad symbol, empty domain, overlapping union...)."""


class BudgetError(ValueError):
    """A model-call budget too small for the method to produce even one estimate."""


class DataError(ValueError):
    """A dataset that cannot be read or prepared (bad format, unknown name, bad options)."""


class MissingRawData(DataError):
    """A raw data file that is not on this machine; the message says what to put where."""


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable, or does not match the model or vocabulary."""


class ModelLoadError(ValueError):
    """A model whose weights cannot be loaded here (no hub access, missing package or file)."""


class ModelError(ValueError):
    """A model that breaks the `SequenceModel` protocol (wrong shape, not log-probabilities...)."""
