"""Refactoring guard: every method's answers on fixed cases, bit for bit.

A restructuring of the estimators must not change a single number. This test runs every method
of the registry (and `hitting_time_distribution`, `ground_truth`) on a fixed set of (model,
histories, queries, options, seed) — a Markov chain, the tiny LSTM, the tiny GPT-2; hitting
times, a-before-b, counts, an automaton query, a union built without compiling; defaults,
budgets and surrogates — and compares `value`, `stderr`, `model_calls`, `lower`, `upper` with the values
stored in `golden/estimates.json` as exact float hex strings.

Floating point differs across CPU instruction sets, torch versions and thread counts (and a
sampled path can then take another branch). So the guard is split. The cases that sample nothing
(enumeration, the beam searches, and the DP of a Markov chain and an HPYP) run on every machine
and torch version, compared to a relative 1e-5 (calls exactly): rounding moves their values
only in the last digits. The bit-for-bit comparison of every case runs where float32 rounds as it
did where they were recorded: the key is a fingerprint of the test models' own float32 steps (a
CPU's name does not decide its rounding: two "AMD EPYC" generations differ), with torch's
version; elsewhere it skips, so only the sampled cases depend on the machine.
After an intended change of numbers, rewrite them:

    SEQQ_WRITE_GOLDEN=1 python -m pytest tests/test_golden.py
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import pytest
import torch

import seqq
from seqq import queries as Q
from seqq.estimators import Guarantee, registry
from seqq.models.hpyp import HPYPModel
from tests.oracles import random_markov, tiny_gpt2, tiny_lstm

GOLDEN = Path(__file__).parent / "golden" / "estimates.json"
HISTORIES = [[0], [1, 2], [3, 0, 1]]
BUDGET = 150


def _queries() -> dict[str, list]:
    """Three queries per family, one per history."""
    zero, rest = Q.Domain(frozenset({0})), Q.Domain(frozenset({0}), complement=True)
    parity = Q.Automaton((((zero, 1), (rest, 0)), ((zero, 0), (rest, 1))), frozenset({1}))
    return {
        "hitting": [Q.hitting_time(2, K=4), Q.hitting_time([1, 3], K=5), Q.hitting_time(4, K=3)],
        "mixed": [Q.a_before_b([1], [3], K=5), Q.count(2, n=2, K=5, op=">="),
                  Q.automaton(parity, K=4)],
        "union": [Q.union(Q.event_at(1, K=2), Q.occurs_within(3, K=4), compile=False)] * 3,
    }


def _cases() -> list[tuple[str, str, str, dict]]:
    """(case name, method, query family, options); `budget` in options is the budget. Derived
    from the registry, so a new method is guarded once it is declared: every method at its
    defaults and under a budget (and twisted by a surrogate where it takes one), then the
    options its defaults do not reach."""
    cases = []

    def add(method: str, family: str, **options) -> None:
        label = ",".join(f"{k}={v}" for k, v in sorted(options.items()))
        cases.append((f"{method}[{family}|{label}]", method, family, options))

    for method in registry.discover():
        twist = {"surrogate": "markov"} if method.surrogate == "required" else {}
        for family in ("union",) if method.by_part else ("hitting", "mixed"):
            add(method.name, family, **twist)
            if method.takes_budget:
                add(method.name, family, budget=BUDGET, **twist)
            if method.takes_budget and method.surrogate == "optional":
                add(method.name, family, budget=BUDGET, surrogate="markov")
    for family in ("hitting", "mixed"):
        add("wor", family, rel_tol=0.2)
        add("hindsight_gumbel", family, samples=8, repeats=2)
        add("coverage_beam", family, alpha=0.8)
    return cases


def _samples_nothing(method: str) -> bool:
    """Enumeration and the beam searches (exact answers, lower bounds) draw nothing: rounding
    cannot send them down another branch, so their cases are compared on any machine."""
    return registry.get(method).guarantee is not Guarantee.UNBIASED


MODELS = {"markov": lambda: random_markov(V=5, seed=3), "lstm": lambda: tiny_lstm(V=5),
          "gpt2": lambda: tiny_gpt2(V=5)}


def _tiny_hpyp() -> HPYPModel:
    """An order-3 HPYP fitted (Kneser–Ney seating, no Gibbs sweeps: nothing random) on fixed
    sequences: its answers come from its own forward DP."""
    sequences = [[(i * j + j // 2) % 5 for j in range(12)] for i in range(1, 9)]
    return HPYPModel.fit(sequences, [str(v) for v in range(5)], order=3)


DP_MODELS = {"markov": MODELS["markov"], "hpyp": _tiny_hpyp}


def _dp_truths() -> dict[str, list[dict]]:
    """The DP models' own exact answers (ground truth's `dp`) to every hitting and mixed query."""
    families = _queries()
    queries = families["hitting"] + families["mixed"]
    out = {}
    for name, make in DP_MODELS.items():
        truths = seqq.ground_truth_many(make(), HISTORIES * 2, queries)
        assert {t.method for t in truths} == {"dp"}
        out[f"dp/{name}"] = [{"value": _hex(t.value), "method": t.method} for t in truths]
    return out


def _hex(x: float | None) -> str | None:
    return None if x is None else float(x).hex()


def _record(estimate) -> dict:
    return {"value": _hex(estimate.value), "stderr": _hex(estimate.stderr),
            "model_calls": int(estimate.model_calls), "lower": _hex(estimate.lower),
            "upper": _hex(estimate.upper), "ci_low": _hex(estimate.ci_low),
            "ci_high": _hex(estimate.ci_high)}


def _rounding_fingerprint() -> str:
    """A hash of the neural test models' float32 next-symbol distributions on one thread: equal
    on two machines exactly when their kernels round these models' arithmetic alike."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        digest = hashlib.sha256()
        for make in (MODELS["lstm"], MODELS["gpt2"]):
            model = make()
            log_probs, state = model.initial_state(HISTORIES)
            for token in range(3):
                digest.update(log_probs.float().cpu().numpy().tobytes())
                log_probs, state = model.step(state, torch.full((len(HISTORIES),), token))
            digest.update(log_probs.float().cpu().numpy().tobytes())
        return digest.hexdigest()[:16]
    finally:
        torch.set_num_threads(threads)


