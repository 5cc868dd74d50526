"""How many threads torch may use: the CPUs this process may actually run on.

torch sizes its thread pool by the machine's cores. In a container limited by a CPU quota
(cgroup `cpu.max`) or pinned to a few cores (`taskset`, a SLURM allocation), that is more
threads than CPUs, and on a machine shared with other busy processes the surplus threads wait
on each other at every parallel region. seqq's commands therefore size the pool by what is
available to this process: its CPU affinity and its cgroup's quota, whichever is smaller.

`SEQQ_THREADS=N` sets the count outright; `OMP_NUM_THREADS`, when set, is respected as torch
respects it.

Idle threads also sleep rather than spin: OpenMP's default has a thread that finished its part
of a parallel region spin for a while before it sleeps, which on a machine shared with other
busy processes takes the CPU from the thread still working. Measured on a 2-core VM with two
other busy processes, SmolLM2's `choice(" Paris", " Lyon")` (42 model calls) took 4-30 s with
2 spinning threads, 0.9-1.8 s with 2 sleeping threads and 0.7-1.1 s with one thread.
seqq's commands set `OMP_WAIT_POLICY=PASSIVE` unless the variable is set already, first thing
(`seqq.process`), because OpenMP reads it once, when torch loads it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from seqq.errors import ConfigError

CGROUP_ROOT = Path("/sys/fs/cgroup")


def available_cpus() -> int:
    """CPUs this process may use: its affinity, capped by its cgroup's CPU quota (at least 1)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return max(1, cpus)


def cgroup_cpu_quota() -> float | None:
    """The tightest CPU quota (in CPUs) among this process's cgroups, cgroup v2 (`cpu.max`) or
    v1 (`cpu.cfs_quota_us` / `cpu.cfs_period_us`); None when there is none."""
    quotas = [q for q in (_quota(folder) for folder in _cgroup_folders()) if q is not None]
    return min(quotas) if quotas else None


def _cgroup_folders() -> list[Path]:
    """Where this process's CPU controller files may lie: its own cgroup and every ancestor
    (a quota on a parent limits the child), in both the v2 and the v1 layout."""
    folders = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return folders
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            base = CGROUP_ROOT
        elif "cpu" in controllers.split(","):
            base = CGROUP_ROOT / "cpu"
        else:
            continue
        parts = Path(path.lstrip("/")).parts
        folders += [base.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]
    return folders


def _quota(folder: Path) -> float | None:
    try:
        if (folder / "cpu.max").is_file():
            limit, period = (folder / "cpu.max").read_text().split()[:2]
            return None if limit == "max" else int(limit) / int(period)
        if (folder / "cpu.cfs_quota_us").is_file():
            limit = int((folder / "cpu.cfs_quota_us").read_text())
            period = int((folder / "cpu.cfs_period_us").read_text())
            return None if limit <= 0 else limit / period
    except (OSError, ValueError):
        return None
    return None


def thread_count() -> int | None:
    """The thread count seqq's commands use: `SEQQ_THREADS`, else None where `OMP_NUM_THREADS`
    is set (torch already follows it), else `available_cpus()`."""
    given = os.environ.get("SEQQ_THREADS", "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ConfigError(f"SEQQ_THREADS={given!r} must be a positive whole number of threads "
                              "(or unset, to use the CPUs available to this process)")
        return int(given)
    if os.environ.get("OMP_NUM_THREADS", "").strip():
        return None
    return available_cpus()


def configure_threads() -> int:
    """Size torch's thread pool by `thread_count()`; returns the number of threads in use."""
    import torch

    count = thread_count()
    if count is not None and count != torch.get_num_threads():
        torch.set_num_threads(count)
    return torch.get_num_threads()
