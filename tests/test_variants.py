"""Labelled estimator variants (`estimator.variants.<label>: {method, surrogate: hpyp, ...}`):
refused when malformed before any model loads, one surrogate fit shared per order, rows,
resume keys, tables and legends named by the label."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import compose_sweep, tiny_overrides
from result_frames import panel_rows, results

from seqq.commands import query_sweep
from seqq.errors import ConfigError
from seqq.estimators.surrogates import DISTILL_SYMBOLS
from seqq.reports import frontier
from seqq.reports.build import build_report
from seqq.reports.figures import FIGURES
from seqq.reports.tables import load_results
from seqq.sweeps import method_runs as runs_module
from seqq.sweeps import sweep
from seqq.sweeps.method_runs import MethodRun, Surrogate, method_runs, with_surrogates

SMC_TWISTED = "+estimator.variants.st={method:smc,surrogate:hpyp,order:2}"


def _compose(tmp_path: Path, *overrides: str):
    return compose_sweep(tiny_overrides(tmp_path, "variants", *overrides))


def test_a_variant_runs_its_method_under_its_label(tmp_path: Path) -> None:
    cfg = _compose(tmp_path, "estimator.methods=[hybrid,smc,st,twisted]", SMC_TWISTED,
                   "+estimator.variants.unused={method:beam}")
    assert method_runs(cfg) == [
        MethodRun("hybrid", "hybrid", {"max_width": 1500}),
        MethodRun("smc", "smc", {}),
        MethodRun("st", "smc", {}, Surrogate("hpyp", 2)),
        MethodRun("twisted", "twisted", {}, Surrogate("hpyp", None)),  # twisted's default
    ]


@pytest.mark.parametrize("overrides, said", [
    (["+estimator.variants.smc={method:smc,surrogate:hpyp}"],
     "estimator.variants.smc: 'smc' is a method's name; give the variant another label"),
    (["+estimator.variants.st={method:smcc}"],
     "estimator.variants.st.method: no method 'smcc'; methods are exact,"),
    (["+estimator.variants.st={surrogate:hpyp}"],
     "estimator.variants.st names no method; add estimator.variants.st.method=<one of"),
    (["+estimator.variants.st={method:importance,surrogate:hpyp}"],
     "estimator.variants.st: method 'importance' takes no option 'surrogate'"),
    (["+estimator.variants.st={method:smc,particles:0}"],
     "estimator.variants.st: smc option particles must be a positive integer"),
    (["+estimator.variants.st={method:smc,surrogate:ngram}"],
     "estimator.variants.st.surrogate must be hpyp"),
    (["+estimator.variants.st={method:smc,order:3}"],
     "estimator.variants.st.order sets a surrogate's order; add "
     "estimator.variants.st.surrogate=hpyp"),
    (["+estimator.variants.st={method:smc,surrogate:hpyp,order:1}"],
     "estimator.variants.st.order must be a whole number >= 2, or null"),
    (["+estimator.variants=[st]"], "estimator.variants must map labels to variants"),
    (["+estimator.variants.st=smc"], "estimator.variants.st must be a mapping of options"),
    (["+estimator.variants.st={method:smc}", "+estimator.options.st.particles=4"],
     "estimator.options.st: 'st' is a variant; put its options in estimator.variants.st"),
    (["+estimator.options.smc.order=3"],
     "estimator.options.smc.order sets a surrogate's order; add "
     "estimator.options.smc.surrogate=hpyp"),
    (["+estimator.options.beam.surrogate=hpyp"],
     "estimator.options.beam: method 'beam' takes no option 'surrogate'"),
])
def test_malformed_variants_are_refused_naming_the_fix(tmp_path: Path, overrides: list[str],
                                                       said: str) -> None:
    cfg = _compose(tmp_path, "estimator.methods=[hybrid,st]", *overrides)
    with pytest.raises(ConfigError, match=re.escape(said)):
        sweep.check_config(cfg)


def test_an_undefined_label_is_an_unknown_method(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("estimator.methods: unknown 'st'")):
        sweep.check_config(_compose(tmp_path, "estimator.methods=[hybrid,st]"))


def test_one_surrogate_fit_per_order_shared_by_every_run(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    fits, fit = [], runs_module.fit_surrogate

    def counted(train, vocab, order):
        fits.append(order)
        return fit(train, vocab, order)

    monkeypatch.setattr(runs_module, "fit_surrogate", counted)
    cfg = _compose(tmp_path, "estimator.methods=[hybrid,twisted,st,rt,st2]", SMC_TWISTED,
                   "+estimator.variants.rt={method:randomized_beam,surrogate:hpyp,order:2}",
                   "+estimator.variants.st2={method:smc,surrogate:hpyp,order:3}",
                   "+estimator.options.twisted.order=2")
    spec = sweep.sweep_spec(cfg)
    data = sweep.load_data(spec)
    runs = {r.label: r for r in with_surrogates(method_runs(cfg), data,
                                                sweep.load_sweep_model(spec, data))}
    assert sorted(fits) == [2, 3]
    shared = runs["twisted"].options["surrogate"]
    assert runs["st"].options["surrogate"] is shared and runs["rt"].options["surrogate"] is shared
    assert repr(shared).startswith("HPYPModel(order=2, vocab_size=9,")
    assert repr(runs["st2"].options["surrogate"]).startswith("HPYPModel(order=3,")
    assert runs["hybrid"].options == {"max_width": 1500}
    assert all(r.surrogate is None for r in runs.values())  # every named surrogate fitted


def test_a_distilled_surrogate_is_fitted_on_the_models_samples(tmp_path: Path) -> None:
    """`surrogate: distilled` needs no training data: it is fitted on the sweep model's samples
    and named so in the `options` column."""
    cfg = _compose(tmp_path, "estimator.methods=[hybrid,dt]",
                   "+estimator.variants.dt={method:smc,surrogate:distilled,order:2}")
    spec = sweep.sweep_spec(cfg)
    data = sweep.load_data(spec)
    runs = {r.label: r for r in with_surrogates(method_runs(cfg), replace(data, train=[]),
                                                sweep.load_sweep_model(spec, data))}
    surrogate = runs["dt"].options["surrogate"]
    assert repr(surrogate).endswith(f"distilled from {DISTILL_SYMBOLS:,} model samples)")
    assert surrogate.info["model_calls"] == DISTILL_SYMBOLS
    cfg = _compose(tmp_path, "estimator.methods=[hybrid,twisted]")
    with pytest.raises(ConfigError, match="use surrogate: distilled"):
        with_surrogates(method_runs(cfg), replace(data, train=[]),
                        sweep.load_sweep_model(sweep.sweep_spec(cfg), data))


@pytest.mark.slow
def test_a_sweep_stores_rows_under_the_label_at_the_hybrids_budgets(tmp_path: Path) -> None:
    """A tiny sweep through the runner: smc and its twisted variant side by side, each at the
    hybrid's budgets, rows and report named by the label; a re-run resumes them all."""
    overrides = ["estimator.methods=[hybrid,smc,st]", SMC_TWISTED, "sweep.ks=[3]"]
    cfg = _compose(tmp_path, *overrides)
    folder = query_sweep.run(cfg)
    table = load_results([folder / "results"])
    assert set(table.method) == {"hybrid", "smc", "st"}
    variant = table[table.method == "st"]
    assert (variant.base_method == "smc").all() and len(variant) == 6 * 2  # N × levels
    [options] = set(variant.options)
    assert options.startswith('{"surrogate": "HPYPModel(order=2, vocab_size=9, contexts=')
    assert set(table[table.method == "smc"].options) == {"{}"}
    query = ["history_id", "K", "budget_level"]
    hybrid = table[table.method == "hybrid"].set_index(query).model_calls
    for label in ("smc", "st"):
        rows = table[table.method == label].set_index(query)
        assert (rows.budget_calls == hybrid.reindex(rows.index)).all()
        assert (rows.model_calls <= rows.budget_calls).all() and np.isfinite(rows.rae).all()
    summary = pd.read_csv(folder / "report" / "tables" / "rae_summary.csv")
    assert {"smc", "st"} <= set(summary.method)
    winners = pd.read_csv(folder / "report" / "tables" / "frontier.csv")
    assert set(winners.best_other) <= {"smc", "st"} and len(winners) == 2
    parts = sorted(p.name for p in (folder / "results").glob("*.parquet"))
    assert any("-st-" in p for p in parts)
    sweep.run(_compose(tmp_path, *overrides))  # resumes: nothing new
    assert sorted(p.name for p in (folder / "results").glob("*.parquet")) == parts


