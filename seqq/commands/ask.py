"""`seqq ask`: one question (a query-language expression) about one model's continuation of one
history, answered from the shell.

    seqq ask --model smollm2 --history "The capital of France is" 'choice(" Paris", " Lyon")'
    seqq ask --model outputs/checkpoints/shakespeare_lstm.pt --history-file h.txt 'tau("\\n") <= 30'

`--model` is a registered name (`NAMED_MODELS`), `hf:<hub name or folder>`, a GGUF file, or a
checkpoint written by `seqq train` (LSTM or HPYP). The answer is exact when enumeration is cheap,
else an unbiased estimate with bounds (`--method auto`); grammar of questions:
docs/query-language.md. GGUF models (SmolLM2) are converted once and read from seqq's cache
afterwards (`seqq.models.lm_cache`, `seqq cache`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from seqq.api import CHOOSERS, check_method
from seqq.errors import BudgetError, CheckpointError, ConfigError, QueryError
from seqq.estimators import registry
from seqq.estimators.auto import (
    AUTO,
    AUTO_BUDGET,
    AUTO_EXACT_CALLS,
    DISTILL_MIN_CALLS,
    LONG_HORIZON,
    WOR_BUDGET,
)
from seqq.estimators.surrogates import DISTILL_SYMBOLS
from seqq.models.automaton import ContextAutomaton
from seqq.models.device import resolve_device
from seqq.models.protocol import SequenceModel
from seqq.queries.language import did_you_mean

NAMED_MODELS = {
    "smollm2": {"type": "smollm2"},
    "gpt2": {"type": "hf", "name_or_path": "gpt2"},
    "gpt2-medium": {"type": "hf", "name_or_path": "gpt2-medium"},
    "authors-shakespeare": {"type": "authors", "dataset": "shakespeare"},
    "authors-moocs": {"type": "authors", "dataset": "moocs"},
}
DEFAULT_SEED = 0
SURROGATES = ("cached", "distill", "none")  # --surrogate: what `auto` may twist its pick with
BOS = "<BOS>"
EMPTY_HISTORY = "(empty history: starting from the model's BOS)"
HINT_BELOW = 0.01  # answers this small get the leading-space hint when it applies
HINT_SPACED_SHARE = 0.5  # ... and when at least this much of p(X_1) starts with whitespace
EPILOG = f"""\
defaults: --method {AUTO.name} answers exactly when enumerating the question costs at most
  {AUTO_EXACT_CALLS:,} model calls (or --budget), else within --budget (default {AUTO_BUDGET:,}
  calls) with wor (K ≤ {LONG_HORIZON}, from {WOR_BUDGET:,} calls) or smc, twisted by a surrogate
  distilled from the model where one is kept (--surrogate); without one, past K = {LONG_HORIZON}
  from {DISTILL_MIN_CALLS:,} calls it distils a small one itself within the budget; it says why;
  --seed {DEFAULT_SEED}. The same seed gives the same answer on one machine
  with one library version, not across hardware (float rounding differs, and what is sampled
  follows it).
environment: SEQQ_THREADS sets torch's threads (default: OMP_NUM_THREADS when set, else the
  CPUs available to this process); SEQQ_CACHE moves the cache of converted GGUF models
  and distilled surrogates (seqq cache lists the models).
grammar and examples of questions: docs/query-language.md"""


class _Parser(argparse.ArgumentParser):
    """argparse whose usage mistakes reach `run_command` as one-line `ConfigError`s."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message}; see seqq ask --help")


