"""How seqq's own commands tune the process they run in: the `seqq` console script and
`python -m benchmarks` call `tune_process()` first thing, before anything loads torch. A library
user's process is theirs: importing seqq changes none of this.

Idle OpenMP threads sleep instead of spinning (`OMP_WAIT_POLICY=PASSIVE`, unless the variable
is set; seqq/threads.py says why): OpenMP reads it once, as torch loads it.

Big CPU tensors are kept from being page-faulted in again at every step. PyTorch's CPU allocator
has no cache: every tensor is a fresh `posix_memalign`, freed on release. A [rows × V] temporary
of a large-vocabulary model is tens of MB, so unless freed memory is reused, each step faults
its pages in again, 4 KiB at a time (expensive in a VM). Two settings
(`SEQQ_KEEP_FREED_MEMORY=0` turns both off):

1. **glibc's mmap and trim thresholds** raised to `THRESHOLD_BYTES`, so blocks below that stay
   on the heap when freed instead of being unmapped (glibc maps anything over at most 32 MiB
   by default), so a large-vocabulary step's temporaries are not faulted in afresh at every step
   (docs/performance.md#host-memory).
2. **2 MiB huge pages for tensors of ≥ 2 MiB** (PyTorch's `THP_MEM_ALLOC_ENABLE`). glibc 2.36
   (Debian 12) seldom reuses a freed block for a new 64-byte-aligned one of the same size
   (glibc bug 14581, fixed in 2.38), so the heap kept serving fresh pages, which huge pages
   avoid: freed blocks are then reused (docs/performance.md#host-memory). PyTorch reads the
   variable at its first CPU allocation, so this takes effect only before any tensor is made,
   or where the variable is set in the environment.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
from pathlib import Path

THRESHOLD_BYTES = 1 << 30  # blocks below 1 GiB stay on the heap; up to 1 GiB of freed heap kept
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (glibc's malloc.h)
ENV = "SEQQ_KEEP_FREED_MEMORY"
HUGE_PAGES_ENV = "THP_MEM_ALLOC_ENABLE"  # PyTorch's switch (c10/core/impl/alloc_cpu.cpp)
THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def tune_process() -> None:
    """Apply the settings above; call before the process imports torch."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    request_huge_pages()
    keep_freed_memory()


def keep_freed_memory(threshold: int = THRESHOLD_BYTES) -> bool:
    """Raise glibc's mmap and trim thresholds to `threshold`; True when applied."""
    if os.environ.get(ENV, "1") == "0" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    return bool(libc.mallopt(M_MMAP_THRESHOLD, threshold)
                and libc.mallopt(M_TRIM_THRESHOLD, threshold))


def request_huge_pages() -> None:
    """Ask PyTorch for huge pages under big CPU tensors, unless switched off or the kernel has
    transparent huge pages disabled; an explicit `THP_MEM_ALLOC_ENABLE` is left as it is.
    Call before the process's first tensor."""
    if os.environ.get(ENV, "1") == "0" or not _kernel_offers_huge_pages():
        return
    os.environ.setdefault(HUGE_PAGES_ENV, "1")


def _kernel_offers_huge_pages() -> bool:
    try:
        return "[never]" not in THP_SETTING.read_text()
    except OSError:  # not Linux, or a kernel without transparent huge pages
        return False
