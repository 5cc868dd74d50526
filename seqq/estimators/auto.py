"""`method="auto"`: per task, the method the calibration benchmark found calibrated for the
query's horizon and budget and for whether a surrogate is at hand, and why in words.

In order: the exact answer where enumerating the query costs no more than the budget (priced
from the query's lattice on the batch its pick then runs on, so each history is encoded once);
else sampling without replacement up to `LONG_HORIZON` steps from `WOR_BUDGET` calls, and SMC
otherwise, each twisted by the surrogate where there is one (benchmarks/RESULTS.md (h) and (j),
docs/decisions.md §44).
`seqq ask --method auto` is this with one history; each estimate's `note` carries the reason
its method line prints.

Without a surrogate, where tasks past `LONG_HORIZON` steps have budgets that together pay for
one (`DISTILL_MIN_CALLS`), `auto` distils an order-2 surrogate from the model's own samples,
spending `DISTILL_SHARE` of their calls (within `DISTILL_CALLS`), charges each task its share,
and twists their SMC with it: untwisted, SMC misses rare events whose mass lies where the
model's next steps do not look (issue 51).

`auto` is not a registered method but a `Chooser` above the driver: the public API
(`seqq.api.CHOOSERS`) hands it the whole request, and it runs each group of tasks through the
driver with the registered method it picked, spending what that method's declarations say (a
cost cap, else a budget).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from seqq.errors import BudgetError, QueryError
from seqq.estimators import driver, registry
from seqq.estimators.engine.batch import prepare, subset, tree_calls
from seqq.estimators.engine.budget import cannot_buy
from seqq.estimators.estimate import Estimate
from seqq.estimators.surrogates import distill_surrogate, model_symbols, twistable
from seqq.models.automaton import ContextAutomaton
from seqq.models.protocol import SequenceModel
from seqq.queries import Query

AUTO_EXACT_CALLS = 20_000  # without a budget: enumerate up to this many calls …
AUTO_BUDGET = 2_000  # … else estimate within this many
LONG_HORIZON = 10  # beyond this many steps SMC rather than sampling without replacement …
WOR_BUDGET = 1_000  # … and below this many calls (a WOR head too small to pay for itself)
DISTILL_MIN_CALLS = 8_000  # without a surrogate, auto distils one where its long-horizon tasks
# have this many calls together (measured to pay from here: decisions §44) …
DISTILL_SHARE = 0.25  # … spending this share of them …
DISTILL_CALLS = (4_096, 16_384)  # … but at least and at most this many calls, once per request
DISTILL_STEPS = 16  # each continuation at least this long, or as the longest horizon (rows =
# calls / steps) …
DISTILL_ORDER = 2  # … to fit an HPYP n-gram of this order
DISTILL_OFF = "distilling one was turned off (distill=False; seqq ask --surrogate none)"
SMC, WOR = registry.get("smc").name, registry.get("wor").name  # auto's picks, looked up on
# import: a renamed method fails here, not in a user's run


@dataclass(frozen=True)
class Pick:
    """A task's method, whether it is twisted by the surrogate, and why."""

    method: str
    twisted: bool
    why: str


@dataclass(frozen=True)
class Chooser:
    """A way to answer that picks a registered method per task and says why in each estimate's
    `note`; `seqq.api` dispatches to it above the driver, by its name."""

    name: str
    default_budget: int  # calls an estimate may spend without a budget
    estimate_many: Callable[..., list[Estimate]]  # seqq.estimate_many's arguments, but method