def _parser() -> argparse.ArgumentParser:
    from seqq.estimators import METHODS

    parser = _Parser(prog="seqq ask", description=__doc__.split("\n\n")[0], epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("question", help="a query, e.g. 'tau(\"\\n\") <= 30' or "
                                         "'choice(\" Paris\", \" Lyon\")'")
    parser.add_argument("--model", required=True,
                        help=f"{', '.join(NAMED_MODELS)}, hf:<hub name or folder>, a .gguf "
                             "file, or a checkpoint written by seqq train (LSTM or HPYP .pt)")
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--history", default="",
                       help="the text so far (default: empty, which starts from the model's BOS "
                            "token; refused for a model without one)")
    given.add_argument("--history-file", type=Path, help="read the text so far from a file")
    parser.add_argument("--method", default=AUTO.name,
                        help=f"default {AUTO.name}: exact when enumeration costs at most "
                             f"{AUTO_EXACT_CALLS:,} model calls (or --budget), else wor "
                             f"(K ≤ {LONG_HORIZON}, from {WOR_BUDGET:,} calls) or smc, twisted "
                             f"by a surrogate where there is one; or one of {', '.join(METHODS)}")
    parser.add_argument("--budget", type=_positive,
                        help=f"model calls the method may spend (default with {AUTO.name}: "
                             f"{AUTO_EXACT_CALLS:,} for the exact answer, then "
                             f"{AUTO_BUDGET:,} for the estimate; with a chosen --method: "
                             "no limit, the method's default sample count)")
    parser.add_argument("--surrogate", choices=SURROGATES, default="cached",
                        help="with --method auto, a surrogate distilled from the model itself "
                             f"({DISTILL_SYMBOLS:,} samples of it, once per model, kept in the "
                             "cache) steers wor or smc on queries too costly to enumerate: "
                             "'cached' (default) uses one distilled before, else lets auto "
                             "distil a small one within the budget where it pays; 'distill' "
                             "distills one first if none is kept; 'none' never uses one")
    parser.add_argument("--every-horizon", action="store_true",
                        help="for a hitting time tau(A) = K: p(tau(A) = k) for every k ≤ K, "
                             "all from one set of paths (when A first happens; --method auto "
                             f"answers with {HORIZONS_METHOD} within --budget, default "
                             f"{AUTO_BUDGET:,} calls, or give one that shares a pass: "
                             f"{', '.join(sorted(n for n, m in registry.METHODS.items() if m.horizons))})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help=f"seed of sampling methods (default: {DEFAULT_SEED})")
    parser.add_argument("--device", default="auto",
                        help="auto | cpu | cuda | cuda:N (default: auto, the GPU if torch sees "
                             "one)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: " + "; ".join(
                            f"{name}: {meaning}" for name, meaning in JSON_FIELDS.items()))
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="let transformers and huggingface_hub print their progress bars "
                             "and warnings (default: quiet)")
    return parser


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def load(name: str, device: str, verbose: bool = False) -> SequenceModel:
    """The model `--model` names: a registered name, `hf:<name or folder>`, a GGUF file, or a
    checkpoint."""
    from seqq.models.loading import load_model  # transformers and friends: only once asked

    if name in NAMED_MODELS:
        return load_model({**NAMED_MODELS[name], "device": device})
    if name.startswith("hf:"):
        return load_model({"type": "hf", "name_or_path": name[3:], "device": device})
    path = Path(name)
    if path.suffix.lower() == ".gguf":
        from seqq.models.lm_cache import load_gguf

        return load_gguf(path, device, verbose=verbose)
    if not path.suffix == ".pt" and not path.exists():
        raise ConfigError(f"--model {name!r} is neither a model name ({', '.join(NAMED_MODELS)}, "
                          "hf:<name>) nor a checkpoint file; "
                          + did_you_mean(name, list(NAMED_MODELS)) + "or train one with seqq train")
    try:
        return load_model({"type": "lstm", "checkpoint": str(path), "device": device})
    except CheckpointError as not_lstm:
        if not path.is_file():
            raise
        try:
            return load_model({"type": "hpyp", "checkpoint": str(path)})
        except CheckpointError:
            raise not_lstm from None


def refuse_early(name: str, question: str) -> None:
    """A question whose horizon SmolLM2's vocabulary cannot hold (`check_fits`), refused in
    seconds, before the weights load: only its cached tokenizer is read."""
    if name != "smollm2":
        return
    from seqq.models.smollm2 import smollm2_tokenizer
    from seqq.queries.language import parse
    from seqq.queries.lattice import check_fits

    tokenizer = smollm2_tokenizer()
    vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    check_fits(parse(question, vocab, tokenizer).horizon, len(vocab))


