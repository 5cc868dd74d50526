"""The slips issue 49 found in docs/reproduction.md cannot come back: a lead that is not beyond
the noise is not "reproduced", an analogue reads "analogue", a summary row's S list is the data
behind it, Tables 4/5's row gives the raw count and says the KL was inferred, and the committed
doc's verdicts and hand-written numbers are those of the committed CSVs."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from reproduction_doc import DOC, FOLDER, doc_block, summary_line
from test_reproduction_experiments import (
    _export,
    budgets,
    coverage,
    horizons,
    mixtures,
    pairs,
    temperatures,
)

from seqq.reports.reproduction import committed
from seqq.reports.reproduction.claims import HOLDS, MIXED, NO, YES
from seqq.reports.reproduction.experiments import fig3, tables4_5
from seqq.reports.reproduction.registry import EXPERIMENTS


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.mark.slow
def test_a_lead_within_the_noise_is_not_reproduced(tmp_path: Path) -> None:
    """IS a hair off the hybrid's estimate, better on some queries and worse on others: the
    sign test finds no lead, so the claim does not hold and the verdict is not "reproduced"
    (before issue 49, "no rival lower beyond the noise" was enough)."""
    table = horizons()
    hybrid = table[table.method == "hybrid"].set_index(["history_id", "K", "budget_level"])
    importance = table.method == "importance"
    keys = pd.MultiIndex.from_frame(table.loc[importance, ["history_id", "K", "budget_level"]])
    near = hybrid.estimate.reindex(keys).to_numpy() * (1 + 1e-3 * (
        table.loc[importance, "history_id"].to_numpy() // 2 % 2 * 2 - 1))
    table.loc[importance, "estimate"] = near
    table.loc[importance, "rae"] = (table.estimate - table.truth).abs()[importance] / \
        table.truth[importance]
    _, text = _export(EXPERIMENTS["fig5"], table, tmp_path)
    assert "**reproduced**" not in summary_line(text, "Figs 5, 6")
    assert "| paired sign test of the per-query RAE per cell" in doc_block(text, "fig5")


# a frame whose trend is not beyond the noise, and the claim of that trend, per experiment:
# flat within the noise, or (the second of an experiment) short of the claim within the noise
NOT_BEYOND = [
    ("fig7-9", lambda: horizons(power=0.0, noise=0.5),
     "the sampling estimates close in on the diagonal as S grows"),
    ("fig10", lambda: budgets(power=0.0, noise=1.0), "10× the level S gives about 3× lower RAE"),
    ("fig10", lambda: budgets(power=0.32, noise=0.2),  # ×2.1 per decade: ×2 within the noise
     "10× the level S gives about 3× lower RAE"),
    ("fig12", lambda: coverage(growths=(1, 1)), "the number of beams grows exponentially in K"),
    ("fig13", lambda: temperatures(rise=0.0, noise=0.5), "as T rises, beam search's RAE goes"),
    ("fig13", lambda: temperatures(rise=0.93, noise=0.1),  # 0.9 within the noise at T = 4:
     "as T rises, beam search's RAE goes"),  # a median at 0.9 or above read "yes" before
    ("fig14", lambda: pairs(scale=0.0, noise=0.05), "it falls as K grows"),
    ("fig14", lambda: pairs(scale=0.1, noise=0.0, jitter=0.04), "it falls as K grows"),
]


def _holds(block: str, claim: str) -> list[str]:
    """The holds column of every claims-table row of `claim` (one per panel)."""
    return [line.rsplit(" | ", 1)[1].rstrip(" |") for line in block.splitlines()
            if line.startswith(f"| {claim}")]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "frame", "claim"), NOT_BEYOND)
def test_a_trend_within_the_noise_does_not_hold(name: str, frame: Callable[[], pd.DataFrame],
                                                claim: str, tmp_path: Path) -> None:
    """A trend that is flat within the noise (errors that do not fall with S, beams that do not
    grow, an RAE that does not rise with T, an unaccounted probability that does not fall with
    K), or short of the claim within it, is not beyond it: its claim does not read "yes", nor
    its verdict "reproduced" (before, a monotone comparison of medians or a fixed threshold
    could say yes by chance); the claim's test names its interval or level."""
    experiment = EXPERIMENTS[name]
    table = frame()
    if experiment.csv:  # its owner writes the CSVs it links
        _export(EXPERIMENTS[experiment.csv], table, tmp_path / "owner")
    _, text = _export(experiment, table, tmp_path)
    block = doc_block(text, experiment.block)
    found = _holds(block, claim)
    assert found and YES not in found, found
    assert "**reproduced**" not in summary_line(text, experiment.title)
    assert "(no interval)" not in block


def test_an_analogue_reads_analogue(tmp_path: Path) -> None:
    _, text = _export(EXPERIMENTS["fig15"], mixtures(), tmp_path)
    assert "| **analogue**, its claims **reproduced** |" in summary_line(text, "Fig. 15")


def test_a_summary_rows_levels_are_those_its_claims_read(tmp_path: Path) -> None:
    """Fig. 4a reads the S = 100 rows of Figs 5/6's CSVs: its row lists S = 100 alone."""
    _, text = _export(EXPERIMENTS["fig4a"], horizons(), tmp_path)
    row = summary_line(text, "Fig. 4a")
    assert "; S = 100 |" in row and "S = 10," not in row
    for title in ("Fig. 4a", "Figs 5, 6"):  # and so does the committed doc
        levels = re.search(r"; S = ([\d, ]+) \|", summary_line(DOC, title)).group(1)
        assert levels == ("100" if title == "Fig. 4a" else "10, 100, 1000")


