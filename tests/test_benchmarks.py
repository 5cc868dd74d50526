"""The benchmark suite (benchmarks/): the smoke plan runs every section on tiny models in seconds
and writes every part of RESULTS.md. No timings are asserted, only what gets measured."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import compose_sweep
from omegaconf import OmegaConf

from benchmarks import e2e, paper_run, paper_slice
from benchmarks.overhead import Point, Split, line_fit, split
from benchmarks.plans import PLANS
from benchmarks.report import Section, write
from benchmarks.scaling import marginal_exponent, slope
from benchmarks.suite import SECTIONS, main, wanted
from benchmarks.throughput import exact_horizon, method_options
from benchmarks.timing import StepRecorder, raw_steps
from benchmarks.zoo import build
from seqq.estimators import METHODS
from seqq.results.schema import KL_KEY
from seqq.results.store import PartStore


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("bench") / "RESULTS.md"
    assert main(["--mode", "smoke", "--device", "cpu", "--out", str(out)]) == 0
    return out.read_text()


@pytest.mark.slow
def test_results_have_the_header_and_every_section(results):
    for field in ("- command: `python -m benchmarks --mode smoke", "- date:", "- git commit:",
                  "- machine:", "threads, device cpu", "- load average"):
        assert field in results
    for title in ("## (a) Estimator throughput", "## (c) Scaling in N, S, K and V",
                  "## (d) Ground-truth cost", "## (e) Row chunks",
                  "## (g) Where an estimate's time goes"):
        assert title in results
    assert "## (b)" not in results  # measured only by --e2e; a plain run keeps a stored one


@pytest.mark.slow  # runs the smoke benchmark: the slow tier's by the marker
def test_throughput_covers_every_method_on_both_paths(results):
    table = [line.split(" | ") for line in results.split("## (a)")[1].split("\n## (")[0]
             .splitlines() if line.startswith("| lstm-8")]
    for method in METHODS:
        paths = {row[2] for row in table if row[1] == method}
        assert paths == {"one query", "3 pairs"}, (method, paths)
    ratios = [row[6] for row in table]
    assert all(r.endswith("×") for r in ratios)


@pytest.mark.slow  # runs the smoke benchmark: the slow tier's by the marker
def test_scaling_fits_every_axis(results):
    section = results.split("## (c)")[1].split("## (d)")[0]
    for axis in ("N", "S", "K", "V"):
        assert f"| importance | {axis} |" in section


@pytest.mark.slow  # runs the smoke benchmark: the slow tier's by the marker
def test_ground_truth_and_chunk_sections_report_numbers(results):
    gt = results.split("## (d)")[1].split("## (e)")[0]
    assert "| 2 | 12 |" in gt and "| 3 | 133 |" in gt  # enumeration: 1 + 11 (+ 121) calls
    chunks = results.split("## (e)")[1]
    assert "one batch of 2,000" in chunks
    assert "map_row_chunks, chunk 1,024" in chunks and "step_in_chunks, chunk 1,024" in chunks


@pytest.mark.slow  # runs the smoke benchmark: the slow tier's by the marker
def test_time_split_reports_shares_of_real_runs(results):
    section = results.split("## (g)")[1].split("\n## (")[0]
    fits = [line.split(" | ") for line in section.split("Measured points:")[0].splitlines()
            if line.startswith("| lstm-8")]
    assert {row[1] for row in fits} == {"importance", "beam"}
    points = [line.split(" | ") for line in section.split("Measured points:")[1].splitlines()
              if line.startswith("| lstm-8")]
    assert len(points) == 2 * 3  # two methods at S = 5, 20, 80
    for row in points:
        assert 0 < float(row[6].rstrip(" |")) < 1  # the model's share of the wall time
    for row in fits:  # the share limit ("-" where the tiny model's time did not grow at all)
        assert row[5] == "-" or 0 <= float(row[5]) <= 1, row


def test_time_split_recovers_fixed_and_per_call_costs():
    # outside the model: 20 ms + 2 µs per call; inside: 1 ms + 8 µs per call
    points = [Point(s, c, 0.021 + 10e-6 * c, 0.001 + 8e-6 * c)
              for s, c in ((10, 100), (100, 1000), (1000, 10_000))]
    fit, fixed_model = split(points)
    assert fit.fixed_outside == pytest.approx(0.020)
    assert fit.per_call_outside == pytest.approx(2e-6)
    assert fit.per_call_model == pytest.approx(8e-6)
    assert fixed_model == pytest.approx(0.001)
    assert fit.limit_share == pytest.approx(0.8)
    assert math.isinf(fit.calls_for(0.9, fixed_model))  # 0.8 is the most batching can give
    calls = fit.calls_for(0.75, fixed_model)  # 8c + 1 ms = 3·(20 ms + 2c) → c = 29 500
    assert calls == pytest.approx(29_500)
    point = Point(0, round(calls), 0.02 + 10e-6 * calls + 0.001, 0.001 + 8e-6 * calls)
    assert point.share == pytest.approx(0.75, abs=1e-4)


def test_line_fit_keeps_fixed_costs_non_negative():
    assert line_fit([1, 2, 3], [3, 5, 7]) == pytest.approx((1, 2))
    a, b = line_fit([1, 2, 3], [1, 4, 9])  # convex: the free line crosses zero at x > 0
    assert a == 0 and b == pytest.approx(36 / 14)
    assert line_fit([1, 2, 3], [3, 2.5, 2]) == pytest.approx((2.5, 0))  # falling: flat at the mean
    flat = Split(fixed_outside=0.01, per_call_outside=0.0, per_call_model=0.0)
    assert math.isnan(flat.limit_share) and math.isinf(flat.calls_for(0.9, 0.001))
    assert flat.calls_for(0.9, 0.1) == 0  # the fixed model time alone is 10× the outside time
    assert line_fit([5, 5], [1.0, 3.0]) == (2.0, 0.0)  # one size: flat at the mean


def test_slope_recovers_power_laws():
    sizes = [1.0, 2.0, 4.0, 8.0]
    assert slope(sizes, [3 * s for s in sizes]) == pytest.approx(1.0)
    assert slope(sizes, [0.5 * s**2 for s in sizes]) == pytest.approx(2.0)


def test_marginal_exponent_ignores_fixed_costs():
    """Importance sampling's calls on the K axis (2 000·K − 3 658) are linear; the log-log fit
    reads 1.26 there, the marginal fit 1. A power law with an offset keeps its power."""
    sizes = [4.0, 8.0, 16.0, 32.0]
    calls = [2000 * k - 3658 for k in sizes]
    assert slope(sizes, calls) > 1.2
    assert marginal_exponent(sizes, calls) == pytest.approx(1.0)
    assert marginal_exponent(sizes, [50 + 0.5 * s**2 for s in sizes]) == pytest.approx(2.0)
    assert marginal_exponent(sizes, [7 + s**1.5 for s in sizes]) == pytest.approx(1.5)
    assert math.isnan(marginal_exponent(sizes, [5.0, 4.0, 6.0, 7.0]))  # noise: no fit


def test_exact_horizon_keeps_enumeration_cheap():
    assert exact_horizon(100, 8) == 3  # 1 + 99 + 99² = 9 901 calls; K = 4 would be ~1 M
    assert exact_horizon(12, 4) == 4
    assert exact_horizon(50257, 5) == 0


def test_method_options_pass_only_what_a_method_takes():
    bench = build("lstm-tiny", "cpu")
    assert method_options("importance", bench, 100) == {"samples": 100}
    assert method_options("beam", bench, 100) == {"beam_width": 100}
    assert method_options("hybrid", bench, 100) == {"samples": 100, "max_width": 100}
    assert method_options("exact", bench, 100) == {}
    twisted = method_options("twisted", bench, 100)  # a surrogate fitted on sampled sequences
    assert twisted["samples"] == 100 and twisted["surrogate"].num_contexts > 1


def test_raw_steps_replays_the_recorded_step_sizes():
    """The raw reference steps the model alone through the same sequence of batch sizes."""
    model = build("lstm-tiny", "cpu").model
    calls = []
    real_step = model.step
    model.step = lambda state, tokens: calls.append(len(tokens)) or real_step(state, tokens)
    seconds, rows = raw_steps(model, [1, 2], [3, 7, 7, 2])
    assert calls == [3, 7, 7, 2] and rows == 19 and seconds > 0


def test_step_recorder_counts_rows_and_changes_nothing():
    model = build("lstm-tiny", "cpu").model
    recorder = StepRecorder(model)
    log_probs, state = recorder.initial_state([[1, 2]])
    state = recorder.select(state, torch.zeros(5, dtype=torch.long))
    out, _ = recorder.step(state, torch.arange(5))
    expected, _ = model.step(model.select(model.initial_state([[1, 2]])[1],
                                          torch.zeros(5, dtype=torch.long)), torch.arange(5))
    torch.testing.assert_close(out, expected)
    recorder.step(state, torch.arange(5))
    recorder.step(recorder.select(state, torch.tensor([0, 1])), torch.tensor([1, 2]))
    assert recorder.sizes == [5, 5, 2] and (recorder.steps, recorder.rows) == (3, 12)
    assert recorder.seconds > 0  # the model's own time
    assert recorder.vocab_size == model.vocab_size and log_probs.shape == (1, model.vocab_size)


@pytest.mark.parametrize("device", [None, "cuda"])
def test_end_to_end_commands_are_sweeps_the_configs_accept(tmp_path, device):
    """(b) runs its sweeps as subprocesses; their overrides must compose (not run here)."""
    runs = list(e2e.commands(str(tmp_path), device).values())
    assert all(args[:3] == e2e.SEQQ and args[3] == "query-sweep" for args in runs)
    demo, fig3 = (OmegaConf.to_container(compose_sweep(args[4:]), resolve=True) for args in runs)
    assert demo["sweep"]["name"] == "demo" and demo["sweep"]["root"] == str(tmp_path)
    assert fig3["sweep"]["name"] == "fig3" and fig3["sweep"]["histories"] == 100
    assert fig3["dataset"]["name"] == "shakespeare"
    assert fig3["model"]["device"] == (device or "auto")


def test_paper_slice_is_fig3_at_paper_size_with_fewer_histories(tmp_path):
    """(f) runs as a subprocess (minutes, not run here): its overrides must compose into the
    paper's fig3 on Shakespeare, only `sweep.histories` cut."""
    args = paper_slice.command(str(tmp_path), 20, None)
    assert args[:3] == paper_slice.SEQQ and args[3] == "query-sweep"
    cut = OmegaConf.to_container(compose_sweep(args[4:]), resolve=True)
    whole = OmegaConf.to_container(compose_sweep(
        [a for a in args[4:] if not a.startswith("sweep.histories=")]), resolve=True)
    assert whole["sweep"]["histories"] == paper_slice.PAPER_HISTORIES
    assert cut["sweep"]["histories"] == 20
    assert (cut["sweep"]["name"], cut["dataset"]["name"], cut["model"]["type"]) == (
        "fig3", "shakespeare", "authors")
    assert (cut["sweep"]["k_min"], cut["sweep"]["k_max"], cut["levels"]["S"]) == (
        3, 11, [100])
    assert cut["ground_truth"]["s_high"] == 100_000 and cut["ground_truth"]["rule"] == "absolute"


