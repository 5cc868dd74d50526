"""`seqq ask`: one question (a query-language expression) about one model's continuation of one
history, answered from the shell.

    seqq ask --model smollm2 --history "The capital of France is" 'choice(" Paris", " Lyon")'
    seqq ask --model outputs/checkpoints/shakespeare_lstm.pt --history-file h.txt 'tau("\\n") <= 30'

`--model` is a registered name, `hf:<hub name or folder>`, a GGUF file, or a checkpoint written
by `seqq train` (LSTM or HPYP): `seqq.models.named`. The answer is exact when enumeration is
cheap, else an unbiased estimate with bounds (`--method auto`): `seqq.answers`; grammar of
questions: docs/query-language.md. GGUF models (SmolLM2) are converted once and read from seqq's
cache afterwards (`seqq.models.lm_cache`), as are surrogates distilled from a model
(`seqq.models.surrogate_cache`); `seqq cache` lists both. This module reads the arguments and
prints.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from seqq.answers import (
    DEFAULT_SEED,
    HORIZONS_METHOD,
    JSON_FIELDS,
    answer,
    answer_every_horizon,
    refuse_early,
)
from seqq.api import CHOOSERS, check_method
from seqq.data.symbols import encode_history, has_bos
from seqq.errors import ConfigError, QueryError
from seqq.estimators import registry
from seqq.estimators.auto import (
    AUTO,
    AUTO_BUDGET,
    AUTO_EXACT_CALLS,
    DISTILL_MIN_CALLS,
    LONG_HORIZON,
    WOR_BUDGET,
)
from seqq.estimators.surrogates import DISTILL_SYMBOLS, model_surrogate, twistable
from seqq.models.automaton import ContextAutomaton
from seqq.models.device import resolve_device
from seqq.models.named import NAMED_MODELS, load_named, source_of
from seqq.models.protocol import SequenceModel
from seqq.models.surrogate_cache import surrogates_dir

SURROGATES = ("cached", "distill", "none")  # --surrogate: what `auto` may twist its pick with
EMPTY_HISTORY = "(empty history: starting from the model's BOS)"
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
  and distilled surrogates (seqq cache lists them).
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


def surrogate_for(model: SequenceModel, name: str, mode: str) -> ContextAutomaton | None:
    """The surrogate `--surrogate` asks for: one distilled from this model and kept in seqq's
    cache (`model_surrogate`), None for 'none', for a model whose vocabulary is too large to
    twist, or for 'cached' before any was distilled."""
    if mode == "none" or not twistable(model.vocab_size):
        return None
    source = source_of(name)
    kept = model_surrogate(model, source=source, only_cached=True)
    if kept is not None or mode == "cached":
        return kept
    print(f"seqq ask: distilling a surrogate from {DISTILL_SYMBOLS:,} samples of the model "
          f"(once; kept in {surrogates_dir()})", file=sys.stderr, flush=True)
    return model_surrogate(model, source=source)


def readable_horizons(result: dict[str, Any]) -> str:
    """The distribution of when A first happens, one line per k."""
    lines = [f"{result['question']}: every K from one pass of {result['method']} "
             f"({model_calls(result['model_calls'])}, {result['seconds']:.2f} s after loading, "
             f"history of {result['history_tokens']} tokens)",
             f"{'K':>3}  {'p(τ = K)':>10}  {result['level']:.0%} interval{'':>12}  p(τ ≤ K)"]
    for row in result["horizons"]:
        interval = ("exact (p(A | history))" if row["stderr"] == 0 else
                    "" if row["ci_low"] is None else
                    f"[{row['ci_low']:.4g}, {row['ci_high']:.4g}]")
        lines.append(f"{row['K']:>3}  {row['estimate']:>10.4g}  {interval:<24}  "
                     f"{row['up_to']:.4g}")
    return "\n".join(lines)


def model_calls(n: int) -> str:
    """"1 model call", "1,999 model calls"."""
    return f"{n:,} model call{'s' * (n != 1)}"


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
    lines.append(f"method: {result['method']} ({result['why']}), "
                 f"{model_calls(result['model_calls'])}, {result['seconds']:.2f} s after loading (K = "
                 f"{result['horizon']}, history of {result['history_tokens']} tokens)")
    return "\n".join([*lines, *result.get("notes", ())])


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
    model = load_named(args.model, device, args.verbose)
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