def _machine() -> dict:
    return {"torch": torch.__version__, "float32_fingerprint": _rounding_fingerprint()}


def compute() -> dict[str, list[dict]]:
    """Every case on every model, on one thread: the records, keyed "model/case"."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _compute()
    finally:
        torch.set_num_threads(threads)


def _compute() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    families = _queries()
    surrogate = random_markov(V=5, seed=11)
    for model_name, make in MODELS.items():
        model = make()
        for name, method, family, options in _cases():
            out[f"{model_name}/{name}"] = _run(model, method, families[family], options,
                                               surrogate)
        reuse = seqq.hitting_time_distribution(model, [1], a=2, K=4, samples=30, seed=7)
        out[f"{model_name}/hitting_time_distribution"] = [_record(e) for e in reuse]
        for rule in ("relative", "absolute"):
            truths = seqq.ground_truth_many(model, HISTORIES, families["mixed"], seed=7,
                                            exact_max_calls=20, rule=rule, rel_tol=0.1,
                                            s_low=200, s_step=100, s_high=400)
            out[f"{model_name}/ground_truth_{rule}"] = [
                {"value": _hex(t.value), "rel_stderr": _hex(t.rel_stderr), "method": t.method,
                 "model_calls": int(t.model_calls)} for t in truths]
    return out | _dp_truths()


def _run(model, method: str, queries: list, options: dict, surrogate) -> list[dict]:
    """One case's records: `method` on `queries` after HISTORIES, seeded, with the case's
    options (its `budget`, and `surrogate="markov"` standing for `surrogate`)."""
    options = dict(options)
    budget = options.pop("budget", None)
    if options.get("surrogate") == "markov":
        options["surrogate"] = surrogate
    estimates = seqq.estimate_many(model, HISTORIES, queries, method, budget=budget, seed=7,
                                   **options)
    return [_record(e) for e in estimates]


def _stored() -> dict:
    if os.environ.get("SEQQ_WRITE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps({"machine": _machine(), "cases": compute()}, indent=1,
                                     sort_keys=True) + "\n")
    return json.loads(GOLDEN.read_text())


def test_every_method_answers_as_recorded() -> None:
    stored = _stored()
    if stored["machine"] != _machine():
        pytest.skip(f"golden values were recorded where float32 rounds otherwise "
                    f"({stored['machine']}, this is {_machine()}); "
                    "test_cases_that_sample_nothing_agree_on_any_machine compares what "
                    "cannot branch")
    current = compute()
    assert current.keys() == stored["cases"].keys()
    changed = [key for key in current if current[key] != stored["cases"][key]]
    assert not changed, f"{len(changed)} cases changed, first {changed[:5]}: " + json.dumps(
        {k: {"now": current[k], "stored": stored["cases"][k]} for k in changed[:2]})


FLOATS = {"value", "stderr", "lower", "upper", "ci_low", "ci_high", "rel_stderr"}  # hex strings


def _agrees(now: dict, stored: dict) -> bool:
    """Two records alike up to float32 rounding: every float to a relative 1e-5 (the LSTM
    cases differ by ~1e-8 across AMD generations); calls, methods and missing values exactly."""
    if now.keys() != stored.keys():
        return False
    for field, value in now.items():
        old = stored[field]
        if field not in FLOATS or value is None or old is None:
            if value != old:
                return False
            continue
        a, b = float.fromhex(value), float.fromhex(old)
        if not (a == b or (math.isnan(a) and math.isnan(b))
                or math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-12)):
            return False
    return True


def test_cases_that_sample_nothing_agree_on_any_machine() -> None:
    """Enumeration, the beams and DP: every such case of the record, on any CPU and torch."""
    stored = _stored()["cases"]
    families = _queries()
    current = {}
    for model_name, make in MODELS.items():
        model = make()
        for name, method, family, options in _cases():
            if _samples_nothing(method):
                current[f"{model_name}/{name}"] = _run(model, method, families[family], options,
                                                       None)
    current |= _dp_truths()
    changed = [key for key, records in current.items()
               if len(records) != len(stored[key])
               or not all(map(_agrees, records, stored[key]))]
    assert not changed, f"{len(changed)} cases changed, first {changed[:5]}: " + json.dumps(
        {k: {"now": current[k], "stored": stored[k]} for k in changed[:2]})
    drawless = {m.name for m in registry.METHODS.values() if _samples_nothing(m.name)}
    assert drawless == {key.split("/")[1].split("[")[0] for key in current if "[" in key}
    assert len(drawless) >= 4  # exact and the three beams