def encode_history(model: SequenceModel, text: str) -> list[int]:
    """Text → the model's ids: its tokenizer (HF LMs), else its vocabulary, read character by
    character when every symbol is one character (after `<BOS>`, as training sequences start)
    and as whitespace-separated symbols otherwise."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None:
        return list(tokenizer.encode(text, add_special_tokens=False))
    vocab = getattr(model, "vocab", None)
    if vocab is None:
        raise QueryError(f"{type(model).__name__} names no symbols (no tokenizer or vocab), so "
                         "a text history cannot be read for it")
    index = {t: i for i, t in enumerate(vocab)}
    characters = all(len(t) == 1 for t in vocab if t != BOS)
    symbols = list(text) if characters else text.split()
    unknown = next((s for s in symbols if s not in index), None)
    if unknown is not None:
        what = "character" if characters else "symbol"
        raise QueryError(f"the history's {what} {unknown!r} is not in the model's vocabulary of "
                         f"{len(vocab)} symbols")
    return ([index[BOS]] if BOS in index else []) + [index[s] for s in symbols]


def has_bos(model: SequenceModel) -> bool:
    """Whether an empty history has a start: a tokenizer's BOS token, or `<BOS>` among the
    symbols of a model that reads its vocabulary (`encode_history` puts it first)."""
    if getattr(model, "tokenizer", None) is not None:
        return getattr(model, "bos_id", None) is not None
    return BOS in (getattr(model, "vocab", None) or ())


def surrogate_for(model: SequenceModel, name: str, mode: str) -> ContextAutomaton | None:
    """The surrogate `--surrogate` asks for: one distilled from this model and kept in the
    cache under the model's name (a file's: its resolved path, size and time), None for
    'none', for a model whose vocabulary is too large to twist, or for 'cached' before any
    was distilled."""
    from seqq.estimators.surrogates import distilled, twistable
    from seqq.models.lm_cache import cache_root

    vocab = getattr(model, "vocab", None)
    if mode == "none" or vocab is None or not twistable(model.vocab_size):
        return None
    path = Path(name)
    key = (f"{path.resolve()}:{path.stat().st_size}:{int(path.stat().st_mtime)}"
           if path.is_file() else name)
    folder = cache_root() / "surrogates"
    bos = list(vocab).index(BOS) if BOS in vocab else None
    held = distilled(model, vocab, bos, folder=folder, name=key, only_cached=True)
    if held is not None or mode == "cached":
        return held
    print(f"seqq ask: distilling a surrogate from {DISTILL_SYMBOLS:,} samples of the model "
          f"(once; kept in {folder})", file=sys.stderr, flush=True)
    return distilled(model, vocab, bos, folder=folder, name=key)


JSON_FIELDS = {  # what `answer` returns (`--json`), each as the help names it
    "question": "the question as given",
    "estimate": "p, the answer",
    "stderr": "its standard error (0 when exact, null where the method has none)",
    "ci_low": "the interval's lower end", "ci_high": "its upper end",
    "level": "the interval's confidence level (0.95)",
    "lower": "a bound p surely exceeds (float noise aside)", "upper": "one it surely does not",
    "method": "the method that answered", "why": "why auto chose it",
    "exact": "whether the answer is exact",
    "warning": "what may be wrong with the answer, and what to try (null: nothing)",
    "model_calls": "model calls spent", "seconds": "time taken, model loading excluded",
    "horizon": "K", "history_tokens": "tokens of the history",
    "threads": "torch threads", "notes": "hints, e.g. on leading spaces",
}


def answer(model: SequenceModel, history: Sequence[int], question: str,
           method: str = AUTO.name, budget: int | None = None, seed: int | None = DEFAULT_SEED,
           surrogate: ContextAutomaton | None = None, distill: bool = True) -> dict[str, Any]:
    """The question parsed against the model's symbols and answered: estimate, stderr, bounds,
    method, model calls, and `notes` (the leading-space hint, when it applies). `surrogate`
    steers `auto`'s pick; without one, `distill` lets auto distil one where it pays."""
    import torch

    import seqq
    from seqq.models.protocol import check_protocol

    check_protocol(model)
    query = seqq.parse(question, getattr(model, "vocab", None), getattr(model, "tokenizer", None))
    if query.lattice(model.vocab_size).roots[0] < 0:
        raise QueryError(f"{question!r} holds for no continuation of {query.horizon} symbols; "
                         "ask something that can happen (a longer horizon, other symbols)")
    if hasattr(model, "check_fits"):
        model.check_fits(len(history), query.horizon)
    start = time.perf_counter()
    est, why = _estimate(model, history, query, method, budget, seed, surrogate, distill)
    seconds = time.perf_counter() - start
    exact = est.exact
    lower, upper = (est.value, est.value) if exact else (est.lower, est.upper)
    hint = leading_space_hint(model, history, query, est.value)
    return dict(question=question, estimate=est.value, stderr=0.0 if exact else est.stderr,
                ci_low=est.ci_low, ci_high=est.ci_high, level=est.level, lower=lower,
                upper=upper, method=est.method, why=why, exact=exact, warning=est.warning,
                model_calls=int(est.model_calls), seconds=seconds,
                horizon=query.horizon, history_tokens=len(history),
                threads=torch.get_num_threads(), notes=[hint] if hint else [])


