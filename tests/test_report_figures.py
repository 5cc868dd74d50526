"""Figures keep apart what must not be pooled (models, query kinds, levels S, horizons),
label their axes, show zero estimates, and explain their bands; built from small synthetic
results tables, inspected as matplotlib objects."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure
from result_frames import beam_extras, panel_rows, results

from seqq.reports.figures import FIGURES
from seqq.reports.plotting import NotApplicable, log_axes
from seqq.results.schema import BUDGET_FROM_SAMPLES


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _only(figures: dict[str, Figure]) -> Figure:
    assert len(figures) == 1
    return next(iter(figures.values()))


def _panels(fig: Figure) -> list:
    """The figure's data panels (not the legend), in grid order."""
    return [ax for ax in fig.axes if ax.get_title()]


def _curves(ax) -> list:
    return [line for line in ax.get_lines() if len(line.get_xdata()) > 0]


def test_two_models_get_separate_panels_and_curves() -> None:
    constant = {"a": 0.1, "b": 0.9}
    table = results(*[panel_rows(model=m, estimate=lambda *_, m=m: 0.05 * (1 + constant[m]))
                      for m in constant])
    fig = _only(FIGURES["rae_vs_k_median"](table))
    axes = _panels(fig)
    assert len(axes) == 2 * 2  # 2 levels S × 2 models
    for ax in axes:
        model = ax.get_title().splitlines()[0].split(" · ")[1]
        curves = _curves(ax)
        assert len(curves) == 3  # one per method, never one per method per model mixed
        for line in curves:
            assert np.allclose(line.get_ydata(), constant[model])
        assert ax.get_xlabel() == "horizon K" and "RAE" in ax.get_ylabel()


def test_query_kinds_and_budget_rules_are_separate_panels() -> None:
    table = results(panel_rows(), panel_rows(query="event_at"),
                    panel_rows(budget_rule=BUDGET_FROM_SAMPLES, methods=("importance",)))
    fig = _only(FIGURES["rae_vs_k_mean"](table))
    titles = [ax.get_title() for ax in _panels(fig)]
    assert len(titles) == 3 * 2
    assert sum("event_at" in t for t in titles) == 2
    assert sum("budget: samples" in t for t in titles) == 2


def test_rae_vs_entropy_fits_each_budget_level_separately() -> None:
    # RAE rises with entropy at S=10 and falls at S=100: a pooled fit would be flat
    def estimate(method: str, level: int, k: int, h: int) -> float:
        rae = 0.1 + 0.05 * h if level == 10 else 0.6 - 0.05 * h
        return 0.05 * (1 + rae)

    table = results(panel_rows(estimate=estimate, entropy=lambda k, h: float(h), ks=(3, 4)))
    fig = _only(FIGURES["rae_vs_entropy"](table))
    axes = _panels(fig)
    assert [ax.get_title().splitlines()[-1] for ax in axes] == ["S=10", "S=100"]
    for ax, sign in zip(axes, (1, -1), strict=True):
        fits = _curves(ax)
        assert len(fits) == 3  # one least-squares line per method in this panel and level
        for line in fits:
            x, y = line.get_xdata(), line.get_ydata()
            assert np.sign(y[-1] - y[0]) == sign
            assert np.polyfit(x, y, 1)[0] == pytest.approx(sign * 0.05)
        assert ax.get_xlabel().startswith("restricted entropy") and ax.get_ylabel() == "RAE"


def test_scatter_labels_axes_and_shows_zero_estimates() -> None:
    table = results(panel_rows(estimate=lambda m, s, k, h: 0.0 if m == "beam" and h < 3
                               else 0.05, levels=(10,)))
    fig = _only(FIGURES["scatter"](table))
    scatter_axes = [ax for ax in _panels(fig)]
    assert all(ax.get_xlabel() == "ground truth p" for ax in scatter_axes)
    beam = [ax for ax in scatter_axes if ax.get_title().startswith("beam")]
    assert beam and all(ax.get_ylabel() == "estimate p̂" for ax in beam[:1])
    notes = [t.get_text() for ax in beam for t in ax.texts]
    assert notes == ["p̂ = 0: 3 of 8"] * 3  # every K column says how many zeros it shows
    for ax in beam:  # the zeros are drawn, at the floor below every positive value
        floor = [c for c in ax.collections if c.get_offsets().shape[0] == 3]
        assert floor and np.all(floor[0].get_offsets()[:, 1] < 0.05)
    others = [ax for ax in scatter_axes if ax.get_title().startswith(("hybrid", "importance"))]
    assert not any(ax.texts for ax in others)


def test_scatter_writes_one_figure_per_panel_and_level() -> None:
    table = results(panel_rows(model="a"), panel_rows(model="b"))
    assert sorted(FIGURES["scatter"](table)) == [
        "scatter_toy_a_S10", "scatter_toy_a_S100", "scatter_toy_b_S10", "scatter_toy_b_S100"]


