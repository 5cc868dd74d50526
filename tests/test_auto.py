"""`method="auto"`: the pick per task (exact within the budget, else wor up to LONG_HORIZON from
WOR_BUDGET calls and SMC otherwise, twisted by a surrogate given or distilled where the budgets
pay), its reason in `note`, the budget kept, and the order of answers."""

from __future__ import annotations

import re

import pytest
import torch
from oracles import PrefixRecording, random_markov

import seqq
from seqq import queries as Q
from seqq.errors import BudgetError, QueryError
from seqq.estimators.auto import (
    AUTO_EXACT_CALLS,
    DISTILL_CALLS,
    DISTILL_MIN_CALLS,
    DISTILL_SHARE,
    LONG_HORIZON,
    WOR_BUDGET,
    choose,
)
from seqq.models import MarkovModel


def test_choose_prefers_exact_then_the_horizon_twisted_by_a_surrogate() -> None:
    assert choose(4, 999, 1000, surrogate=True).method == "exact"
    assert choose(4, 1000, 1000, surrogate=False).method == "exact"  # encoding included
    assert choose(4, 1001, 1000, surrogate=False).method != "exact"
    for surrogate in (True, False):
        short = choose(4, 10**6, WOR_BUDGET, surrogate)
        assert (short.method, short.twisted) == ("wor", surrogate)
        assert ("twisted by the surrogate" in short.why) == surrogate
        small = choose(4, 10**6, WOR_BUDGET - 1, surrogate)
        assert (small.method, small.twisted) == ("smc", surrogate)
        far = choose(LONG_HORIZON + 1, 10**6, 10**5, surrogate)
        assert (far.method, far.twisted) == ("smc", surrogate)
    assert choose(LONG_HORIZON, 10**6, WOR_BUDGET, surrogate=False).method == "wor"
    assert choose(LONG_HORIZON, 10**6, WOR_BUDGET - 1, surrogate=False).method == "smc"
    long = choose(LONG_HORIZON + 1, 10**6, 1000, surrogate=False)
    assert (long.method, long.twisted) == ("smc", False) and "1,000,000 calls" in long.why


def test_auto_answers_each_task_by_its_pick_in_order_within_the_budget() -> None:
    """A batch mixing a cheap query (enumerated), a short and a long expensive one: each gets
    its pick, the answers come back in the given order, the exact one equals `seqq.exact`,
    and no task spends more than the budget."""
    model = random_markov(V=6, seed=5)
    queries = [Q.hitting_time(2, K=2), Q.count(1, n=3, K=8, op=">="), Q.occurs_within(3, K=14)]
    histories = [[1], [0, 2], [3]]
    budget = 1500
    got = seqq.estimate_many(model, histories, queries, "auto", budget=budget, seed=0)
    assert [e.method for e in got] == ["exact", "wor", "smc"]
    assert got[0].value == pytest.approx(seqq.exact(model, [1], queries[0]), rel=1e-6)
    assert all(e.model_calls <= budget for e in got), [e.model_calls for e in got]
    assert "fits the 1,500 calls allowed" in got[0].note
    assert "K = 8 ≤ 10" in got[1].note and "K = 14 > 10" in got[2].note
    for e, h, q in zip(got[1:], histories[1:], queries[1:], strict=True):
        truth = seqq.exact(model, h, q)
        assert e.ci_low is not None and e.ci_low <= e.value <= e.ci_high
        assert e.value == pytest.approx(truth, rel=0.5)
    again = seqq.estimate_many(model, histories, queries, "auto", budget=budget, seed=0)
    assert [e.value for e in again] == [e.value for e in got]  # seeded
    small = seqq.estimate(model, histories[1], queries[1], "auto", budget=500, seed=0)
    assert small.method == "smc" and "500 calls < 1,000" in small.note


def test_auto_distils_a_surrogate_where_the_budgets_pay_and_charges_each_task_its_share() -> None:
    """Four runs of a long-horizon count whose budgets together reach DISTILL_MIN_CALLS: auto
    distils a surrogate from the model's continuations of their histories, charges its calls
    to them (∝ budget: each gives up the same fraction), says so, and twists SMC with it:
    the runs land closer to the exact answer than untwisted SMC's. One run alone, a request
    with `distill=False`, or a vocabulary no surrogate can steer get none."""
    model = random_markov(V=6, seed=5)
    query, history, budget = Q.count(1, n=10, K=20, op=">="), [0], 4000
    assert 4 * budget >= DISTILL_MIN_CALLS > budget
    truth = seqq.exact(model, history, query)
    steered = seqq.estimate_many(model, [history] * 4, query, "auto", budget=budget, seed=0)
    plain = seqq.estimate_many(model, [history] * 4, query, "auto", budget=budget, seed=0,
                               distill=False)
    made = {int(re.search(r"one from ([\d,]+) model calls", e.note)[1].replace(",", ""))
            for e in steered}
    shares = [int(re.search(r"\(([\d,]+) of them charged", e.note)[1].replace(",", ""))
              for e in steered]
    assert len(made) == 1 and sum(shares) == made.pop()
    assert max(shares) - min(shares) <= 1  # equal budgets, equal shares
    assert sum(shares) <= max(DISTILL_SHARE, DISTILL_CALLS[0] / DISTILL_MIN_CALLS) * 4 * budget
    assert all(e.method == "smc" and e.model_calls <= budget for e in steered)
    assert all("distilled" not in e.note for e in plain)
    error = [abs(e.value / truth - 1) for e in steered]
    assert max(error) < min(abs(e.value / truth - 1) for e in plain)  # seeded: 0.8 % vs 4.6 %
    assert all(e.ci_low <= truth <= e.ci_high for e in steered)
    alone = seqq.estimate(model, history, query, "auto", budget=budget, seed=0)
    assert "distilled" not in alone.note
    wide = MarkovModel.iid(torch.ones(5000))  # V·(V + 1) table entries: more than a twist holds
    many = seqq.estimate_many(wide, [[0]] * 4, Q.hitting_time(1, K=12), "auto", budget=budget,
                              seed=0)
    assert all("distilled" not in e.note for e in many)