@pytest.mark.slow
def test_paper_slice_reads_calls_and_projects_them(tiny_sweep):
    cost = paper_slice.read_costs(tiny_sweep)
    results = pd.concat(pd.read_parquet(f) for f in (tiny_sweep / "results").glob("*.parquet"))
    assert sum(cost.method_calls.values()) == results["model_calls"].sum() > 0
    assert set(cost.method_calls) == set(results["method"])
    assert cost.queries == len(results[["history_hash", "K"]].drop_duplicates())
    assert sum(cost.truth_queries.values()) >= 1
    body = "\n".join(paper_slice.body(0.02, 20, 50.0, 60.0, 55.0, cost, paper_slice.command(
        "/tmp/x", 20, None)))
    assert "| **whole sweep** |" in body and "50 min (wall)" in body  # 60 s × 50
    total = sum(cost.method_calls.values()) + sum(cost.truth_calls.values())
    assert f"| {total * 50:,.0f} |" in body


def test_elapsed_time_counts_side_by_side_invocations_once():
    runs = pd.DataFrame({"started": ["2026-01-01T10:00:00+00:00", "2026-01-01T10:30:00+00:00",
                                     "2026-01-01T10:40:00+00:00", "2026-01-01T12:00:00+00:00"],
                         "finished": ["2026-01-01T11:00:00+00:00", "2026-01-01T11:30:00+00:00",
                                      "2026-01-01T10:50:00+00:00", "2026-01-01T12:10:00+00:00"]})
    assert paper_run.elapsed(runs) == 100 * 60  # 10:00–11:30 and 12:00–12:10
    assert paper_run.elapsed(runs.iloc[[3, 1, 0]]) == 100 * 60  # in any order