def test_beam_sizes_shows_every_k_with_integer_steps() -> None:
    rows = [panel_rows(methods=("coverage_beam",), query="event_at", levels=(0,), ks=(k,),
                       options=json.dumps({"alpha": alpha}), truth_kind="none",
                       extras=beam_extras(k, growth))
            for k in (3, 4, 5) for alpha, growth in ((0.5, 2), (0.9, 3))]
    fig = _only(FIGURES["beam_sizes"](results(*rows)))
    axes = _panels(fig)
    assert [ax.get_title().splitlines()[-1] for ax in axes] == ["K=3", "K=4", "K=5"]
    for ax, k in zip(axes, (3, 4, 5), strict=True):
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
        assert max(len(line.get_xdata()) for line in ax.get_lines()) == k
        assert ax.get_xlabel() == "step k" and "beams" in ax.get_ylabel()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["α = 0.9", "α = 0.5"]


def test_unaccounted_vs_k_has_title_and_explained_bands() -> None:
    def estimate(method: str, level: int, k: int, h: int) -> float:
        return 0.3 + 0.01 * h

    table = results(panel_rows(query="a_before_b", methods=("importance",), levels=(100,),
                               labels=("ab", "ba"), estimate=estimate, truth_kind="none",
                               budget_rule=BUDGET_FROM_SAMPLES, ks=(2, 4, 6)))
    fig = _only(FIGURES["unaccounted_vs_k"](table))
    assert "Unaccounted probability" in fig.get_suptitle()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("99% CI" in text for text in legend)
    (ax,) = _panels(fig)
    (curve,) = _curves(ax)
    assert list(curve.get_xdata()) == [2, 4, 6]
    assert np.allclose(curve.get_ydata(), 1 - 2 * (0.3 + 0.01 * np.arange(8).mean()))


def test_rae_vs_temperature_compares_one_horizon_and_level() -> None:
    table = results(panel_rows(ks=(3, 4, 5), levels=(100,)),
                    *[panel_rows(temperature=t, ks=(4,), levels=(100,)) for t in (0.5, 2.0)])
    fig = _only(FIGURES["rae_vs_temperature"](table))
    (ax,) = _panels(fig)
    assert ax.get_title().splitlines()[-1] == "S=100 · K=4"
    for line in _curves(ax):
        assert list(line.get_xdata()) == [0.5, 1.0, 2.0]


@pytest.mark.parametrize("name", ["rae_vs_k_median", "rae_vs_temperature", "beam_sizes",
                                  "unaccounted_vs_k", "case_study", "rae_vs_level_median"])
def test_figures_say_what_they_need(name: str) -> None:
    with pytest.raises(NotApplicable):
        FIGURES[name](results(panel_rows(ks=(3,), levels=(10,))))


def test_every_method_keeps_one_colour_across_panels() -> None:
    methods = ("hybrid", "smc", "twisted")
    table = results(panel_rows(model="a", methods=methods),
                    panel_rows(model="b", methods=methods[1:]))
    fig = _only(FIGURES["rae_vs_k_median"](table))
    seen: dict[str, set] = {}
    for ax in _panels(fig):
        for line in _curves(ax):
            seen.setdefault(line.get_label(), set()).add(line.get_color())
    assert set(seen) == set(methods) and all(len(c) == 1 for c in seen.values())
    assert len({c for colours in seen.values() for c in colours}) == len(methods)


@pytest.mark.parametrize(("low", "high"), [(1e2, 1e6), (3e3, 9e3), (120.0, 190.0), (2e-3, 0.4)])
def test_log_axes_label_at_least_two_ticks_on_any_range(low: float, high: float) -> None:
    """A frontier panel whose model calls span less than a decade still gets labelled ticks."""
    fig, ax = plt.subplots()
    ax.plot([low, high], [low, high])
    log_axes(ax)
    fig.canvas.draw()
    for axis in (ax.xaxis, ax.yaxis):
        shown = [t.get_text() for t, at in zip(axis.get_ticklabels(), axis.get_ticklocs(),
                                                strict=True) if low <= at <= high]
        assert sum(bool(text) for text in shown) >= 2, shown


@pytest.mark.parametrize("query, named", [
    ("hitting_time", "p(τ(a) = K)"),
    ("count({observed}, {K}) >= 2", "count({observed}, {K}) >= 2"),  # a query.expr template
])
def test_every_panel_names_its_query(query: str, named: str) -> None:
    fig = _only(FIGURES["rae_vs_k_median"](results(panel_rows(query=query))))
    titles = [ax.get_title() for ax in _panels(fig)]
    assert titles and all(named in t.splitlines()[0] for t in titles)