def choose(horizon: int, enumeration_calls: float, limit: int, surrogate: bool) -> Pick:
    """The method for one task: exact within `limit` calls (the history's encoding included),
    else by horizon and budget, twisted by the surrogate where there is one."""
    if enumeration_calls <= limit:
        return Pick(registry.exact_method().name, False,
                    f"enumerating every continuation fits the {limit:,} calls allowed")
    cost = (f"{enumeration_calls:,.0f}" if enumeration_calls < 1e9
            else f"{enumeration_calls:.1e}".replace("e+", "e") if math.isfinite(enumeration_calls)
            else "over 1e308")  # a count past float64 ("inf" said nothing)
    priced = f"enumeration would cost {cost} calls, more than {limit:,}; "
    twist = " twisted by the surrogate" if surrogate else ""
    if horizon > LONG_HORIZON:
        return Pick(SMC, surrogate, priced + f"K = {horizon} > {LONG_HORIZON}: SMC{twist} "
                    "resamples toward the paths that can still satisfy the query, the most "
                    "accurate method on rare long-horizon events in benchmarks/RESULTS.md (j)")
    if limit < WOR_BUDGET:
        return Pick(SMC, surrogate, priced + f"{limit:,} calls < {WOR_BUDGET:,}: too few for "
                    f"sampling without replacement's head to pay; SMC{twist} covered more often "
                    "and was flagged less at small budgets in benchmarks/RESULTS.md (h)")
    return Pick(WOR, surrogate, priced + f"K = {horizon} ≤ {LONG_HORIZON}: sampling without "
                f"replacement{twist} is unbiased, exact once its draws exhaust the query, and "
                "the best calibrated at short horizons in benchmarks/RESULTS.md (h)")


def estimate_many(model: SequenceModel, histories: Sequence[Sequence[int]],
                  queries: Sequence[Query] | Query, budget: int | Sequence[int] | None = None,
                  seed: int | None = None, level: float = 0.95, replicates: int | None = None,
                  surrogate: ContextAutomaton | None = None, distill: bool = True,
                  **options: object) -> list[Estimate]:
    """Every task answered by its `choose` pick, tasks with the same pick in one batch, in
    the given order, on the batch that priced them (each history encoded once). A budget
    bounds each task's calls; without one, enumeration is allowed AUTO_EXACT_CALLS and an
    estimator AUTO_BUDGET. Without a `surrogate`, `distill` lets auto distil one where it pays
    (`_distilled`)."""
    queries, budgets = driver.check_inputs(model, histories, queries, level, budget)
    if replicates is not None:
        raise QueryError("method 'auto' sets its own replicates; drop replicates= or name "
                         "a method")
    if options:
        raise QueryError(f"method 'auto' picks its own options; drop {sorted(options)} or name "
                         "a method (seqq.estimators.METHODS lists them)")
    limits = list(budgets or [AUTO_EXACT_CALLS] * len(histories))
    with torch.inference_mode():
        priced = prepare(model, histories, queries, seed)
        cost, one_path = tree_calls(priced).tolist(), tree_calls(priced, 1).tolist()
    picks = [choose(q.horizon, c, limit, surrogate is not None)
             for q, c, limit in zip(queries, cost, limits, strict=True)]
    calls = [limits[i] if budgets or p.method == registry.exact_method().name else AUTO_BUDGET
             for i, p in enumerate(picks)]  # what each task may spend
    _check_one_path(picks, calls, one_path)
    spent = [0] * len(histories)  # calls charged to a task beside its run: distilling's share
    refusal = DISTILL_OFF
    if surrogate is None and distill:
        surrogate, refusal = _distilled(model, histories, [q.horizon for q in queries], picks,
                                        calls, spent, seed)
        if surrogate is not None:
            made = surrogate.info["model_calls"]
            for i, (q, c) in enumerate(zip(queries, cost, strict=True)):
                if spent[i]:  # steered (past LONG_HORIZON: SMC), now twisted
                    twisted = choose(q.horizon, c, calls[i], True)
                    picks[i] = Pick(twisted.method, True, twisted.why + f"; no surrogate was "
                                    f"given, so auto distilled an order-{DISTILL_ORDER} one from "
                                    f"{made:,} model calls sampling the model "
                                    f"({spent[i]:,} of them charged to this "
                                    "task)")
    out: list[Estimate | None] = [None] * len(histories)
    for method, twisted in dict.fromkeys((p.method, p.twisted) for p in picks):
        tasks = [i for i, p in enumerate(picks) if (p.method, p.twisted) == (method, twisted)]
        twist = {"surrogate": surrogate} if twisted else {}
        planned = driver.plan(method, [queries[i] for i in tasks],
                              [calls[i] - spent[i] for i in tasks], twist)
        answered = driver.run(planned, subset(priced, torch.tensor(tasks)), level)
        for i, e in zip(tasks, answered, strict=True):
            out[i] = dataclasses.replace(e, model_calls=e.model_calls + spent[i],
                                         note=picks[i].why, warning=_unfollowed(
                                             e.warning, twisted, queries[i].horizon, refusal))
    return out  # type: ignore[return-value]


