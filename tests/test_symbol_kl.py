"""Tables 3–6's KL experiment (seqq/sweeps/symbol_kl.py, seqq/reports/kl.py and
seqq/reports/reproduction/experiments/tables4_5.py) against a Markov chain's exact next-symbol
distribution."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import compose_sweep, tiny_overrides

from seqq.commands import query_sweep, report
from seqq.errors import ConfigError
from seqq.models.markov import MarkovModel
from seqq.reports.kl import kl_table
from seqq.reports.reproduction.experiments import tables4_5
from seqq.reports.reproduction.markdown import SUMMARY_BLOCK, begin, end
from seqq.results.schema import KL_KEY
from seqq.results.store import PartStore
from seqq.sweeps import symbol_kl
from seqq.sweeps.histories import History

CHAIN = MarkovModel.random(5, order=1, concentration=1.0, seed=3)
LAST = 2  # the history's last symbol: the chain's state before the first sampled step


def exact_marginal(steps: int) -> torch.Tensor:
    """p(X_{steps+1} = ·) after `steps` sampled steps: row LAST of T^(steps+1)."""
    table = CHAIN.log_table.exp()
    return torch.linalg.matrix_power(table, steps + 1)[LAST]


def second_order_kl(steps: int) -> float:
    """c in E[KL(p̂ ‖ p)] ≈ c / S: Σ_v Var(T[X_L, v]) / (2 p_v), X_L ~ row LAST of T^steps."""
    table = CHAIN.log_table.exp()
    state = torch.linalg.matrix_power(table, steps)[LAST]
    p = state @ table
    variance = state @ table**2 - p**2
    return float((variance / (2 * p)).sum())


def test_paths_average_to_the_exact_next_symbol_distribution() -> None:
    root = CHAIN.initial_state([[0, LAST]])
    generator = torch.Generator().manual_seed(0)
    paths = 20_000
    drawn = symbol_kl.path_distributions(CHAIN, root, paths, (1, 4), generator)
    for steps, probs in drawn:
        assert probs.shape == (paths, 5)
        se = probs.std(0) / paths**0.5
        assert ((probs.mean(0) - exact_marginal(steps)).abs() <= 4 * se + 1e-12).all(), steps
    truth = symbol_kl.mean_distributions(CHAIN, root, 30_000, (4,), generator)[4]
    assert torch.allclose(truth, exact_marginal(4), atol=0.01)


def test_mean_kl_is_c_over_s_plus_c_over_m() -> None:
    """The KL the tables average, E[KL(p̂ ‖ p̃)] ≈ c (1/S + 1/M) with c exact for the chain
    (within 4 standard errors over 100 seeds); at M = S the pseudo ground truth's noise doubles
    it, and the report's correction × M/(M+S) takes that share out again."""
    spec = symbol_kl.SymbolKLSpec(lengths=(3,), samples=(100, 1000), truth_paths=1000)
    seeds = 100
    rows = pd.DataFrame([row for seed in range(seeds) for row in symbol_kl.history_rows(
        CHAIN, History(0, 0, 0, (0, LAST), ()), spec, seed)])
    rows = rows.assign(dataset="chain", model="markov", history_id=np.repeat(range(seeds), 2))
    c = second_order_kl(3)
    table = kl_table(rows)
    assert set(table.histories) == {seeds}
    for cell in table.itertuples():
        expected = c * (1 / cell.samples + 1 / spec.truth_paths)
        assert abs(cell.kl - expected) <= 4 * cell.kl_sem, (cell.samples, cell.kl, expected)
        corrected_sem = cell.kl_sem * cell.kl_m_corrected / cell.kl
        assert abs(cell.kl_m_corrected - c / cell.samples) <= 4 * corrected_sem
    at_m = table[table.samples == spec.truth_paths].iloc[0]
    assert at_m.kl > 1.5 * c / at_m.samples  # the truth's noise shows, and is taken out
    assert (rows.kl_reverse > 0).all()


def test_kl_sweep_runs_resumes_and_reports(tmp_path: Path) -> None:
    overrides = tiny_overrides(tmp_path, "kl", "preset=kl", "sweep.histories=3",
                               "sweep.symbol_kl.lengths=[1,3]",
                               "sweep.symbol_kl.samples=[10,100]",
                               "sweep.symbol_kl.truth_paths=2000")
    sweep_dir = query_sweep.run(compose_sweep(overrides))
    rows = PartStore(sweep_dir / "kl", KL_KEY).read()
    assert len(rows) == 3 * 2 * 2 and (rows.kl > 0).all()
    assert (rows.groups == np.where(rows.samples == 10, 10, 1)).all()
    summary = (sweep_dir / "report" / "summary.md").read_text()
    assert "| S | L = 1 | L = 3 |" in summary
    assert (sweep_dir / "report" / "figures" / "kl_vs_samples.png").exists()
    again = query_sweep.run(compose_sweep(overrides))  # resumes: nothing left to compute
    assert PartStore(again / "kl", KL_KEY).read().equals(rows)
    runs = (sweep_dir / "runs.jsonl").read_text().splitlines()
    assert '"histories_computed": 3' in runs[0] and '"histories_computed": 0' in runs[1]


def _paper_rows(scale: float) -> pd.DataFrame:
    """KL rows on 'moocs' whose corrected means are `scale` × the paper's Table 5."""
    _, cells = tables4_5.PAPER["moocs"]
    m = 50_000
    rows = [{"dataset": "moocs", "model": "authors_lstm", "history_id": h,
             "history_hash": str(h), "length": length, "samples": s,
             "kl": scale * cells[s][i] * (m + s) / m, "kl_sem": 0.0, "kl_reverse": 1.0,
             "groups": 1, "truth_paths": m}
            for h in range(2) for s in cells for i, length in enumerate(tables4_5.LENGTHS)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("scale, word, hit", [(1.1, "reproduced", 80), (2.0, "differs", 0)])
def test_tables_4_5_beside_the_paper(tmp_path: Path, scale: float, word: str, hit: int) -> None:
    PartStore(tmp_path / "kl", KL_KEY).write(_paper_rows(scale), "rows")
    doc = tmp_path / "reproduction.md"
    doc.write_text("\n".join([begin(SUMMARY_BLOCK), end(SUMMARY_BLOCK), begin(tables4_5.NAME),
                              end(tables4_5.NAME)]))
    assert report.main([str(tmp_path / "kl"), "--reproduction", str(tmp_path / "out"),
                     "--doc", str(doc)]) == 0
    csv = pd.read_csv(tmp_path / "out" / "table5_moocs_authors.csv")
    assert list(csv.columns) == list(tables4_5.COLUMNS) and len(csv) == 80
    assert np.allclose(csv.kl_m_corrected, scale * csv.paper_kl, rtol=1e-5)
    text = doc.read_text()
    assert f"**{word}**: {hit} of 80 cells" in text
    assert f"the median cell {abs(scale - 1):.1%} off" in text
    assert "| 10 | " in text and " / 0.193 |" in text  # seqq's cell beside the paper's
    assert (tmp_path / "out" / "tables4-5_authors.png").exists()


def test_kl_rows_reject_query_options(tmp_path: Path) -> None:
    PartStore(tmp_path / "kl", KL_KEY).write(_paper_rows(1.0), "rows")
    with pytest.raises(ConfigError, match="take no --figures"):
        report.main([str(tmp_path / "kl"), "--figures", "rae_vs_k_median"])
    with pytest.raises(ConfigError, match="tables4-5 only"):
        report.main([str(tmp_path / "kl"), "--reproduction", str(tmp_path), "--experiment",
                  "fig3"])