def test_paper_run_reports_every_call_and_the_recorded_time(tiny_sweep, tmp_path):
    """(f)'s measured part: calls summed from the sweep's files, time from its runs.jsonl; run
    from the CLI, it keeps the slice's subsection of (f) and every other section."""
    results = pd.concat(pd.read_parquet(f) for f in (tiny_sweep / "results").glob("*.parquet"))
    truths = pd.concat(pd.read_parquet(f) for f in (tiny_sweep / "ground_truth").glob("*.parquet"))
    text = "\n".join(paper_run.run(tiny_sweep))
    total = results.model_calls.sum() + truths.model_calls.sum()
    assert f"| **Fig. 3 total** (paper methods + ground truth) |  | {total:,} |" in text
    assert f"by the three paper methods: {results.history_id.nunique()} of 1,000" in text
    assert "| **all recorded** |" in text and "| complete |" in text
    assert "Elapsed while any of them ran:" in text
    assert "before the record began" not in text  # every truth was computed by a recorded run
    out = tmp_path / "RESULTS.md"
    write(out, ["# head", ""], [Section("a", "A", ["first"]), Section(
        "f", "F", [paper_slice.HEADING, "", "the slice's table"])])
    assert main(["--paper-run", str(tiny_sweep), "--out", str(out)]) == 0
    written = out.read_text()
    assert written.index(paper_run.HEADING) < written.index(paper_slice.HEADING)
    assert "the slice's table" in written and "## (a) A" in written
    assert main(["--judge-run", str(tiny_sweep), "--out", str(out)]) == 0  # a subsection more
    written = out.read_text()
    assert (written.index(paper_run.HEADING) < written.index(paper_run.JUDGE_HEADING)
            < written.index(paper_slice.HEADING))
    assert paper_run.JUDGE_NOTE in written and "Elapsed while any of them ran:" in written


