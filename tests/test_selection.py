"""`top_k` against torch's own top-k: the same k values, each at an index holding it."""

from __future__ import annotations

import math

import pytest
import torch

from seqq.estimators.engine import selection
from seqq.estimators.engine.selection import top_k


def assert_same_as_torch(values: torch.Tensor, k: int, widths_seen: list[int]) -> list[int]:
    """Check `top_k` against torch; return the row widths torch's top-k ran on inside it."""
    top, index = top_k(values, k)
    inside = list(widths_seen)
    expected = values.topk(k, dim=-1).values
    assert torch.equal(top, expected)
    assert torch.equal(values.gather(1, index), top)  # each index holds its value
    assert all(len(set(row)) == k for row in index.tolist())  # k distinct entries per row
    return inside


@pytest.fixture
def widths_seen(monkeypatch) -> list[int]:
    """The widths of the rows torch's top-k ran on inside `top_k`."""
    seen = []
    original = torch.Tensor.topk

    def spy(self, *args, **kwargs):
        seen.append(self.shape[-1])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "topk", spy)
    return seen


@pytest.mark.parametrize("rows,width,k", [(1, 100_000, 1000), (3, 40_000, 500), (2, 9000, 20)])
def test_long_rows_take_the_threshold_path_and_match_torch(rows, width, k, widths_seen):
    generator = torch.Generator().manual_seed(rows)
    values = torch.randn(rows, width, generator=generator, dtype=torch.float64)
    values[:, ::7] = -math.inf  # dead candidates, as a beam's padded rows hold
    # torch ran on the rows above the threshold, never on a whole row
    assert max(assert_same_as_torch(values, k, widths_seen)) < width // 4


def test_ties_and_integer_scores_match_torch(widths_seen):
    generator = torch.Generator().manual_seed(0)
    values = torch.randint(0, 50, (2, 50_000), generator=generator).double()
    assert max(assert_same_as_torch(values, 800, widths_seen)) < 50_000


def test_a_row_the_sample_misjudges_falls_back_to_the_plain_top_k(widths_seen):
    values = torch.zeros(1, 64_000, dtype=torch.float64)
    values[0, 1::16] = torch.arange(4000, dtype=torch.float64)  # the sample sees only zeros
    values[0, 2::16] = 1e6 + torch.arange(4000, dtype=torch.float64)
    assert 64_000 in assert_same_as_torch(values, 1000, widths_seen)


def test_short_rows_and_large_k_use_torch(widths_seen):
    values = torch.randn(4, 1000, dtype=torch.float64)
    assert assert_same_as_torch(values, 10, widths_seen) == [1000]
    widths_seen.clear()
    wide = torch.randn(1, 20_000, dtype=torch.float64)  # k near the width: nothing to save
    assert assert_same_as_torch(wide, 10_000, widths_seen) == [20_000]
    none = torch.zeros(0, 50_000)
    top, index = top_k(none, 1000)
    assert top.shape == index.shape == (0, 1000)


@pytest.mark.parametrize("k", [20, 1000])
def test_the_threshold_keeps_k_and_about_rank_times_stride(k):
    generator = torch.Generator().manual_seed(5)
    values = torch.randn(64, 100_000, generator=generator)
    rank = selection.threshold_rank(k)
    threshold = values[:, ::selection.STRIDE].topk(rank, dim=-1).values[:, -1:]
    kept = (values >= threshold).sum(-1)
    assert kept.min() >= k and kept.max() <= 2 * rank * selection.STRIDE
