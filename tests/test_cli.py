"""The `seqq` command line, run as a user runs it (a subprocess): every mistake is one line with
exit status 2 and no traceback, Ctrl-C says what was saved and a re-run resumes, every failed job
of a multirun is reported, and each command's --help lists its own options."""

from __future__ import annotations

import importlib.util
import os
import random
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import REPO, TINY, tiny_overrides

from seqq.commands import cli
from seqq.data import load_dataset
from seqq.models import LSTMNet
from seqq.models.checkpoint import save_checkpoint
from seqq.results.schema import KEY
from seqq.results.store import read_parts

ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
MARKOV = ("model.type=markov", "+model.name=markov", "+model.order=1")
# the tiny sweep of conftest on an LSTM instead of the Markov chain
LSTM = tuple(o for o in TINY if o not in MARKOV)


def seqq(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seqq.commands.cli", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=600)


def mistakes(root: Path) -> dict[str, tuple[tuple[str, ...], str]]:
    """Bad inputs: command line, and what the one-line error must say."""
    sweep = ("query-sweep", f"sweep.root={root / 'sweeps'}", "sweep.name=bad")
    none = f"checkpoint_dir={root / 'no-checkpoints'}"
    return {
        "missing checkpoint": ((*sweep, *LSTM, none),
                               f"seqq train dataset=synthetic_reviews {none}"),
        "corrupt checkpoint": ((*sweep, *LSTM, f"checkpoint_dir={root / 'corrupt'}"),
                               "is corrupt"),
        "checkpoint of another vocabulary": (
            (*sweep, *LSTM, f"checkpoint_dir={root / 'other-vocab'}"), "different vocabulary"),
        "symbol id outside the vocabulary": ((*sweep, *TINY, "query.a=999"),
                                             "query.a=999 is outside"),
        "token not in the vocabulary": ((*sweep, *TINY, "query.a='€'"), "'€' is not a symbol"),
        "a word for a number": ((*sweep, *TINY, "sweep.histories=ten"),
                                "sweep.histories must be a whole number"),
        "garbage raw data file": ((*sweep, "dataset=moocs", f"data_root={root / 'data'}"),
                                  "moocs: cannot parse"),
        # the checkpoint is missing too: the method must be refused before any model loads
        "unknown method": ((*sweep, *LSTM, none, "estimator.methods=[hybrid,bogus]"),
                           "estimator.methods: unknown 'bogus'"),
        "variant labelled like a method": (
            (*sweep, *LSTM, none, "+estimator.variants.smc={method:smc,surrogate:hpyp}"),
            "estimator.variants.smc: 'smc' is a method's name"),
        "unknown config group option": ((*sweep, *TINY, "estimator=bogus"),
                                        "Could not find 'estimator/bogus'"),
        "a typo in a sweep key": ((*sweep, *TINY, "sweep.histores=5"),
                                  "no config key 'sweep.histores'; did you mean sweep.histories?"),
        # groups renamed by issue 60: the old spelling gets the new one in one line
        "the old name of the preset group": ((*sweep, *TINY, "experiment=budgets"),
                                             "experiment=budgets is now preset=budgets"),
        "the old name of the levels group": ((*sweep, *TINY, "budget=paper"),
                                             "budget=paper is now levels=paper"),
        "the old key of the levels S": ((*sweep, *TINY, "budget.levels=[10,100]"),
                                        "budget.levels=[10,100] is now levels.S=[10,100]"),
        "a typo in a trainer key": (("train", "trainer.max_epoch=3",
                                     f"hydra.run.dir={root / 'run'}"),
                                    "did you mean trainer.max_epochs?"),
        "report of a missing path": (("report", str(root / "nowhere")), "does not exist"),
        "report of an unknown figure": (("report", str(root), "--figures", "bogus"),
                                        "unknown figures ['bogus']"),
        "train with a word for a number": (
            ("train", "trainer.max_epochs=ten", f"hydra.run.dir={root / 'run'}"),
            "trainer.max_epochs must be a whole number"),
    }


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess]:
    """Every bad input, run a few at a time (each is a cold start of seqq)."""
    root = tmp_path_factory.mktemp("cli")
    vocab = load_dataset("synthetic_reviews", vocab_size=9, num_sequences=40).vocab
    (root / "corrupt").mkdir()
    # pickle's PROTO opcode with a protocol torch does not know, then noise: torch warns before
    # it fails, and the user still sees one line (CI once drew such bytes from os.urandom)
    noise = random.Random(0).randbytes(1998)
    (root / "corrupt" / "synthetic_reviews_lstm.pt").write_bytes(b"\x80\x2b" + noise)
    save_checkpoint(root / "other-vocab" / "synthetic_reviews_lstm.pt",
                    LSTMNet(len(vocab) + 3, 8, 1, 0.0), [*vocab, "x", "y", "z"])
    (root / "data" / "moocs").mkdir(parents=True)
    (root / "data" / "moocs" / "mooc_actions.tsv").write_bytes(os.urandom(3000))
    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = {name: pool.submit(seqq, *args, cwd=root)
                for name, (args, _) in mistakes(root).items()}
        return {name: run.result() for name, run in runs.items()} | {"root": root}


@pytest.mark.parametrize("case", list(mistakes(Path("/r"))))
def test_a_mistake_is_one_line_and_exit_2(answers: dict, case: str) -> None:
    said = mistakes(answers["root"])[case][1]
    run = answers[case]
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr + run.stdout
    assert len(lines) == 1 and re.match(r"seqq [\w-]+: ", lines[0]), run.stderr[-3000:]
    assert said in lines[0]