def test_a_section_run_alone_keeps_the_rest_of_results_md(tmp_path):
    out = tmp_path / "RESULTS.md"
    write(out, ["# head", ""], [Section("a", "A", ["first"]), Section("c", "C", ["third"])])
    write(out, None, [Section("f", "F", ["slice"])])
    write(out, None, [Section("c", "C", ["third, again"])])
    text = out.read_text()
    assert text.startswith("# head")
    assert [line for line in text.splitlines() if line.startswith("## ")] == [
        "## (a) A", "## (c) C", "## (f) F"]
    assert "third, again" in text and "third\n" not in text
    write(out, ["# new head", ""], [Section("a", "A", ["first"])])  # a full run keeps (f)
    assert out.read_text().startswith("# new head") and "## (f) F" in out.read_text()
    before = out.read_text()
    write(out, None, [Section("f", "F", ["slice"])])  # rewriting adds no blank lines
    assert out.read_text() == before and "\n\n\n" not in before


def test_sections_run_alone_replace_only_themselves_and_say_when(tmp_path, capsys):
    out = tmp_path / "RESULTS.md"
    write(out, ["# head", ""], [Section("a", "A", ["first"]), Section("g", "G", ["old split"])])
    assert main(["--mode", "smoke", "--device", "cpu", "--sections", "g", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# head") and "first" in text and "old split" not in text
    g = text.split("## (g)")[1]
    assert "Measured by `python -m benchmarks --mode smoke" in g and "git commit" in g
    assert "| lstm-8 | importance |" in g
    with pytest.raises(SystemExit):
        main(["--sections", "f", "--out", str(out)])
    assert "unknown section f" in capsys.readouterr().err


def test_end_to_end_runs_only_when_asked_for():
    assert [k for k in SECTIONS if wanted(k, None, False)] == ["a", "c", "d", "e", "g"]
    assert [k for k in SECTIONS if wanted(k, None, True)] == ["a", "b", "c", "d", "e", "g", "i"]
    assert [k for k in SECTIONS if wanted(k, ["b", "d", "h", "j"], False)] == ["b", "d", "h", "j"]


def test_end_to_end_rerun_alone_says_when_and_where(tmp_path, monkeypatch):
    out = tmp_path / "RESULTS.md"
    write(out, ["# head", ""], [Section("a", "A", ["first"])])
    monkeypatch.setitem(SECTIONS, "b", lambda plan, device: Section("b", "B", ["timed sweeps"]))
    assert main(["--mode", "smoke", "--device", "cpu", "--sections", "b", "--out", str(out)]) == 0
    b = out.read_text().split("## (b) B")[1]
    assert b.lstrip().startswith("Measured by `python -m benchmarks --mode smoke --device cpu "
                                 "--sections b")
    assert "(cpu, " in b and "git commit" in b and "timed sweeps" in b
    assert "first" in out.read_text()


def test_ask_examples_are_timed_as_commands(monkeypatch):
    from benchmarks import ask_examples

    answer = {"estimate": 0.773367, "exact": True, "stderr": 0.0, "method": "exact",
              "model_calls": 42, "seconds": 1.25}
    seen = []

    def fake_run(args, env, folder):
        seen.append((args, env["SEQQ_CACHE"]))
        return 2.5, 1100, answer

    monkeypatch.setattr(ask_examples, "_run", fake_run)
    section = ask_examples.run(PLANS["smoke"], None)
    assert len(seen) == len(ask_examples.EXAMPLES) and len({cache for _, cache in seen}) == 1
    assert seen[-1][0][3].endswith("/h.txt")  # the history file written for the LSTM example
    rows = [line for line in section.body if line.startswith("| SmolLM2, first load")]
    assert rows == ["| SmolLM2, first load (empty cache) | `seqq ask --model smollm2 --history "
                    "'The capital of France is' 'choice(\" Paris\", \" Lyon\")'` | 2.5 | 1,100 | "
                    "0.773367 (exact), exact, 42 calls | 1.25 |"]


def test_calibration_runs_end_to_end_at_a_tiny_size(tmp_path, monkeypatch):
    """(h) at the smoke size: every budgeted method on a Markov oracle at budgets drawn
    log-uniformly (the same draws for every method), its per-decade tables, the interval
    comparison, the verdicts and the figure (written into tmp_path, not benchmarks/figures)."""
    from benchmarks import calibration

    monkeypatch.setattr(calibration, "FIGURES", tmp_path / "figures")
    monkeypatch.setattr(calibration, "RUNS_CSV", tmp_path / "runs")
    out = tmp_path / "RESULTS.md"
    assert main(["--mode", "smoke", "--device", "cpu", "--sections", "h", "--out", str(out)]) == 0
    h = out.read_text().split("## (h)")[1]
    drawn = calibration.drawn_budgets("markov", 3, 4, (200, 2000))
    assert drawn == calibration.drawn_budgets("markov", 3, 4, (200, 2000))  # seeded
    assert all(200 <= b <= 2000 for row in drawn for b in row) and len({*sum(drawn, [])}) > 6
    in_decade = {start: sum(calibration.decade(b) == start for row in drawn for b in row)
                 for start in (100, 1000)}
    assert "### Per budget decade, all families pooled" in h and "### Which methods meet" in h
    for start, label in ((100, "200–999"), (1000, "1,000–2,000")):
        if not in_decade[start]:
            continue
        rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in
                h.split(f"### markov, budgets {label} model calls")[1].split("###")[0]
                .splitlines() if line.startswith("| ") and not line.startswith("| method")}
        assert set(rows) == set(calibration.budgeted_methods())
        for method, row in rows.items():  # every method ran every run of this decade
            assert int(row[1]) == in_decade[start], (method, row)
        assert f"100 % of {in_decade[start]}" in rows["beam"][10]  # certain bounds hold
        assert rows["importance"][9][0] in "+-"  # mean signed error of its unflagged runs
    assert "| auto | 200–999 |" in h and "| precision | recall | false alarms |" in h
    assert "| importance | normal |" in h and "| importance | bootstrap |" in h
    assert (tmp_path / "figures" / "calibration_coverage.png").is_file()
    assert any((tmp_path / "runs").glob("calibration_*.csv"))


def test_calibration_queries_spread_over_p_and_intervals_are_built_as_stated():
    from benchmarks.calibration import bootstrap_interval
    from benchmarks.calibration_oracles import Task, spread
    from seqq import queries as Q

    query = Q.hitting_time(1, 3)
    tasks = [Task((0,), query, "", 3, p) for p in (1e-12, 1e-9, 1e-8, 1e-5, 1e-4, 0.01, 0.3, 0.9)]
    chosen = [t.p for t in spread(tasks, 4)]
    assert chosen == [1e-9, 1e-5, 1e-4, 0.3]  # nearest to 1e-9, 7.9e-7, 6.3e-4, 0.5
    rng = np.random.default_rng(0)
    log_w = np.log(0.01 * rng.exponential(size=4000))  # mean 0.01, standard deviation 0.01
    low, high = bootstrap_interval(log_w, float(np.exp(log_w).mean()), 400, 0)
    assert low < 0.01 < high
    assert high - low == pytest.approx(2 * 1.96 * 0.01 / math.sqrt(4000), rel=0.2)
    assert bootstrap_interval(log_w, 0.5, 400, 0) is None  # not the mean of these weights


def test_judge_section_joins_new_truths_with_the_committed_ones(tmp_path, monkeypatch):
    """(k) against the paper's truths: the same (dataset, history, query) joined, z from both
    standard errors, the committed enumerated truths compared as exact, and Fig. 3's medians
    recomputed from the sweep's rows beside the committed median's interval."""
    from benchmarks import judge
    from seqq.results.store import PartStore

    committed, sweep = tmp_path / "committed", tmp_path / "sweep"
    common = {"dataset": "d", "model": "m", "temperature": 1.0, "history_hash": ["h1", "h2"]}
    PartStore(committed / "ground_truth", ["history_hash", "label"]).write(pd.DataFrame(
        {**common, "gt_options": "old", "label": ["tau(1)=5", "tau(1)=4"], "value": [0.1, 0.2],
         "rel_stderr": [0.01, 0.0], "model_calls": [5000, 300000],
         "method": ["importance", "enumeration"]}), "old")
    PartStore(sweep / "ground_truth", ["history_hash", "label"]).write(pd.DataFrame(
        {**common, "gt_options": "new", "label": ["tau(1)=5", "tau(1)=4"],
         "value": [0.103, 0.199], "rel_stderr": [0.01, 0.005], "model_calls": [500, 1500],
         "method": ["twisted_wor", "twisted_wor"]}), "new")
    monkeypatch.setattr(judge, "COMMITTED", committed)
    both = judge.against_paper([sweep]).set_index("K")
    floor = judge.FLOAT_PRECISION
    assert both.loc[5, "z"] == pytest.approx(0.003 / math.hypot(0.1 * math.hypot(0.01, floor),
                                                                0.00103))
    # an exact reference: SE_new and the float precision only
    assert both.loc[4, "z"] == pytest.approx(-0.001 / math.hypot(0.000995, 0.2 * floor))
    assert list(both["model_calls_old"]) == [5000, 300000]

    committed_rows = pd.DataFrame({"history_id": range(5), "K": 5, "method": "hybrid",
                                   "estimate": [0.1, 0.2, 0.3, 0.4, 0.5], "truth": 1.0,
                                   "rae": [0.9, 0.8, 0.7, 0.6, 0.5]})
    committed_rows.to_csv(committed / "fig3_d_authors.csv", index=False)
    PartStore(sweep / "results", ["history_id"]).write(pd.DataFrame(
        {"dataset": "d", "history_id": range(5), "K": 5, "method": "beam",
         "truth": [0.5, 0.5, 0.5, 1.0, 1.0]}), "rows")
    medians = judge.fig3_medians([sweep])  # the committed estimates, judged again
    assert medians.loc[0, ["method", "new", "old"]].tolist() == ["hybrid", pytest.approx(0.6), 0.7]


def test_paper_run_counts_the_kl_sweeps_sampled_steps(tmp_path):
    """(f)'s row for Tables 4/5's sweep, which has KL rows instead of query results: its calls
    are histories × (M + max S) × max L."""
    rows = pd.DataFrame([{"dataset": "moocs", "model": "authors_lstm", "history_id": h,
                          "length": n, "samples": s, "truth_paths": 1000, "kl": 0.1}
                         for h in range(3) for n in (2, 5) for s in (10, 100)])
    PartStore(tmp_path / "kl-paper" / "kl", KL_KEY).write(rows, "rows")
    text = "\n".join(paper_run._other_sweeps(tmp_path, "fig3-paper"))
    assert f"| kl | moocs | 3 | 12 | {3 * (1000 + 100) * 5:,} | 0 | 0 | 0 |" in text


def test_cox_interval_of_log_normal_replicates_covers_their_mean():
    """Cox's interval (smc's and randomized_beam's, and (h)'s comparison) on replicates drawn
    from a log-normal with mean 0.01: over 400 sets of 8 it covers the mean at about its 95 %
    (within binomial limits) and reaches further above than below; (h) declines replicates of 0
    (no log)."""
    import dataclasses

    from benchmarks.calibration import replicate_interval
    from seqq.estimators.estimate import Estimate

    rng = np.random.default_rng(1)
    sigma, mean = 1.0, 0.01
    mu = math.log(mean) - sigma**2 / 2
    base = Estimate("smc", 0.0, 0.0, None, 0, False, interval_kind="log-replicates", dof=7)
    covered, above = 0, 0
    for _ in range(400):
        values = np.exp(rng.normal(mu, sigma, size=8))
        e = dataclasses.replace(base, value=float(values.mean()),
                                extras={"replicates": values.tolist()})
        low, high = e.interval(0.95)
        assert (low, high) == replicate_interval(e, "log-replicates")
        covered += low <= mean <= high
        above += high - e.value > e.value - low
    assert 0.95 - 3.5 * math.sqrt(0.05 * 0.95 / 400) <= covered / 400 <= 1.0
    assert above > 0.9 * 400
    zero = dataclasses.replace(base, value=0.1, extras={"replicates": [0.0, 0.2]})
    assert replicate_interval(zero, "log-replicates") is None


@pytest.mark.slow
def test_lm_cost_section_times_every_cell_and_mode_in_one_process_and_two_shards(tmp_path):
    """(l) on a random one-layer GPT-2 (SmolLM2's weights would cost minutes): the grid's
    every cell and every declared mode, each with its rate in one process and in two shards
    (spawned processes) and its ratio to the bare step."""
    from benchmarks.lm_cost import MODES

    out = tmp_path / "RESULTS.md"
    assert main(["--mode", "smoke", "--sections", "l", "--out", str(out)]) == 0
    section = out.read_text().split("## (l)")[1]
    lm = PLANS["smoke"].lm
    cells = [line.split(" | ") for line in section.splitlines() if line[:3].strip("| ").isdigit()]
    assert [(int(row[0].strip("| ")), int(row[1])) for row in cells] == lm.cells
    assert all(cell.endswith("×") for row in cells for cell in (row[4], row[7]))
    for mode in MODES:
        row = next(line for line in section.splitlines() if line.startswith(f"| {mode.name} |"))
        fields = row.split(" | ")
        assert fields[1] == f"{lm.calls:,}" and fields[3].endswith("×") and fields[5].endswith("×")
    assert "1 torch thread per process" in section and "Load average" in section


def test_lm_cost_shards_add_their_rows_over_the_slower_ones_time():
    from benchmarks.lm_cost import Rates, Timing, windows

    timings = [Timing("step", 8, 4, 0, 40, 2.0, 2.0), Timing("step", 8, 4, 0, 40, 4.0, 2.0),
               Timing("step", 8, 4, 1, 80, 2.0, 2.0),
               Timing("stock", 8, 4, 0, 0, math.nan, math.nan, "too big")]
    wall, cpu = Rates.of(timings, "wall"), Rates.of(timings, "cpu")
    assert wall.per_repeat[("step", 8, 4)] == [20.0, 40.0]  # (40 + 40) / 4 s; 80 / 2 s
    assert cpu.per_repeat[("step", 8, 4)] == [40.0, 40.0]  # (40 + 40) / 2 s of CPU
    assert wall.cpu_share == pytest.approx(6 / 8)
    assert math.isnan(wall.rate("stock", (8, 4))) and wall.notes == [
        "stock at batch 8 × history 4 skipped: too big"]
    texts = [list(range(10)), list(range(10, 30))]
    assert windows(texts, 3, 5) == [[0, 1, 2, 3, 4], [12, 13, 14, 15, 16], [25, 26, 27, 28, 29]]


def test_lm_judges_section_prices_each_truth_through_the_trie_and_rolled_out(tmp_path):
    """(m) reads a sweep's importance-sampled truths: the rolled-out cost at the same samples is
    (K − 1)·S + 1 calls, the trie's the truth's own; processes' peak memory from runs.jsonl."""
    import json

    from benchmarks import lm_judges

    folder = tmp_path / "ground_truth"
    folder.mkdir()
    # written as before issue 60 ("surrogate"): read as an estimated truth
    pd.DataFrame({"label": ["tau(5)=3", "tau(7)=5", "tau(1)=4"], "kind": "surrogate",
                  "value": [0.1, 0.01, 0.5], "samples": [4000, 10000, 0],
                  "rel_stderr": [0.02, 0.024, 0.0], "model_calls": [2000, 20000, 1]}
                 ).to_parquet(folder / "part.parquet")
    (tmp_path / "runs.jsonl").write_text(json.dumps(
        {"tag": "rejudge-shard0of1", "git_commit": "abcdef123", "status": "complete",
         "threads": 1, "wall_s": 10.0, "cpu_s": 9.0, "truths_computed": 2,
         "peak_rss_gb": 6.5}) + "\n")
    rows = lm_judges.truths(tmp_path)
    assert list(rows.K) == [3, 5] and list(rows.rolled_out) == [8001, 40001]
    body = "\n".join(lm_judges.run(tmp_path).body)
    assert "| 3 | 1 | 4,000 |" in body and "4.00×" in body and "2.00×" in body
    assert "6.50 GB" in body and "abcdef1" in body
