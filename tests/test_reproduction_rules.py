"""The statistical rules of docs/reproduction.md, each able to fail (issue 59): Holm's correction
changes a claim's count of cells, each share of cells gets its verdict word, a ratio inside,
across and outside the band of "about x", the rules stated once in the doc from the code, the
prose's numbers formatted from the CSVs (a changed CSV changes them), and every quotation marked
as the paper's is in the committed list of the paper's sentences."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from reproduction_doc import DOC, FOLDER, doc_block, summary_line

from seqq.reports.reproduction import claims
from seqq.reports.reproduction.claims import (
    MIXED,
    MOSTLY,
    MOSTLY_NOT,
    NO,
    NOT_SHOWN,
    UNKNOWN,
    YES,
    Check,
    band,
    judge,
    share,
)
from seqq.reports.reproduction.experiments import table2, tables4_5
from seqq.reports.reproduction.markdown import RULES_BLOCK, end
from seqq.reports.reproduction.paper_quotes import quoted
from seqq.reports.reproduction.registry import SUMMARY
from seqq.reports.reproduction.significance import (
    CONTRADICTS,
    LEVEL,
    SUPPORTS,
    UNDECIDED,
    Boot,
    Cell,
    Tally,
    holm,
)
from seqq.reports.reproduction.stats import entropy_fits


def test_holm_changes_a_count_of_significant_cells() -> None:
    """Four cells each below 0.05 alone: Holm keeps the first (0.001 < 0.05/4) and stops at the
    second (0.02 ≥ 0.05/3), so the claim counts 1 cell, not 4; the order of the cells does not
    matter, and a family of one is the test alone."""
    ps = [0.02, 0.001, 0.04, 0.03]
    assert holm(ps) == [False, True, False, False]
    assert holm([0.001, 0.01, 0.015, 0.04]) == [True, True, True, True]
    tally = Tally.of([Cell(SUPPORTS, p) for p in ps])
    assert (tally.supports, tally.uncorrected) == (1, (4, 0))
    assert "beyond the noise in 1 of 4 cells (Holm; each cell alone: 4)" in tally.said()
    mixed = Tally.of([Cell(SUPPORTS, 0.001), Cell(CONTRADICTS, 0.002), Cell(UNDECIDED, 0.9)])
    assert (mixed.supports, mixed.contradicts) == (1, 1)
    assert holm([LEVEL * 0.99]) == [True] and holm([LEVEL]) == [False]


@pytest.mark.parametrize(("supports", "contradicts", "cells", "word"), [
    (30, 0, 30, YES), (16, 0, 30, MOSTLY), (16, 14, 30, MOSTLY), (15, 0, 30, MIXED),
    (4, 3, 30, MIXED), (0, 0, 30, NOT_SHOWN), (0, 15, 30, MIXED), (4, 25, 30, MOSTLY_NOT),
    (3, 26, 30, MOSTLY_NOT), (0, 30, 30, NO), (0, 0, 0, UNKNOWN)])
def test_a_verdict_word_per_share_of_cells(supports: int, contradicts: int, cells: int,
                                          word: str) -> None:
    """"Mostly" is more than half of the cells (`claims.MOST`); Figs 10/11's naive MC,
    contradicted in 25–26 of 30 cells, reads "mostly contradicted", not "partly"."""
    assert share(supports, contradicts, cells) == word


def test_an_experiments_verdict_follows_its_claims_words() -> None:
    def verdict(*words: str) -> str:
        return judge([("d", Check(f"claim {i}", "", "", w)) for i, w in enumerate(words)])

    assert verdict(YES, YES).startswith("**reproduced**")
    assert verdict(YES, MOSTLY).startswith("**mostly reproduced** (mostly supported: claim 1")
    assert verdict(YES, MOSTLY_NOT).startswith("**partly reproduced**")
    assert verdict(NOT_SHOWN, NO, MOSTLY_NOT).startswith("**differs**")
    assert verdict(YES, UNKNOWN) == "**not decided yet** (cannot tell yet: claim 1 (d))"


def _boot(draws: np.ndarray) -> Boot:
    return Boot.of(float(np.median(draws)), draws)


def test_about_x_is_judged_by_its_band() -> None:
    """6× is about 6 when its interval lies inside [6/2, 6·2]: ×4–×9 is, ×9–×17 straddles the top
    edge (not shown either way: Table 2's ×9.7 [6.2, 17.0]), ×1.5–×2.5 lies wholly below."""
    assert band(6.0) == (3.0, 12.0)
    spread = np.linspace(-1, 1, 401)
    inside = _boot(6.5 + 2.5 * spread).cell_within(band(6))
    assert inside.way == SUPPORTS and inside.p < LEVEL
    across = _boot(13 + 4 * spread).cell_within(band(6))
    assert across.way == CONTRADICTS and across.p >= LEVEL
    across = _boot(9.5 + 5 * spread).cell_within(band(6))
    assert across.way == SUPPORTS and across.p >= LEVEL
    below = _boot(2 + 0.5 * spread).cell_within(band(6))
    assert below.way == CONTRADICTS and below.p < LEVEL
    assert claims.one(below) == NO and claims.one(inside) == YES
    assert claims.one(_boot(9.5 + 5 * spread).cell_within(band(6))) == NOT_SHOWN


def test_a_trend_cell_inverts_its_percentile_interval() -> None:
    """A slope whose 95 % interval excludes 0 has p < 0.05, one that straddles it does not, and
    "falls" turns the way round."""
    clear = _boot(np.linspace(0.1, 0.3, 400))
    assert clear.low > 0 and clear.cell() == Cell(SUPPORTS, 0.0)
    assert clear.cell(falls=True).way == CONTRADICTS
    straddle = _boot(np.linspace(-0.1, 0.3, 400))
    assert straddle.low < 0 < straddle.high and straddle.cell().p >= LEVEL


def test_the_summary_states_the_rules_once_from_the_code() -> None:
    """The rules block is `claims.rules()`, written by the export: the level, Holm, the words'
    thresholds and the band; no other paragraph of the doc restates the verdict rule."""
    block = doc_block(DOC, RULES_BLOCK)
    assert claims.rules() in block
    for said in (f"level {LEVEL:g}", "Holm", "more than 50%", "[x / 2, x · 2]", "[3, 12]"):
        assert said in block
    assert DOC.count("Statistical rules") == 1
    assert "holds unless the interval lies below" not in DOC


def test_the_committed_verdicts_use_the_rules() -> None:
    """Figs 10/11's naive MC reads mostly contradicted and its uniform MC's coincidence is tested
    by coincidence; the 6× claims by their band; Fig. 14's "many datasets" once over the
    datasets, not attributed to the paper as "all but Mobile Apps"; Tables 4/5's row states its
    threshold and the noise beside its band."""
    assert "mostly contradicted: naive MC is consistently 0" in summary_line(DOC, "Figs 10, 11")
    assert "uniform MC often coincides with naive MC" in summary_line(DOC, "Figs 10, 11")
    assert "for many datasets (moocs, shakespeare)" in summary_line(DOC, "Fig. 14")
    assert "except on Mobile Apps" not in DOC and "every dataset except Mobile Apps" not in DOC
    row = summary_line(DOC, "Tables 4, 5")
    assert "at least 80% of the cells are within ±25%" in row and "median standard error" in row
    for title in ("Fig. 1", "Table 2"):
        assert "[3, 12]" in doc_block(DOC, title.lower().replace(". ", "").replace(" ", ""))
    for title in SUMMARY:  # no experiment is judged by the old lumped word
        assert "**partly**" not in summary_line(DOC, title)


def test_the_hand_written_verdicts_are_the_summarys() -> None:
    """Each section's "**Verdict: …**" names the word of its summary row."""
    for title, heading in (("Fig. 3", "## Fig. 3"), ("Figs 5, 6", "## Figs 5 and 6"),
                           ("Figs 10, 11", "## Figs 10 and 11"), ("Fig. 14", "## Fig. 14"),
                           ("Fig. 1", "## Fig. 1:"), ("Table 2", "## Table 2")):
        word = re.search(r"\*\*((?:mostly |partly )?reproduced|differs)\*\*",
                         summary_line(DOC, title))[1]
        section = DOC[DOC.index(heading):]
        assert re.search(r"\*\*Verdict: ([^*.,]+)", section)[1] == word, title


def test_prose_numbers_come_from_the_csv(tmp_path: Path) -> None:
    """Tables 4/5's summary row is formatted from the committed CSVs: doubling every cell's
    standard error doubles the noise it states, and the doc's Table 2 entropy note from the CSV's
    H(q) and the paper's own columns."""
    doc = tmp_path / "doc.md"
    doc.write_text(doc_block(DOC, "summary") + end("summary") + "\n")
    folder = tmp_path / "csv"
    folder.mkdir()
    for path in FOLDER.glob("table[45]_*.csv"):
        shutil.copy(path, folder / path.name)
    tables4_5.rejudge(folder, doc, SUMMARY)
    sem = re.search(r"median standard error is ([\d.]+)%", doc.read_text())[1]
    assert f"median standard error is {sem}%" in summary_line(DOC, "Tables 4, 5")
    for path in folder.glob("*.csv"):
        table = pd.read_csv(path)
        table.assign(kl_sem=2 * table.kl_sem).to_csv(path, index=False)
    tables4_5.rejudge(folder, doc, SUMMARY)
    doubled = re.search(r"median standard error is ([\d.]+)%", doc.read_text())[1]
    assert float(doubled) == pytest.approx(2 * float(sem), abs=0.11)  # rounded to 0.1

    rows = pd.concat([pd.read_csv(p) for p in sorted(FOLDER.glob("table2_*.csv"))])
    shares = table2.entropy_shares(rows)
    assert shares.loc[3, "paper_from_entropy"] == pytest.approx(39.69, abs=0.01)
    assert np.allclose(shares.ratio_of_means, shares.mean_of_ratios)
    assert "its column matches neither reading" in table2.entropy_note(shares)
    changed = table2.entropy_shares(rows.assign(entropy=2 * rows.entropy))
    assert np.allclose(changed.ratio_of_means, 2 * shares.ratio_of_means)


def test_fig4a_slope_ratios_in_the_verdict_are_the_csvs() -> None:
    """Fig. 4a's verdict gives importance sampling's fitted slope as a multiple of beam search's
    per model: the ratio of the fits to the committed S = 100 rows (it once said 0.35× / 0.21×,
    the ratio of the table's rounded slopes, where the fits give 0.34× / 0.20×)."""
    said = re.search(r"its fitted slope ([\d.]+)× beam search's on MOOCs, ([\d.]+)× on",
                     DOC.replace("\n", " "))
    for model, ratio in zip(("moocs", "shakespeare"), said.groups(), strict=True):
        fits = entropy_fits(pd.read_csv(FOLDER / f"fig5_{model}_authors_S100.csv"))
        slope = fits.set_index("method").slope
        assert f"{slope['importance'] / slope['beam']:.2f}" == ratio, model


def test_table2_verdict_numbers_are_the_csvs() -> None:
    """Table 2's hand-written verdict is rewritten each time more truths are re-judged: its
    win counts, medians, truths re-judged and noise-floor numbers must be the committed CSV's,
    and its 6x ratio the generated claims row's."""
    start = DOC.index("**Verdict: partly reproduced, at the protocol's N = 100.**")
    verdict = " ".join(DOC[start:DOC.index("**Cost**", start)].split())
    rows = pd.read_csv(FOLDER / "table2_wikitext_smollm2.csv")
    rae = rows.pivot_table(index=["history_id", "K"], columns="method", values="rae")
    wins = {rival: ", ".join(str(int(n)) for n in (rae.importance < rae[rival]).groupby("K").sum())
            for rival in ("beam", "uniform")}
    assert (f"it beat beam search on {wins['beam']} and uniform MC on {wins['uniform']} of the "
            "100 histories") in verdict
    median = rae.groupby("K").median()
    assert "IS " + " / ".join(f"{100 * x:.1f}" for x in median.importance) + " %" in verdict
    assert " → ".join(f"{100 * x:.0f}" for x in median.beam) + " %" in verdict
    truths = rows.drop_duplicates(["history_id", "K"])
    finer = truths.truth_rule.str.contains("prefix trie").sum()
    assert f"{finer} of 300 truths re-judged" in verdict
    se = truths.groupby("K").truth_rel_stderr.median()
    assert "median relative SE is " + " / ".join(f"{100 * x:.1f}" for x in se) in verdict
    assert "noise floor (" + " / ".join(f"{100 * 0.674 * x:.1f}" for x in se) in verdict
    assert f"{(truths.truth_rel_stderr > 0.2).sum()} of 300 above 20 %" in verdict
    ratio = re.search(r"×([\d.]+) \[([\d.]+), ([\d.]+)\]; the band", doc_block(DOC, "table2"))
    assert f"×{ratio[1]} importance sampling's [×{ratio[2]}, ×{ratio[3]}]" in verdict


def test_figs5_6_verdict_says_what_the_generated_claims_found() -> None:
    """Figs 5/6's verdict says no rival's median is lower beyond the noise anywhere, and that
    for means one cell goes the other way: the generated claim rows (from the committed CSVs)
    must say so too (it once said "no rival is lower" of means as well)."""
    start = DOC.index("the hybrid's lead is beyond the noise in only some cells")
    verdict = " ".join(DOC[start:DOC.index("\n\n", start)].split())
    assert "no rival's median is lower beyond the noise anywhere" in verdict
    rows = [line for line in doc_block(DOC, "fig5").splitlines()
            if line.startswith("| the hybrid has the lowest ")]
    medians = [line for line in rows if "median RAE (Fig. 5)" in line]
    means = [line for line in rows if "mean RAE (Fig. 6)" in line]
    assert len(medians) == len(means) == 2  # one per model
    assert not any("the opposite" in line for line in medians)
    assert any("the opposite" in line for line in means)


def _quotes(text: str) -> list[str]:
    """The quotations marked as the paper's: in the claims tables' "the paper" column, and in
    the paragraphs that say what the paper says."""
    found = []
    for line in text.splitlines():
        if line.startswith("| ") and line.count(" | ") >= 4:
            found += re.findall(r'"([^"]+)"', line.split(" | ")[1])
    for paragraph in text.split("\n\n"):
        if paragraph.startswith("**The paper**"):
            found += re.findall(r'"([^"]+)"', paragraph.replace("\n", " "))
    return found


# Numbers an experiment module may write in its prose without computing them: where in the paper
# (Fig. 5, Tables 4, 5, §5, App. G.2) and what holds by definition (the sign of a slope, the RAE
# of an estimate of 0, a decade's 10, 1/√n's −0.5, a step's index, the models' and commands'
# names).
NOT_A_VALUE = re.compile("|".join([r"`[^`]*`",
    r"(Figs?\.?|Tables?|§|App\.) ?[A-Z]?\.?\d+[a-z]?(\.\d+)?((, | and | ?[–→] ?| )\d+[a-z]?\b)*",
    r"\b(above|below|excludes) 0\b", r"\bRAE (of )?1\b", r"\bgoes to [01]\b",
    r"\bestimates? (of )?0\b", r"p̂ = 0", r"1 − p̂", r"\b10(×|·|\^)", r"log10", r"1/√",
    r"−0\.5 is", r"1…K−1", r"consistently 0", r"SmolLM2(-135M)?", r"WikiText(-2)?", r"GPT-2",
    r"smollm2"]))


def _prose(module: Path) -> list[tuple[int, str]]:
    """The string literals of a module that can end up in the doc: not docstrings, not format
    specs, not names (no space: files, blocks, colours)."""
    tree = ast.parse(module.read_text())
    skip = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
            and ast.get_docstring(node) is not None}
    skip |= {id(part) for node in ast.walk(tree)
             if isinstance(node, ast.FormattedValue) and node.format_spec
             for part in ast.walk(node.format_spec)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in skip and " " in node.value.strip()]