def test_a_missing_checkpoint_names_the_command_that_trains_it(answers: dict) -> None:
    line = answers["missing checkpoint"].stderr.strip()
    command = line[line.index("seqq train"):].split()
    assert "dataset=synthetic_reviews" in command and "trainer=ci" in command
    assert any(c.startswith("checkpoint_dir=") for c in command)
    assert "checkpoint" not in answers["unknown method"].stderr  # refused before the model


def test_usage_version_and_unknown_command(capsys: pytest.CaptureFixture) -> None:
    assert cli.main([]) == 2 and "usage: seqq" in capsys.readouterr().err
    assert cli.main(["--version"]) == 0
    assert re.fullmatch(r"seqq \S+\n", capsys.readouterr().out)
    assert cli.main(["bogus"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize("command, has, lacks", [
    ("query-sweep", ["estimator=", "dataset=", "sweep.histories=", "device=", "-m, --multirun"],
     ["trainer=", "== Config =="]),
    ("train", ["trainer=", "dataset=", "trainer.max_minutes=", "device=", "checkpoint_dir="],
     ["estimator=", "sweep.", "== Config =="]),
])
def test_help_lists_the_commands_own_options(capsys: pytest.CaptureFixture, command: str,
                                             has: list[str], lacks: list[str]) -> None:
    assert cli.main([command, "--help"]) == 0
    text = capsys.readouterr().out
    lines = [line.strip() for line in text.splitlines()]
    for start in has:
        assert any(line.startswith(start) for line in lines), start
    for word in lacks:
        assert word not in text, word


def test_report_help_and_usage_mistakes(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["report", "--help"])
    assert done.value.code == 0 and "--figures" in capsys.readouterr().out
    assert cli.main(["report"]) == 2
    assert "required: results" in capsys.readouterr().err


def _parts(folder: Path) -> int:
    return len(list(folder.glob("*.parquet"))) if folder.exists() else 0


@pytest.mark.slow
def test_ctrl_c_says_what_was_saved_and_a_rerun_resumes(tmp_path: Path) -> None:
    command = ["query-sweep", *tiny_overrides(tmp_path, "stopped", "sweep.chunk_size=1",
                                              "sweep.figures=[rae_vs_k_median]")]
    results = tmp_path / "stopped" / "results"
    # the default SIGINT action, so Python raises KeyboardInterrupt even where this test runs
    # in a background job (whose shell starts it with SIGINT ignored, inherited by children)
    proc = subprocess.Popen([sys.executable, "-m", "seqq.commands.cli", *command], cwd=tmp_path,
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while _parts(results) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep ended before it was interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    saved = _parts(results)
    assert proc.returncode == 130, err[-3000:]
    assert err == (f"interrupted: {saved} of 72 parts saved under {results}; re-run the same "
                   "command to resume\n")
    again = seqq(*command, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    table = read_parts([results])
    assert len(table) == 6 * 2 * 3 * 2 and not table.duplicated(KEY).any()
    report = tmp_path / "stopped" / "report" / "summary.md"
    assert f"report: {report}" in again.stdout and report.is_file()


@pytest.mark.slow
def test_every_failed_multirun_job_is_reported(tmp_path: Path) -> None:
    """Two mistakes and one good job: both errors printed, the good job finishes, exit 2."""
    run = seqq("query-sweep", "-m", *tiny_overrides(tmp_path, "multi", "sweep.ks=[3]",
                                                     "levels.S=[10]"),
               "query.a=999,1,'€'", cwd=tmp_path)
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith("seqq query-sweep:")]
    assert lines[0].startswith("seqq query-sweep: job #0 (query.a=999) failed: query.a=999")
    assert lines[1].startswith("seqq query-sweep: job #2 (query.a='€') failed:")
    assert lines[2] == ("seqq query-sweep: 2 of 3 multirun jobs failed (errors above); the "
                        "others finished")
    assert len(read_parts([tmp_path / "multi" / "results"])) == 6 * 3


@pytest.mark.slow
def test_a_failed_job_that_is_a_bug_keeps_its_traceback(tmp_path: Path) -> None:
    """A job that fails for another reason than a mistake (here: its folder cannot be made)
    prints its traceback; the other job still runs and the command exits 1."""
    good = tmp_path / "good"
    run = seqq("query-sweep", "-m", *tiny_overrides(tmp_path, "bug", "sweep.ks=[3]",
                                                     "levels.S=[10]"),
               f"sweep.dir=/dev/null/nowhere,{good}", cwd=tmp_path)
    assert run.returncode == 1, run.stderr[-3000:]
    assert "Traceback" in run.stderr and "NotADirectoryError" in run.stderr
    assert "seqq query-sweep: job #0 (sweep.dir=/dev/null/nowhere) failed:" in run.stderr
    assert run.stderr.strip().endswith("1 of 2 multirun jobs failed (errors above); the others "
                                       "finished")
    assert len(read_parts([good / "results"])) == 6 * 3


@pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None,
                    reason="hydra-submitit-launcher is not installed (the dev extra has it)")
@pytest.mark.slow
def test_a_job_failing_in_another_process_fails_the_multirun(tmp_path: Path) -> None:
    """Jobs launched as separate processes (submitit, as on SLURM) raise their failure to the
    launcher, so the command still exits non-zero and names it."""
    run = seqq("query-sweep", "-m", "hydra/launcher=submitit_local",
               *tiny_overrides(tmp_path, "apart", "sweep.ks=[3]", "levels.S=[10]"),
               "query.a=999,1", cwd=tmp_path)
    assert run.returncode == 1, run.stderr[-3000:]
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("seqq query-sweep: job #0 (") and "query.a=999 is outside" in last
    assert len(read_parts([tmp_path / "apart" / "results"])) == 6 * 3
