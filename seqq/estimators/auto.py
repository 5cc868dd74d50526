"""The method `seqq ask --method auto` picks when exact enumeration costs too much.

Sampling without replacement up to `LONG_HORIZON` steps: unbiased, with certain bounds, and
exact once its draws exhaust the query. SMC beyond: on rare long-horizon events it was the most
accurate method measured (benchmarks/RESULTS.md (j), docs/decisions.md §39). Each pick carries
the reason `seqq ask` prints on its method line.
"""

from __future__ import annotations

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
