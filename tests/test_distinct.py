"""`distinct`: torch.unique(values, return_inverse=True) by counting in a table of the ids'
range where that range is narrow, by torch's sort elsewhere; both must give torch's answer."""

from __future__ import annotations

import pytest
import torch

from seqq.estimators.engine import distinct as module
from seqq.estimators.engine.distinct import DENSE_RANGE, distinct


@pytest.mark.parametrize(("count", "bound"), [
    (0, 0), (0, 5), (1, 1), (7, 3), (1000, 40), (1000, 1000), (1000, DENSE_RANGE * 1000),
    (1000, DENSE_RANGE * 1000 + 1), (500, 10**7)])
@pytest.mark.parametrize("dtype", [torch.long, torch.int32])
def test_distinct_is_torch_unique_with_inverse(count, bound, dtype):
    generator = torch.Generator().manual_seed(count + bound)
    values = torch.randint(max(bound, 1), (count,), generator=generator).to(dtype)
    expected_values, expected_inverse = torch.unique(values, return_inverse=True)
    found_values, found_inverse = distinct(values, bound)
    assert torch.equal(found_values, expected_values)  # torch.equal ignores dtypes:
    assert found_values.dtype == expected_values.dtype  # they are checked apart
    assert torch.equal(found_inverse, expected_inverse)
    assert found_inverse.dtype == expected_inverse.dtype


def test_narrow_ranges_are_counted_and_wide_ones_sorted(monkeypatch):
    sorted_calls = []
    unique = torch.unique
    monkeypatch.setattr(module.torch, "unique",
                        lambda *a, **k: sorted_calls.append(1) or unique(*a, **k))
    ids = torch.tensor([5, 2, 5, 0, 2, 2])
    assert distinct(ids, 6)[0].tolist() == [0, 2, 5] and not sorted_calls  # counted
    assert distinct(ids, DENSE_RANGE * len(ids))[0].tolist() == [0, 2, 5] and not sorted_calls
    assert distinct(ids, DENSE_RANGE * len(ids) + 1)[0].tolist() == [0, 2, 5]
    assert len(sorted_calls) == 1  # a range wider than DENSE_RANGE × the ids: sorted