def _estimate(model: SequenceModel, history: Sequence[int], query: Any, method: str,
              budget: int | None, seed: int | None,
              surrogate: ContextAutomaton | None = None, distill: bool = True
              ) -> tuple[Any, str]:
    """(estimate, why this method). A budget too small for the method says which budget was
    in force and how to change it."""
    import seqq

    calls, where = budget, "given with --budget"
    try:
        if method in CHOOSERS:  # its pricing call is in its model_calls; its note says why
            calls = budget or CHOOSERS[method].default_budget
            where = where if budget else f"the default of --method {method}"
            twist = {"distill": distill} if surrogate is None else {"surrogate": surrogate}
            est = seqq.estimate(model, history, query, method, budget, seed, **twist)
            return est, est.note
        declared = registry.get(method)
        if declared.cost_cap and budget is None:
            calls = getattr(declared.options(), declared.cost_cap)
            where = f"{method}'s default limit"
        return (seqq.estimate(model, history, query, method, calls, seed),
                "chosen with --method")
    except BudgetError as e:
        spent = (f"the budget in force is {calls:,} model calls, {where}" if calls
                 else "no --budget was given")
        raise BudgetError(f"{e} (seqq ask: {spent}; change it with --budget N, e.g. --budget "
                          f"{10 * (calls or AUTO_BUDGET)})") from None


HORIZONS_METHOD = "importance"  # what `--every-horizon` asks when the method is left to auto


def answer_every_horizon(model: SequenceModel, history: Sequence[int], question: str,
                         method: str = HORIZONS_METHOD, budget: int | None = None,
                         seed: int | None = DEFAULT_SEED) -> dict[str, Any]:
    """p(τ(A) = k) for every k ≤ K of a hitting-time question τ(A) = K, from one pass of
    `method` (one that declares `horizons`): the distribution of when A first happens, each k
    with its interval, and the cumulative p(τ(A) ≤ k)."""
    import seqq

    query = seqq.parse(question, getattr(model, "vocab", None), getattr(model, "tokenizer", None))
    if query.first_passage is None:
        raise QueryError(f"--every-horizon answers a hitting time, e.g. 'tau(\".\") = 30'; "
                         f"{question!r} is not one")
    if hasattr(model, "check_fits"):
        model.check_fits(len(history), query.horizon)
    ks = range(1, query.horizon + 1)
    start = time.perf_counter()
    estimates = seqq.hitting_time_distribution(model, history, query.first_passage,
                                               query.horizon, samples=None, seed=seed,
                                               method=method, budget=budget)
    seconds = time.perf_counter() - start
    cumulative = 0.0
    rows = []
    for k, e in zip(ks, estimates, strict=True):
        cumulative += e.value
        rows.append(dict(K=k, estimate=e.value, stderr=e.stderr, ci_low=e.ci_low,
                         ci_high=e.ci_high, up_to=cumulative, warning=e.warning))
    return dict(question=question, method=method, model_calls=int(estimates[0].model_calls),
                seconds=seconds, level=estimates[0].level, history_tokens=len(history),
                horizons=rows)


def readable_horizons(result: dict[str, Any]) -> str:
    """The distribution of when A first happens, one line per k."""
    lines = [f"{result['question']}: every K from one pass of {result['method']} "
             f"({result['model_calls']:,} model calls, {result['seconds']:.2f} s after loading, "
             f"history of {result['history_tokens']} tokens)",
             f"{'K':>3}  {'p(τ = K)':>10}  {result['level']:.0%} interval{'':>12}  p(τ ≤ K)"]
    for row in result["horizons"]:
        interval = ("exact (p(A | history))" if row["stderr"] == 0 else
                    "" if row["ci_low"] is None else
                    f"[{row['ci_low']:.4g}, {row['ci_high']:.4g}]")
        lines.append(f"{row['K']:>3}  {row['estimate']:>10.4g}  {interval:<24}  "
                     f"{row['up_to']:.4g}")
    return "\n".join(lines)


INFORMATIVE_BOUNDS = 0.5  # certain bounds are shown when they are narrower than this