def _check_one_path(picks: Sequence[Pick], calls: Sequence[int], one_path: Sequence[float]
                    ) -> None:
    """Refuse, at pricing time, a task whose budget cannot pay for one path of its query (the
    history's encoding included): before any distilling or sampling (a long horizon on a large
    model otherwise did work first), and naming the budget as given."""
    for pick, budget, least in zip(picks, calls, one_path, strict=True):
        needs = int(least)
        if pick.method != registry.exact_method().name and budget < needs:
            raise BudgetError(f"auto ({pick.method}): {cannot_buy(budget, needs, 'one path')}")


def _unfollowed(warning: str | None, twisted: bool, horizon: int, refusal: str) -> str | None:
    """A warning on an untwisted answer, which advises a surrogate or a larger budget, with why
    auto distilled no surrogate itself: without it, a user who raised the budget and got no
    surrogate could not tell whether a larger one still would bring one (issue 61).
    `refusal` is `_distilled`'s reason for the tasks past LONG_HORIZON."""
    if warning is None or twisted:
        return warning
    why = (f"at K = {horizon} ≤ {LONG_HORIZON} one did not pay (decisions §44)"
           if horizon <= LONG_HORIZON and refusal != DISTILL_OFF else refusal)
    return f"{warning}; auto distilled no surrogate: {why}"


def _distilled(model: SequenceModel, histories: Sequence[Sequence[int]], horizons: list[int],
               picks: list[Pick], calls: list[int], spent: list[int], seed: int | None
               ) -> tuple[ContextAutomaton | None, str]:
    """A surrogate distilled from the model for the tasks past LONG_HORIZON steps that SMC
    would run untwisted (it misses their rare events), where their calls together reach
    DISTILL_MIN_CALLS and twisting can steer at all: it costs DISTILL_SHARE of those calls,
    within DISTILL_CALLS (so at most about half of them, at the threshold), and each task's
    `spent` grows ∝ its calls: every task gives up the same fraction of its own. At short
    horizons it did not pay (decisions §44). Its rows start from `<BOS>` where the model's
    vocabulary names one (the model's own text, as diverse as it is), else from those tasks'
    histories, and run as far as their horizons (at least DISTILL_STEPS). None where it would
    not pay, or where the continuations would overrun the model's context; and why not in
    words ('' beside a surrogate)."""
    steered = [i for i, p in enumerate(picks) if p.method == SMC and horizons[i] > LONG_HORIZON]
    total = sum(calls[i] - spent[i] for i in steered)
    given = sum(calls[i] for i in steered)
    if given < DISTILL_MIN_CALLS:  # none steered included
        together = " of the long-horizon tasks together" if len(steered) > 1 else ""
        return None, (f"the budget{together}, {given:,} calls, is under the "
                      f"{DISTILL_MIN_CALLS:,} from which distilling one pays (decisions §44)")
    if not twistable(model.vocab_size):
        return None, f"the model's {model.vocab_size:,} symbols are too many for one to steer"
    budget = min(max(int(DISTILL_SHARE * total), DISTILL_CALLS[0]), DISTILL_CALLS[1])
    starts = [histories[i] for i in steered]
    steps = max(DISTILL_STEPS, *(horizons[i] for i in steered))  # as far as the queries ask
    if hasattr(model, "check_fits"):
        try:
            model.check_fits(max(map(len, starts)), steps)
        except QueryError:
            return None, (f"its {steps}-token samples after the history would overrun the "
                          "model's context")
    vocab, bos = model_symbols(model)
    surrogate = distill_surrogate(model, vocab, bos, DISTILL_ORDER, budget, seed=seed or 0,
                                  starts=starts, rows=max(1, budget // steps), keep=None)
    made = surrogate.info.get("model_calls", budget)
    room = [calls[i] - spent[i] for i in steered]
    shares = [made * r // total for r in room]  # ∝ calls: the same fraction of each task's
    for n, i in enumerate(steered):  # the rounding's few calls on the first tasks
        spent[i] += shares[n] + (n < made - sum(shares))
    return surrogate, ""


AUTO = Chooser("auto", AUTO_BUDGET, estimate_many)
