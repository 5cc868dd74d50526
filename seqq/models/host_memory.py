"""Keep freed host memory for reuse, so big CPU tensors are not page-faulted in again every step.

PyTorch's CPU allocator has no cache: every tensor is a fresh `malloc`. glibc serves each
allocation above its mmap threshold (at most 32 MiB by default) with a new `mmap` and unmaps it
on free, so every step of a large-vocabulary model (a [rows × 50k] float32 row block is 40 MiB
at 200 rows) faults its pages in again, and heap memory above 128 KiB is handed back to the OS
as soon as it is free. Measured on SmolLM2 (V = 49 152, 2-core VM): a copy of [200 × V]
float32 ran at 1.0 G elements/s by default and 3.8 G elements/s with the settings below, and one
query's importance sampling went from 350 000 page faults to none
(docs/decisions.md §23). Raising both thresholds to `THRESHOLD_BYTES` keeps such blocks on the
heap and reuses them; larger allocations are still mapped and returned.

Applied once when seqq is imported, on glibc only; `SEQQ_KEEP_FREED_MEMORY=0` turns it off.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

THRESHOLD_BYTES = 1 << 30  # blocks below 1 GiB stay on the heap; up to 1 GiB of freed heap kept
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (glibc's malloc.h)
ENV = "SEQQ_KEEP_FREED_MEMORY"


def keep_freed_memory(threshold: int = THRESHOLD_BYTES) -> bool:
    """Raise glibc's mmap and trim thresholds to `threshold`; True when applied."""
    if os.environ.get(ENV, "1") == "0" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    return bool(libc.mallopt(M_MMAP_THRESHOLD, threshold)
                and libc.mallopt(M_TRIM_THRESHOLD, threshold))
