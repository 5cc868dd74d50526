"""Bad input to the library gets one clear error up front, never a silently wrong answer."""

import re

import pytest
import torch
from oracles import random_markov

import seqq
from seqq import queries as Q
from seqq.errors import BudgetError, ModelError, QueryError


class Broken:
    """Wraps a correct model and damages its outputs in one way."""

    def __init__(self, model, damage):
        self.model, self.damage, self.vocab_size = model, damage, model.vocab_size

    def initial_state(self, histories):
        log_probs, state = self.model.initial_state(histories)
        return self.damage(log_probs), state

    def step(self, state, tokens):
        log_probs, state = self.model.step(state, tokens)
        return self.damage(log_probs), state

    def select(self, state, index):
        return self.model.select(state, index)


@pytest.mark.parametrize("damage, message", [
    (torch.exp, "returned probabilities; return log-probabilities"),
    (lambda lp: lp * 0.5 + 3.0, "not log-normalised"),
    (lambda lp: lp[0], r"expected \[B, V\]"),
    (lambda lp: torch.full_like(lp, float("nan")), "NaN"),
    (lambda lp: lp.tolist(), "returned list"),
])
@pytest.mark.parametrize("method", ["importance", "beam", "exact"])
def test_protocol_violations_raise_model_error(damage, message, method):
    model = Broken(random_markov(6, 1), damage)
    with pytest.raises(ModelError, match=message):
        seqq.estimate(model, [0], Q.hitting_time(2, 3), method, seed=0)


class Counted:
    """A correct model that counts its calls, with one protocol member replaced."""

    def __init__(self, model, **replaced):
        self.model, self.vocab_size, self.calls = model, model.vocab_size, 0
        for name, value in replaced.items():
            setattr(self, name, value)

    def initial_state(self, histories):
        self.calls += 1
        return self.model.initial_state(histories)

    def step(self, state, tokens):
        self.calls += 1
        return self.model.step(state, tokens)

    def select(self, state, index):
        return self.model.select(state, index)


class NoSelect:
    """A model that forgot `select`."""

    def __init__(self, model):
        self.model, self.vocab_size = model, model.vocab_size

    def initial_state(self, histories):
        return self.model.initial_state(histories)

    def step(self, state, tokens):
        return self.model.step(state, tokens)


@pytest.mark.parametrize("replaced, message", [
    ({"select": None}, r"Counted has no select method \(or it is None\); implement it as in "
                       r"seqq/models/protocol.py: def select\(self, state, index\)"),
    ({"step": 3}, r"Counted.step is 3, not a method; implement it"),
    ({"initial_state": None}, r"Counted has no initial_state method"),
    ({"vocab_size": None}, r"Counted has no vocab_size; set it to the number of symbols"),
    ({"vocab_size": "6"}, r"Counted.vocab_size is '6'; it must be a positive int"),
    ({"vocab_size": 0}, r"Counted.vocab_size is 0; it must be a positive int"),
])
@pytest.mark.parametrize("method", ["exact", "importance", "wor"])
def test_a_broken_protocol_is_one_model_error_before_any_call(replaced, message, method):
    model = Counted(random_markov(6, 1), **replaced)
    with pytest.raises(ModelError, match=message):
        seqq.estimate(model, [0], Q.hitting_time(2, 3), method, seed=0)
    assert model.calls == 0


def test_a_model_without_select_is_one_model_error():
    with pytest.raises(ModelError, match="NoSelect has no select method"):
        seqq.estimate(NoSelect(random_markov(6, 1)), [0], Q.hitting_time(2, 3), "importance")
    with pytest.raises(ModelError, match="NoSelect has no select method"):
        seqq.models.CallCounter(NoSelect(random_markov(6, 1)))


def test_a_correct_model_passes_the_check():
    model = Broken(random_markov(6, 1), lambda lp: lp.float())
    assert seqq.estimate(model, [0], Q.hitting_time(2, 3), "exact").value > 0