def _typed_numbers(text: str) -> str:
    """What is left of `text` with the paper's quotations, places and definitions taken out: a
    digit there is a number typed into prose."""
    text = re.sub(r'"([^"]+)"', lambda m: "" if quoted(m[1]) else m[0], text)
    return NOT_A_VALUE.sub("", text)


def test_an_experiments_prose_types_no_number() -> None:
    """Every number an experiment module writes into the doc is formatted from its data or a
    named constant, or is the paper's, in a quotation of `paper_quotes` (issue 59: "27–31 %",
    "1.9× to 2.6×", "a third of" were typed and wrong)."""
    modules = sorted((REPO / "seqq" / "reports" / "reproduction" / "experiments").glob("*.py"))
    typed = [f"{m.name}:{line}: {text!r}" for m in modules for line, text in _prose(m)
             if re.search(r"\d", _typed_numbers(text))]
    assert typed == []
    assert not re.search(r"\d", _typed_numbers('"a query horizon of k = 30" (App. G.6)'))
    assert re.search(r"\d", _typed_numbers("six cells are 27–31 % high (Table 4)"))
    assert re.search(r"\d", _typed_numbers('"82% vs 13%, a 6x reduction" (§5)'))  # not a quote


def test_every_quote_of_the_paper_is_the_papers_text() -> None:
    quotes = _quotes(DOC)
    assert len(quotes) >= 10
    assert [q for q in quotes if not quoted(q)] == []
    assert not quoted("82% vs 13%, a 6x reduction")  # a paraphrase shown as a quote fails
    assert not quoted("a 10× budget gives roughly a three times reduction")