@pytest.mark.slow
def test_the_committed_fig3_verdict_follows_from_the_paired_tests() -> None:
    """On the committed CSVs: the hybrid's lead over IS beyond the noise at 7 of the 18 (model,
    K) after Holm's correction per model (8 with each K alone), shrinking with K: not
    "reproduced" (issue 49)."""
    runs = committed.panels(EXPERIMENTS["fig3"], FOLDER)
    checks = {run.dataset: {c.claim: c for c in fig3.checks(run)} for run in runs}
    leads = [int(re.search(r"beyond the noise in (\d+) of 9 K", c["the hybrid beats importance "
                                                                    "sampling at every K"].seqq)[1])
             for c in checks.values()]
    assert sum(leads) == 7
    for found in checks.values():
        assert found["the hybrid beats importance sampling at every K"].holds == MIXED
        assert found["…especially for large K: the hybrid's lead grows with K"].holds == NO
        assert found["the hybrid beats beam search at every K"].holds == YES
    assert summary_line(DOC, "Fig. 3").endswith(EXPERIMENTS["fig3"].summary(runs)[3] + " |")


def test_tables_4_5_row_gives_the_raw_count_and_the_inferred_definition() -> None:
    row = summary_line(DOC, "Tables 4, 5")
    tables = pd.concat([pd.read_csv(p) for p in sorted(FOLDER.glob("table[45]_*.csv"))])
    raw = int(((tables.kl / tables.paper_kl - 1).abs() <= tables4_5.CLOSE).sum())
    assert raw == 154 and f"{raw} of 160 without that correction" in row and "inferred" in row


def test_the_hand_written_numbers_are_the_csvs() -> None:
    """What the doc's prose says of the MOOCs CSVs: Figs 5/6's S = 100 rows against Fig. 3's,
    and the histories sharing identical K = 3 truths."""
    fig3 = pd.read_csv(FOLDER / "fig3_moocs_authors.csv")
    fig5 = pd.read_csv(FOLDER / "fig5_moocs_authors_S100.csv")
    both = fig3.merge(fig5, on=["history_id", "K", "method"], suffixes=("", "_5"))
    differ = round(100 * (both.estimate != both.estimate_5).mean())
    truths = int((both[both.method == "hybrid"].truth != both[both.method == "hybrid"].truth_5)
                 .sum())
    assert f"on MOOCs {differ} % of the estimates differ" in DOC
    assert f"{truths} of the\n9,000 queries have other truths" in DOC
    k3 = fig3[(fig3.K == 3) & (fig3.method == "hybrid")].groupby("truth").size()
    shared = k3[k3 > 1]
    assert (f"{shared.sum()} of the 1,000 histories fall into {len(shared)} groups" in DOC)
    # issue 59's slips, now the CSVs' numbers: Tables 4/5's raw MOOCs cells beyond ±25 % at
    # S = 10⁴, and how many more paths naive sampling draws per prefix at Fig. 1's equal calls
    kl = pd.concat([pd.read_csv(p) for p in sorted(FOLDER.glob("table[45]_moocs_*.csv"))])
    kl = kl[kl.samples == 10_000]
    off = 100 * (kl.kl / kl.paper_kl - 1)
    off = off[off.abs() > 25]
    said = " ".join(DOC.split())
    assert len(off) == 6 and "the six others" in said  # 160 cells, 154 within ±25 % raw
    assert f"MOOCs cells at S = 10⁴, {off.min():.1f}–{off.max():.1f} % high" in said
    runs = pd.read_csv(FOLDER / "fig1_wikitext_smollm2.csv")
    paths = runs.groupby(["prefix", "method"]).samples.mean().unstack()
    ratios = sorted(f"{r:.2f}×" for r in paths.naive / paths.importance)
    assert all(r in said for r in ratios), ratios
    early = runs[(runs.method == "importance") & (runs.K <= 5)].groupby(
        ["kind", "prefix", "replicate"]).estimate.sum().groupby(["kind", "prefix"]).mean()
    declarative = " and ".join(f"{p:.2f}" for p in early["declarative"])
    assert f"the declarative prefixes do not end within a few tokens (IS's p(τ ≤ 5) is " \
        f"{declarative};" in said
    assert f"ends soonest ({early['open-ended'].max():.2f} by K = 5" in said
    for slip in ("0.53–0.65", "a tenth of the KL", "40–130 %", "which confirms that",
                 "only mostly"):
        assert slip not in DOC


@pytest.mark.parametrize("block", ["fig7-9", "fig10", "fig12", "fig13", "fig14"])
def test_every_committed_claim_is_judged_with_an_interval_or_a_level(block: str) -> None:
    """No claims table of these experiments in the committed doc judges a claim by a bare
    comparison of medians or a fixed threshold any more: each test names its interval or its
    level."""
    tests = [line.rsplit(" | ", 2)[1] for line in doc_block(DOC, block).splitlines()
             if line.startswith("| ") and line.endswith(tuple(f" | {w} |" for w in HOLDS))]
    assert tests and not [t for t in tests if "no interval" in t]
    assert all(re.search(r"interval|p < 0\.\d+|Holm", t) for t in tests), tests