def test_auto_twists_smc_by_a_surrogate_and_defaults_without_a_budget() -> None:
    model, surrogate = random_markov(V=6, seed=5), random_markov(V=6, seed=11)
    query = Q.count(1, n=4, K=12, op=">=")
    e = seqq.estimate(model, [0], query, "auto", budget=2000, seed=0, surrogate=surrogate)
    assert e.method == "smc" and "surrogate" in e.note and e.model_calls <= 2000
    cheap = seqq.estimate(model, [0], Q.hitting_time(2, K=3), "auto")
    assert cheap.exact and f"{AUTO_EXACT_CALLS:,}" in cheap.note


def test_auto_runs_its_picks_on_the_batch_it_priced_and_reports_the_calls_made() -> None:
    """Each history is encoded once, to price enumeration and to run the pick (a second
    encoding used to be charged as auto's "pricing call"), and the calls reported add up to
    the calls the model served, whatever the pick: exact, wor, and SMC's replicates sharing
    one encoding."""
    model = PrefixRecording(random_markov(V=6, seed=5))
    queries = [Q.hitting_time(2, K=2), Q.count(1, n=3, K=8, op=">="), Q.occurs_within(3, K=14)]
    histories = [[1], [0, 2], [3]]
    got = seqq.estimate_many(model, histories, queries, "auto", budget=1500, seed=0)
    assert [e.method for e in got] == ["exact", "wor", "smc"]
    assert [model.evaluated.count(tuple(h)) for h in histories] == [1, 1, 1]
    assert sum(e.model_calls for e in got) == model.rows
    assert all(e.model_calls <= 1500 for e in got)


def test_auto_refuses_options_it_picks_itself() -> None:
    model = random_markov(V=6, seed=5)
    with pytest.raises(QueryError, match="method 'auto' picks its own options; drop"):
        seqq.estimate(model, [0], Q.hitting_time(2, K=3), "auto", samples=10)
    with pytest.raises(QueryError, match="sets its own replicates"):
        seqq.estimate(model, [0], Q.hitting_time(2, K=3), "auto", replicates=4)


def test_a_budget_that_cannot_buy_one_path_is_refused_at_pricing_naming_the_budget_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """K = 1,200 at 1,000 calls a task: refused from the pricing pass alone (the model never
    steps, although ten such tasks' budgets would pay for distilling a surrogate first), and
    the error names the budget as given and what one path costs, the history's encoding
    included (SMC's own error said "a budget of 1999" beside the CLI's "2,000"). A budget of
    what it names answers."""
    model = random_markov(V=6, seed=5)
    query = Q.occurs_within(3, K=1200)

    def no_step(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model stepped before the refusal")

    with monkeypatch.context() as patched:
        patched.setattr(model, "step", no_step)
        with pytest.raises(BudgetError) as refused:
            seqq.estimate_many(model, [[0]] * 10, query, "auto", budget=1000, seed=0)
    assert str(refused.value) == ("auto (smc): a budget of 1,000 model calls cannot buy one "
                                  "path (that needs 1,200); raise the budget (budget=)")
    enough = seqq.estimate(model, [0], query, "auto", budget=1200, seed=0)
    assert enough.method == "smc" and enough.model_calls <= 1200


def test_a_warning_auto_did_not_follow_says_why_no_surrogate_was_distilled() -> None:
    """Warnings advise "a larger budget or a surrogate"; an answer auto gave untwisted says why
    it distilled none (a user who raised the budget and got none could not tell whether a
    larger one would bring one): the budget under DISTILL_MIN_CALLS past LONG_HORIZON, a short
    horizon, or distilling turned off. A twisted answer keeps the warning as it was."""
    model = random_markov(V=6, seed=2)
    far, near = Q.count(1, n=6, K=15, op=">="), Q.count(1, n=5, K=8, op=">=")
    long = seqq.estimate(model, [0], far, "auto", budget=2000, seed=0)
    assert long.warning.endswith("; auto distilled no surrogate: the budget, 2,000 calls, is "
                                 "under the 8,000 from which distilling one pays (decisions §44)")
    short = seqq.estimate(model, [0], near, "auto", budget=300, seed=0)
    assert short.warning.endswith("; auto distilled no surrogate: at K = 8 ≤ 10 one did not "
                                  "pay (decisions §44)")
    off = seqq.estimate(model, [0], near, "auto", budget=300, seed=0, distill=False)
    assert off.warning.endswith("auto distilled no surrogate: distilling one was turned off "
                                "(distill=False; seqq ask --surrogate none)")
    twisted = seqq.estimate(model, [0], far, "auto", budget=2000, seed=0,
                            surrogate=random_markov(V=6, seed=11))
    assert twisted.warning is None or "auto distilled" not in twisted.warning
