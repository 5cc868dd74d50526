"""`seqq ask`: one question (a query-language expression) about one model's continuation of one
history, answered from the shell.

    seqq ask --model smollm2 --history "The capital of France is" 'choice(" Paris", " Lyon")'
    seqq ask --model outputs/checkpoints/shakespeare_lstm.pt --history-file h.txt 'tau("\\n") <= 30'

`--model` is a registered name (`NAMED_MODELS`), `hf:<hub name or folder>`, or a checkpoint
written by `seqq train` (LSTM or HPYP). The answer is exact when enumeration is cheap, else an
unbiased estimate with bounds (`--method auto`); grammar of questions: docs/query-language.md.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from seqq.errors import BudgetError, CheckpointError, ConfigError, QueryError
from seqq.models.device import resolve_device
from seqq.models.protocol import SequenceModel

NAMED_MODELS = {
    "smollm2": {"type": "smollm2"},
    "gpt2": {"type": "hf", "name_or_path": "gpt2"},
    "gpt2-medium": {"type": "hf", "name_or_path": "gpt2-medium"},
    "authors-shakespeare": {"type": "authors", "dataset": "shakespeare"},
    "authors-moocs": {"type": "authors", "dataset": "moocs"},
}
AUTO = "auto"
AUTO_EXACT_CALLS = 20_000  # `auto` enumerates exactly up to this many calls (or --budget)
AUTO_BUDGET = 2_000  # `auto`'s estimator budget when --budget is not given
AUTO_ESTIMATOR = "wor"  # unbiased, with bounds, and exact once its draws exhaust the query
BOS = "<BOS>"


class _Parser(argparse.ArgumentParser):
    """argparse whose usage mistakes reach `run_command` as one-line `ConfigError`s."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message}; see seqq ask --help")


def _parser() -> argparse.ArgumentParser:
    from seqq.estimators import METHODS

    parser = _Parser(prog="seqq ask", description=__doc__.split("\n\n")[0],
                     epilog="grammar and examples of questions: docs/query-language.md")
    parser.add_argument("question", help="a query, e.g. 'tau(\"\\n\") <= 30' or "
                                         "'choice(\" Paris\", \" Lyon\")'")
    parser.add_argument("--model", required=True,
                        help=f"{', '.join(NAMED_MODELS)}, hf:<hub name or folder>, or a "
                             "checkpoint written by seqq train (LSTM or HPYP .pt)")
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--history", default="", help="the text so far (default: empty)")
    given.add_argument("--history-file", type=Path, help="read the text so far from a file")
    parser.add_argument("--method", default=AUTO,
                        help=f"{AUTO} (exact when enumeration costs at most "
                             f"{AUTO_EXACT_CALLS:,} calls or --budget, else "
                             f"{AUTO_ESTIMATOR}), or one of {', '.join(METHODS)}")
    parser.add_argument("--budget", type=_positive, help="model calls the method may spend "
                        f"(auto: {AUTO_BUDGET:,})")
    parser.add_argument("--seed", type=int, default=0, help="seed of sampling methods")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: estimate, stderr, lower, upper, method, "
                             "exact, model_calls, seconds (model loading excluded), horizon, "
                             "history_tokens")
    return parser


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def load(name: str, device: str) -> SequenceModel:
    """The model `--model` names: a registered name, `hf:<name or folder>`, or a checkpoint."""
    from seqq.models.loading import load_model  # transformers and friends: only once asked

    if name in NAMED_MODELS:
        return load_model({**NAMED_MODELS[name], "device": device})
    if name.startswith("hf:"):
        return load_model({"type": "hf", "name_or_path": name[3:], "device": device})
    path = Path(name)
    if not path.suffix == ".pt" and not path.exists():
        raise ConfigError(f"--model {name!r} is neither a model name ({', '.join(NAMED_MODELS)}, "
                          "hf:<name>) nor a checkpoint file; train one with seqq train")
    try:
        return load_model({"type": "lstm", "checkpoint": str(path), "device": device})
    except CheckpointError as not_lstm:
        if not path.is_file():
            raise
        try:
            return load_model({"type": "hpyp", "checkpoint": str(path)})
        except CheckpointError:
            raise not_lstm from None


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
    return [index[BOS]] * (BOS in index) + [index[s] for s in symbols]


def answer(model: SequenceModel, history: Sequence[int], question: str, method: str = AUTO,
           budget: int | None = None, seed: int | None = 0) -> dict[str, Any]:
    """The question parsed against the model's symbols and answered: estimate, stderr, bounds,
    method and model calls."""
    import seqq

    query = seqq.parse(question, getattr(model, "vocab", None), getattr(model, "tokenizer", None))
    if query.lattice(model.vocab_size).roots[0] < 0:
        raise QueryError(f"{question!r} holds for no continuation of {query.horizon} symbols; "
                         "ask something that can happen (a longer horizon, other symbols)")
    if hasattr(model, "check_fits"):
        model.check_fits(len(history), query.horizon)
    start, priced = time.perf_counter(), 0
    if method == AUTO:
        try:
            est = seqq.estimate(model, history, query, "exact",
                                max_calls=budget or AUTO_EXACT_CALLS)
        except BudgetError:  # exact prices itself after encoding the history: one call spent
            est, priced = seqq.estimate(model, history, query, AUTO_ESTIMATOR,
                                        budget or AUTO_BUDGET, seed), 1
    else:
        est = seqq.estimate(model, history, query, method, budget, seed)
    exact = est.method == "exact" or est.stderr == 0
    lower, upper = (est.value, est.value) if exact else (est.lower, est.upper)
    return dict(question=question, estimate=est.value, stderr=0.0 if exact else est.stderr,
                lower=lower, upper=upper, method=est.method, exact=exact,
                model_calls=int(est.model_calls) + priced, seconds=time.perf_counter() - start,
                horizon=query.horizon, history_tokens=len(history))


def readable(result: dict[str, Any]) -> str:
    """The answer as a person reads it: p ± SE, the bounds, how it was computed."""
    p = f"p = {result['estimate']:.6g}"
    if result["exact"]:
        p += " (exact)"
    elif result["stderr"] is not None:
        p += f" ± {result['stderr']:.2g} (standard error)"
    lines = [result["question"], p]
    if not result["exact"] and result["lower"] is None:
        lines.append(f"bounds: none ({result['method']} gives none)")
    elif not result["exact"]:
        lines.append(f"bounds: [{result['lower']:.4g}, {result['upper']:.4g}] (certain)")
    lines.append(f"method: {result['method']}, {result['model_calls']:,} model calls, "
                 f"{result['seconds']:.2f} s after loading (K = {result['horizon']}, history of "
                 f"{result['history_tokens']} tokens)")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    from seqq.api import check_method
    from seqq.queries.language import check_syntax

    check_syntax(args.question)  # before any (slow) model load
    if args.method != AUTO:
        check_method(args.method, {})
    device = str(resolve_device(args.device))
    if args.history_file is not None:
        try:
            text = args.history_file.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"--history-file {args.history_file}: {e.strerror}") from e
    else:
        text = args.history
    model = load(args.model, device)
    result = answer(model, encode_history(model, text), args.question, args.method,
                    args.budget, args.seed)
    if args.json:
        print(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v)
                          for k, v in result.items()}))
    else:
        print(readable(result))
    return 0