@pytest.mark.parametrize("options, message", [
    ({"samples": 0}, "samples must be a positive integer"),
    ({"samples": -5}, "samples must be a positive integer"),
    ({"samples": 2.5}, "samples must be a positive integer"),
    ({"budget": 0}, "budget must be a positive integer"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(QueryError, match=message):
        seqq.estimate(random_markov(6, 1), [0], Q.hitting_time(2, 3), "importance", **options)


def test_coverage_alpha_outside_unit_interval():
    with pytest.raises(QueryError, match=r"alpha must lie in \(0, 1\]"):
        seqq.estimate(random_markov(6, 1), [0], Q.hitting_time(2, 3), "coverage_beam", alpha=1.5)


def test_exact_refuses_an_unaffordable_query_naming_its_cost():
    with pytest.raises(BudgetError, match=r"costs 2\.33e\+20 model calls.*max_calls"):
        seqq.estimate(random_markov(6, 1), [0], Q.hitting_time(2, 30), "exact")


def test_non_query_is_refused():
    with pytest.raises(QueryError, match="expected a seqq Query"):
        seqq.estimate(random_markov(6, 1), [0], "tau(2) = 3", "importance")


@pytest.mark.parametrize("history, message", [
    ([0, 99], "symbol 99, outside the model's vocabulary of size 6"),
    ("abc", "sequence of integer symbol ids"),
    ([0, 1.5], "sequence of integer symbol ids"),
])
def test_bad_histories_are_refused(history, message):
    with pytest.raises(QueryError, match=message):
        seqq.estimate(random_markov(6, 1), history, Q.hitting_time(2, 3), "importance")


def test_numpy_and_tensor_histories_are_accepted():
    import numpy as np

    model, query = random_markov(6, 1), Q.hitting_time(2, 3)
    expected = seqq.estimate(model, [0, 3], query, "exact").value
    assert seqq.estimate(model, np.array([0, 3]), query, "exact").value == pytest.approx(expected)
    assert seqq.estimate(model, torch.tensor([0, 3]), query, "exact").value == pytest.approx(expected)


@pytest.mark.parametrize("method, options, message", [
    ("smc", {"particles": 0}, "particles must be a positive integer"),
    ("hindsight_gumbel", {"repeats": -1}, "repeats must be a positive integer"),
    ("randomized_beam", {"sampled": -2}, "sampled must be an integer ≥ 0"),
    ("wor", {"tail_samples": "ten"}, "tail_samples must be a positive integer"),
])
def test_new_methods_options_are_checked_before_any_model_call(method, options, message):
    from seqq.api import check_method  # the sweep calls it before loading the model

    with pytest.raises(QueryError, match=message):
        check_method(method, options)


@pytest.mark.parametrize("history, kwargs, said", [
    (0, {}, "history 0 must be a sequence of integer symbol ids, got 0"),
    ([0], {"samples": 10, "budget": 100}, "give samples= or budget=, not both"),
])
def test_python_argument_mistakes_get_one_line_errors(history, kwargs, said):
    """`history=0` was a bare TypeError and samples= beside budget= was silently accepted
    (issue 61); lists, tuples, arrays and tensors of ids still pass."""
    import numpy as np

    from seqq.errors import SeqqError

    model = random_markov(6, 1, seed=5)
    with pytest.raises(SeqqError, match=re.escape(said)):
        seqq.estimate(model, history, Q.hitting_time(2, 4), "importance", seed=0, **kwargs)
    for ids in ([0, 1], (0, 1), np.array([0, 1]), torch.tensor([0, 1])):
        assert seqq.estimate(model, ids, Q.hitting_time(2, 4), "importance", samples=10,
                             seed=0).value > 0


@pytest.mark.parametrize("method", ["smc", "randomized_beam", "hindsight_gumbel"])
def test_a_budget_too_small_to_split_is_refused_without_talk_of_replicates(method):
    """The driver runs one copy where a budget buys less than two paths per replicate, so the
    refusal names the whole budget and the cost of one path; it said "(it runs 8 replicates,
    each on 1/8 of the budget)" although one copy ran."""
    with pytest.raises(BudgetError, match=rf"^{method}: a budget of 3 model calls cannot buy "
                                          r".*\(that needs 5\); raise the budget \(budget=\)$"):
        seqq.estimate(random_markov(6, 1), [0], Q.hitting_time(2, 5), method, budget=3)
