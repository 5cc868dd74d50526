"""Errors seqq raises on bad input; each message names the problem and the fix."""


class QueryError(ValueError):
    """A query that cannot be answered as asked (bad symbol, empty domain, overlapping union...)."""


class BudgetError(ValueError):
    """A model-call budget too small for the method to produce even one estimate."""
