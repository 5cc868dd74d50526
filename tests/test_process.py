"""`import seqq` changes nothing outside seqq; seqq's entry points (the `seqq` console script,
`python -m benchmarks`) tune their own process before torch loads: idle OpenMP threads sleep,
freed heap memory is kept and big CPU tensors sit on huge pages (`seqq.process`). Each check
runs in a fresh interpreter: OpenMP and PyTorch read these settings once."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest
from conftest import REPO

from seqq.process import ENV, HUGE_PAGES_ENV, _kernel_offers_huge_pages, keep_freed_memory

TUNED = ("OMP_WAIT_POLICY", HUGE_PAGES_ENV)

# Whether glibc serves a fresh 64 MiB block from an mmap of its own (its default above 32 MiB
# at most) rather than from the heap, as it does once seqq's thresholds are raised.
ALLOCATOR_PROBE = """
import ctypes, ctypes.util

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = Mallinfo2
libc.malloc.restype = ctypes.c_void_p

def big_blocks_mapped():
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(64 << 20)
    mapped = libc.mallinfo2().hblkhd > before
    libc.free(ctypes.c_void_p(block))
    return mapped
"""


def _run(code: str, **env: str) -> dict:
    """`code` in a fresh interpreter with the settings seqq tunes unset (but for `env`); what
    it prints last, as JSON."""
    base = {k: v for k, v in os.environ.items() if k not in (*TUNED, ENV)}
    run = subprocess.run([sys.executable, "-c", ALLOCATOR_PROBE + code],
                         env=base | {"PYTHONPATH": str(REPO)} | env, capture_output=True,
                         text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


# The tuned variables, whether big blocks are still mapped, and whether torch is loaded.
REPORT = ("\nimport json, os, sys\n"
          f"print(json.dumps({{'env': {{k: os.environ.get(k) for k in {TUNED!r}}}, "
          "'mapped': big_blocks_mapped(), 'torch': 'torch' in sys.modules}))\n")

needs_glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                 reason="seqq tunes glibc's allocator only")


@needs_glibc
def test_importing_seqq_changes_nothing_outside_seqq():
    """Every public name loaded (torch with them): the environment and glibc's thresholds are
    as they were."""
    got = _run("import seqq\n[getattr(seqq, name) for name in seqq.__all__]\n" + REPORT)
    assert got["env"] == dict.fromkeys(TUNED) and got["mapped"] and got["torch"]


@needs_glibc
@pytest.mark.parametrize("given, expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_the_seqq_command_tunes_its_process_before_torch_loads(given: str | None,
                                                                 expected: str):
    """`seqq` sets OMP_WAIT_POLICY (a value the user set wins) and the allocator's thresholds
    first thing, before any command imports torch."""
    given_env = {} if given is None else {"OMP_WAIT_POLICY": given}
    got = _run("from seqq.commands import cli\ncli.main(['--version'])\n" + REPORT, **given_env)
    assert got["env"]["OMP_WAIT_POLICY"] == expected
    assert not got["mapped"] and not got["torch"]


@pytest.mark.slow
@needs_glibc
def test_python_m_benchmarks_tunes_its_process():
    got = _run("import runpy, sys\nsys.argv = ['benchmarks', '--help']\n"
               "try:\n    runpy.run_module('benchmarks', run_name='__main__')\n"
               "except SystemExit:\n    pass\n" + REPORT)
    assert got["env"]["OMP_WAIT_POLICY"] == "PASSIVE" and not got["mapped"]


def test_freed_memory_is_kept_on_glibc_unless_switched_off(monkeypatch):
    """The switch turns the thresholds off, and elsewhere (macOS, musl) nothing is attempted
    (docs/performance.md#host-memory)."""
    glibc = platform.libc_ver()[0] == "glibc"
    assert keep_freed_memory() is glibc
    monkeypatch.setenv(ENV, "0")
    assert keep_freed_memory() is False


@pytest.mark.slow
@pytest.mark.parametrize("switch", ["1", "0"])
def test_tuning_puts_big_cpu_tensors_on_huge_pages_unless_switched_off(switch):
    """The tuning sets PyTorch's THP_MEM_ALLOC_ENABLE before any tensor exists, and PyTorch then
    page-aligns every tensor of ≥ 2 MiB (without it, glibc's 64-byte alignment);
    SEQQ_KEEP_FREED_MEMORY=0 leaves the variable unset."""
    if switch == "1" and not _kernel_offers_huge_pages():
        pytest.skip("this kernel has transparent huge pages off")
    got = _run("from seqq.process import tune_process\ntune_process()\nimport json, os, torch\n"
               f"print(json.dumps([os.environ.get({HUGE_PAGES_ENV!r}), "
               "torch.empty(4 << 20, dtype=torch.uint8).data_ptr() % 4096]))",
               **{ENV: switch})
    huge_pages, page_offset = got
    if switch == "1":
        assert (huge_pages, page_offset) == ("1", 0)
    else:
        assert huge_pages is None
