"""torch's threads follow the CPUs this process may use (affinity, cgroup quota) unless
SEQQ_THREADS or OMP_NUM_THREADS says otherwise (tests/test_process.py: idle threads sleep)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from seqq import threads
from seqq.errors import ConfigError


def test_cgroup_quotas_v2_and_v1(tmp_path: Path):
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("150000 100000\n")
    assert threads._quota(v2) == 1.5
    (v2 / "cpu.max").write_text("max 100000\n")
    assert threads._quota(v2) is None
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "cpu.cfs_quota_us").write_text("200000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert threads._quota(v1) == 2.0
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    assert threads._quota(v1) is None
    assert threads._quota(tmp_path / "none") is None


def test_a_quota_caps_the_cpus(monkeypatch: pytest.MonkeyPatch):
    affinity = len(os.sched_getaffinity(0))
    monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda: 0.5)
    assert threads.available_cpus() == 1
    monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda: None)
    assert threads.available_cpus() == affinity
    monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda: affinity + 8.0)
    assert threads.available_cpus() == affinity


def test_the_thread_count_setting(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("SEQQ_THREADS", raising=False)
    assert threads.thread_count() == threads.available_cpus()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads.thread_count() is None  # torch follows OMP_NUM_THREADS itself
    monkeypatch.setenv("SEQQ_THREADS", "3")
    assert threads.thread_count() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("SEQQ_THREADS", bad)
        with pytest.raises(ConfigError, match="SEQQ_THREADS=.* must be a positive whole number"):
            threads.thread_count()