def readable(result: dict[str, Any]) -> str:
    """The answer as a person reads it: p with its interval, the certain bounds when they say
    something, any warning, and which method answered and why (one line)."""
    p = f"p = {result['estimate']:.6g}"
    if result["exact"]:
        p += " (exact)"
    else:
        if result["stderr"] is not None:
            p += f" ± {result['stderr']:.2g} (standard error)"
        if result["ci_low"] is not None:
            p += (f", {result['level']:.0%} interval [{result['ci_low']:.4g}, "
                  f"{result['ci_high']:.4g}]")
    lines = [result["question"], p]
    lower, upper = result["lower"], result["upper"]
    if not result["exact"] and lower is not None and upper - lower < INFORMATIVE_BOUNDS:
        lines.append(f"bounds: [{lower:.4g}, {upper:.4g}] (certain)")
    if result["warning"]:
        lines.append(f"warning: {result['warning']}")
    lines.append(f"method: {result['method']} ({result['why']}), {result['model_calls']:,} "
                 f"model calls, {result['seconds']:.2f} s after loading (K = "
                 f"{result['horizon']}, history of {result['history_tokens']} tokens)")
    return "\n".join([*lines, *result.get("notes", ())])


def leading_space_hint(model: SequenceModel, history: Sequence[int], query: Any,
                       estimate: float) -> str | None:
    """One line for a tiny answer to a question about a tokenised LM's text whose first token
    cannot start with whitespace while the model's likely next tokens do: BPE tokenizers glue a
    word to the space before it, so after "The year was" the model writes " 1", not "1", and
    /[0-9]+/ (anchored at the first token) asks for an unlikely spelling."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None or not estimate < HINT_BELOW:
        return None
    import torch

    from seqq.queries.text import whitespace_tokens

    try:
        spaced = sorted(t for t in whitespace_tokens(tokenizer) if t < model.vocab_size)
    except QueryError:  # a tokenizer whose token texts seqq cannot read: no hint
        return None
    lattice = query.lattice(model.vocab_size)
    index = torch.tensor(spaced, dtype=torch.long)
    if not spaced or lattice.allowed[int(lattice.roots[0]), index].any():
        return None
    log_probs, _ = model.initial_state([list(history)])
    share = float(log_probs[0, index.to(log_probs.device)].double().exp().sum())
    if share < HINT_SPACED_SHARE:
        return None
    return (f"hint: the next token starts with a space (or other whitespace) with p = "
            f"{share:.2f}, and no answer to this question can; let it start with one, e.g. "
            "/ ?[0-9]+/ or \" Paris\", or use `contains`")


def quiet_libraries() -> None:
    """No progress bars or advisory warnings from transformers and huggingface_hub on stderr
    (`-v` keeps them; a variable the user set wins): seqq says in one line when a step takes
    long. Both read these variables when first imported, which `seqq ask` does only later."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if not args.verbose:
        quiet_libraries()
    from seqq.queries.language import check_syntax

    check_syntax(args.question)  # before any (slow) model load
    refuse_early(args.model, args.question)
    if args.method not in CHOOSERS:
        check_method(args.method, {})
    device = str(resolve_device(args.device))
    if args.history_file is not None:
        try:
            text = args.history_file.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"--history-file {args.history_file}: {e.strerror}") from e
    else:
        text = args.history
    model = load(args.model, device, args.verbose)
    history = encode_history(model, text)
    if not text and not has_bos(model):
        raise QueryError("the history is empty and this model has no BOS token to start from; "
                         "give the text so far with --history or --history-file")
    if args.every_horizon:  # left to auto, the pass keeps to auto's budget
        chosen = args.method in CHOOSERS
        method = HORIZONS_METHOD if chosen else args.method
        budget = args.budget or (AUTO_BUDGET if chosen else None)
        result = answer_every_horizon(model, history, args.question, method, budget,
                                      args.seed)
        print(json.dumps(result) if args.json else readable_horizons(result))
        return 0
    surrogate = (surrogate_for(model, args.model, args.surrogate) if args.method in CHOOSERS
                 else None)
    result = answer(model, history, args.question, args.method, args.budget, args.seed,
                    surrogate, distill=args.surrogate != "none")
    if not text:
        result["notes"].insert(0, EMPTY_HISTORY)
    if args.json:
        print(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v)
                          for k, v in result.items()}))
    else:
        print(readable(result))
    return 0
