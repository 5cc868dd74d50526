"""One question (a query-language expression) about one model's continuation of one history,
answered as a record: what `seqq ask` prints, and `--json` writes (`JSON_FIELDS`).

`answer` parses the question against the model's symbols and estimates it (`--method auto` by
default: exact when enumeration is cheap, else an unbiased estimate with bounds), adding a hint
where a tokenised LM's answer is tiny only because of a leading space; `answer_every_horizon`
gives p(τ(A) = k) for every k ≤ K of a hitting time from one pass.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from seqq.api import CHOOSERS, estimate, hitting_time_distribution
from seqq.errors import BudgetError, QueryError
from seqq.estimators import registry
from seqq.estimators.auto import AUTO, AUTO_BUDGET
from seqq.models.automaton import ContextAutomaton
from seqq.models.protocol import SequenceModel, check_protocol
from seqq.queries.language import parse
from seqq.queries.lattice import check_fits

DEFAULT_SEED = 0
HORIZONS_METHOD = "importance"  # what `--every-horizon` asks when the method is left to auto
HINT_BELOW = 0.01  # answers this small get the leading-space hint when it applies
HINT_SPACED_SHARE = 0.5  # ... and when at least this much of p(X_1) starts with whitespace


def refuse_early(name: str, question: str) -> None:
    """A question to the model `name` (`seqq.models.named`) whose horizon SmolLM2's vocabulary
    cannot hold (`check_fits`), refused in seconds, before the weights load: only its cached
    tokenizer is read."""
    if name != "smollm2":
        return
    from seqq.data.tokenizers import gguf_tokenizer  # transformers: only for SmolLM2
    from seqq.paths import smollm2_file

    tokenizer = gguf_tokenizer(smollm2_file())
    vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    check_fits(parse(question, vocab, tokenizer).horizon, len(vocab))


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
    check_protocol(model)
    query = _parsed(model, history, question)
    if query.lattice(model.vocab_size).roots[0] < 0:
        raise QueryError(f"{question!r} holds for no continuation of {query.horizon} symbols; "
                         "ask something that can happen (a longer horizon, other symbols)")
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


def _parsed(model: SequenceModel, history: Sequence[int], question: str) -> Any:
    """The question parsed against the model's symbols, refused where the history and its
    horizon exceed the model's context."""
    query = parse(question, getattr(model, "vocab", None), getattr(model, "tokenizer", None))
    if hasattr(model, "check_fits"):
        model.check_fits(len(history), query.horizon)
    return query


def _estimate(model: SequenceModel, history: Sequence[int], query: Any, method: str,
              budget: int | None, seed: int | None,
              surrogate: ContextAutomaton | None = None, distill: bool = True
              ) -> tuple[Any, str]:
    """(estimate, why this method). A budget too small for the method says which budget was
    in force and how to change it."""
    calls, where = budget, "given with --budget"
    try:
        if method in CHOOSERS:  # a chooser's note says why it picked its method
            calls = budget or CHOOSERS[method].default_budget
            where = where if budget else f"the default of --method {method}"
            twist = {"distill": distill} if surrogate is None else {"surrogate": surrogate}
            est = estimate(model, history, query, method, budget, seed, **twist)
            return est, est.note
        declared = registry.get(method)
        if declared.cost_cap and budget is None:
            calls = getattr(declared.options(), declared.cost_cap)
            where = f"{method}'s default limit"
        return (estimate(model, history, query, method, calls, seed),
                "chosen with --method")
    except BudgetError as e:
        spent = (f"the budget in force is {calls:,} model calls, {where}" if calls
                 else "no --budget was given")
        raise BudgetError(f"{e} (seqq ask: {spent}; change it with --budget N, e.g. --budget "
                          f"{10 * (calls or AUTO_BUDGET)})") from None


def answer_every_horizon(model: SequenceModel, history: Sequence[int], question: str,
                         method: str = HORIZONS_METHOD, budget: int | None = None,
                         seed: int | None = DEFAULT_SEED) -> dict[str, Any]:
    """p(τ(A) = k) for every k ≤ K of a hitting-time question τ(A) = K, from one pass of
    `method` (one that declares `horizons`): the distribution of when A first happens, each k
    with its interval, and the cumulative p(τ(A) ≤ k)."""
    query = _parsed(model, history, question)
    if query.first_passage is None:
        raise QueryError(f"--every-horizon answers a hitting time, e.g. 'tau(\".\") = 30'; "
                         f"{question!r} is not one")
    ks = range(1, query.horizon + 1)
    start = time.perf_counter()
    estimates = hitting_time_distribution(model, history, query.first_passage, query.horizon,
                                          samples=None, seed=seed, method=method,
                                          budget=budget)
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


def leading_space_hint(model: SequenceModel, history: Sequence[int], query: Any,
                       estimate: float) -> str | None:
    """One line for a tiny answer to a question about a tokenised LM's text whose first token
    cannot start with whitespace while the model's likely next tokens do: BPE tokenizers glue a
    word to the space before it, so after "The year was" the model writes " 1", not "1", and
    /[0-9]+/ (anchored at the first token) asks for an unlikely spelling."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None or not estimate < HINT_BELOW:
        return None
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