def test_a_label_reused_for_another_method_is_refused_on_resume(tmp_path: Path) -> None:
    sweep.run(_compose(tmp_path, "estimator.methods=[hybrid,st]", SMC_TWISTED, "sweep.ks=[3]",
                       "levels.S=[10]"))
    moved = _compose(tmp_path, "estimator.methods=[hybrid,st]", "sweep.ks=[3]",
                     "levels.S=[10]",
                     "+estimator.variants.st={method:randomized_beam,surrogate:hpyp,order:2}")
    with pytest.raises(ConfigError, match="holds rows labelled 'st' from method 'smc', not "
                                          "'randomized_beam'; give the variant another label"):
        sweep.run(moved)


VARIANTS = {"smc_twisted": "smc", "randomized_beam_twisted": "randomized_beam"}


def _variant_results() -> pd.DataFrame:
    labels = ("hybrid", "smc", "randomized_beam", *VARIANTS)
    return results(panel_rows(methods=labels, base_methods=VARIANTS, ks=(3, 4),
                              estimate=lambda m, s, k, h: 0.05 * (1.01 if "twisted" in m
                                                                   else 1.5)))


def test_the_frontier_names_a_winning_variant_and_draws_it_in_its_own_colour() -> None:
    table = _variant_results()
    assert set(frontier.winners(table).best_other) <= set(VARIANTS)
    fig = frontier.draw(table)["frontier"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert set(legend) == {"hybrid", "smc", "randomized_beam", *VARIANTS}
    colours = {line.get_label(): line.get_color() for ax in fig.axes for line in ax.get_lines()}
    assert len(set(colours.values())) == len(colours)


def test_report_tables_and_figures_name_the_label(tmp_path: Path) -> None:
    table = _variant_results()
    table.to_parquet(tmp_path / "part.parquet")
    report = build_report([tmp_path / "part.parquet"], tmp_path / "report",
                          figures=["rae_vs_k_median"])
    summary = (report / "summary.md").read_text()
    assert "smc_twisted" in summary and "randomized_beam_twisted" in summary
    fig = FIGURES["rae_vs_k_median"](table)["rae_vs_k_median"]
    assert set(VARIANTS) <= {t.get_text() for t in fig.legends[0].get_texts()}


def test_coverage_variants_share_the_beam_sizes_figure() -> None:
    """Fig. 12 finds coverage beam search by the method that ran, whatever its label."""
    rows = [r for alpha, label in ((0.5, "cov50"), (0.9, "cov90"))
            for r in panel_rows(methods=(label,), base_methods={label: "coverage_beam"},
                                ks=(3,), levels=(0,), options=f'{{"alpha": {alpha}}}',
                                extras='{"beam_sizes": [[1, 2, 4]]}')]
    fig = FIGURES["beam_sizes"](results(rows))["beam_sizes"]
    assert {t.get_text() for t in fig.legends[0].get_texts()} == {"α = 0.5", "α = 0.9"}
