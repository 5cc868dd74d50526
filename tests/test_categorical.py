"""Blocked inverse-CDF draws (seqq/estimators/categorical.py) against a full float64 cumsum:
the same symbol for the same target, the right frequencies, exact systematic counts, masses
equal to logsumexp, and no draw ever on a symbol without mass. Small blocks (`width`) make
tiny vocabularies take the multi-block path."""

from __future__ import annotations

import math

import pytest
import torch

from seqq.estimators.engine import categorical
from seqq.estimators.engine.categorical import Categorical, Excluded, fill_outside, without
from seqq.estimators.engine.rollout import restrict, sparse_log_mass


def _rows(n: int = 7, V: int = 37, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits with a masked-out stripe, a dead row, a row of tiny probabilities and one of
    huge logits (their masses would underflow and overflow float32 without a shift)."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, V, generator=generator) * 2
    logits[2] -= 200.0
    logits[min(3, n - 1)] += 100.0
    domain = torch.rand(n, V, generator=generator) > 0.3
    domain[:, 5:9] = False
    domain[min(4, n - 1)] = False
    return logits, domain


@pytest.mark.parametrize("width", [4, 8, 37, 256])
def test_locate_matches_a_full_cumsum(width: int) -> None:
    logits, domain = _rows()
    cat = Categorical.from_logits(logits, domain, width=width)
    masses = torch.where(domain, (logits.double() - cat.shift.double()[:, None]).exp(), 0.0)
    cdf = masses.cumsum(-1)
    generator = torch.Generator().manual_seed(1)
    rows = torch.randint(len(logits), (2000,), generator=generator)
    rows = rows[rows != 4]
    total = cat.block_cdf[rows, -1]  # locate asks for targets below the row's own total
    targets = torch.minimum(torch.rand(len(rows), generator=generator, dtype=torch.float64)
                            * total, torch.nextafter(total, torch.zeros_like(total)))
    expected = torch.searchsorted(cdf[rows], targets[:, None], right=True)[:, 0]
    gap = torch.minimum((cdf[rows] - targets[:, None]).abs().amin(-1), targets)
    clear = gap > 1e-6 * cdf[rows, -1]  # not within rounding of an interval's edge
    found = cat.locate(rows, targets)
    assert clear.float().mean() > 0.95
    assert torch.equal(found[clear], expected[clear])
    assert domain[rows, found].all()


@pytest.mark.parametrize("width", [4, 256])
def test_log_total_is_the_masked_logsumexp(width: int) -> None:
    logits, domain = _rows()
    cat = Categorical.from_logits(logits, domain, width=width)
    expected = torch.logsumexp(torch.where(domain, logits.double(), -math.inf), -1)
    torch.testing.assert_close(cat.log_total(), expected, rtol=1e-6, atol=1e-6)
    assert cat.log_total()[4] == -math.inf
    unmasked = Categorical.from_logits(logits, None, width=width).log_total()
    torch.testing.assert_close(unmasked, torch.logsumexp(logits.double(), -1), rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize(("width", "shared"), [(4, False), (4, True), (256, True)])
def test_sample_frequencies_match_the_probabilities(width: int, shared: bool) -> None:
    """100 000 draws per row: every frequency within 5 standard errors of its probability,
    and nothing drawn off the domain (the tiny row included). `shared` draws all from a few
    rows through `rows`, as a trie walk does."""
    logits, domain = _rows(n=4, V=23)
    logits, domain = logits[:3], domain[:3]  # the fourth row is the dead one
    draws = 100_000
    generator = torch.Generator().manual_seed(3)
    if shared:
        cat = Categorical.from_logits(logits, domain, width=width)
        symbols = cat.sample(generator, torch.arange(3).repeat_interleave(draws))
    else:  # one row per draw
        cat = Categorical.from_logits(logits.repeat_interleave(draws, 0),
                                      domain.repeat_interleave(draws, 0), width=width)
        symbols = cat.sample(generator)
    symbols = symbols.view(3, draws)
    probs = torch.softmax(torch.where(domain, logits.double(), -math.inf), -1)
    for r in range(3):
        freq = torch.bincount(symbols[r], minlength=23).double() / draws
        se = (probs[r] * (1 - probs[r]) / draws).sqrt()
        assert ((freq - probs[r]).abs() <= 5 * se + 1e-12).all(), r
        assert (freq[~domain[r]] == 0).all()


@pytest.mark.parametrize("width", [4, 256])
@pytest.mark.parametrize("many", [50, 10**7], ids=["few", "counted"])
def test_systematic_counts_are_within_one_and_unbiased(width: int, many: int) -> None:
    """Rows with more draws than symbols (37) are counted from their CDF, the rest draw point
    by point: both give counts within one of d·p, exact totals, unbiased."""
    logits, domain = _rows()
    cat = Categorical.from_logits(logits, domain, width=width)
    probs = torch.softmax(torch.where(domain, logits.double(), -math.inf), -1).nan_to_num(0.0)
    draws = torch.tensor([10, 3, many, 1, 8, 0, 20])
    mean = torch.zeros_like(probs)
    seeds = 2000
    for seed in range(seeds):
        row, symbol, count = cat.systematic(draws, torch.Generator().manual_seed(seed))
        counts = torch.zeros_like(probs)
        counts[row, symbol] = count.double()
        assert domain[row, symbol].all()
        expected = draws[:, None] * probs
        assert ((counts - expected).abs() < 1 + 1e-9).all()
        assert torch.equal(counts.sum(-1).long(), torch.where(domain.any(-1), draws, 0))
        assert torch.equal(row * 37 + symbol, torch.sort(row * 37 + symbol).values)
        mean += counts / seeds
    # systematic counts of item i take the two values ⌊d·p⌋ and ⌈d·p⌉: variance ≤ 1/4
    assert ((mean - draws[:, None] * probs).abs() <= 5 * 0.5 / math.sqrt(seeds)).all()


def test_systematic_through_rows_draws_from_the_named_rows() -> None:
    logits, domain = _rows()
    cat = Categorical.from_logits(logits, domain, width=4)
    rows = torch.tensor([6, 6, 0, 6])
    draws = torch.tensor([5, 7, 2, 10**6])
    row, symbol, count = cat.systematic(draws, torch.Generator(), rows)
    assert torch.equal(torch.bincount(row, count, minlength=4).long(), draws)
    assert domain[rows[row], symbol].all()


@pytest.mark.parametrize("width", [4, 256])
@pytest.mark.parametrize("skewed", [False, True])
@pytest.mark.parametrize("copied_entries", [categorical.COPIED_ENTRIES, 0])
def test_draws_through_shared_rows_equal_draws_from_copied_rows(
        width: int, skewed: bool, copied_entries: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trie walk draws each node's children through `rows` without copying the node's row
    per draw; the draws must be exactly those from copied rows, with the same uniforms.
    `skewed` puts most draws on one of many rows over a small vocabulary; `copied_entries`
    0 makes every search bisect rows in place instead of copying them."""
    monkeypatch.setattr(categorical, "COPIED_ENTRIES", copied_entries)
    generator = torch.Generator().manual_seed(0)
    n, V = (100, 4) if skewed else (6, 50)
    logits = torch.randn(n, V, generator=generator)
    domain = torch.rand(n, V, generator=generator) > 0.3
    domain[4] = False
    if skewed:
        at = torch.cat([torch.zeros(300, dtype=torch.long), torch.arange(n)])
    else:
        at = torch.randint(n, (300,), generator=generator)
    shared = Categorical.from_logits(logits, domain, width=width).sample(
        torch.Generator().manual_seed(7), at)
    copied = Categorical.from_logits(logits[at], domain[at], width=width).sample(
        torch.Generator().manual_seed(7))
    assert torch.equal(shared, copied)
    alive = at != 4
    assert domain[at[alive], shared[alive]].all()


@pytest.mark.parametrize("V", [1, 2, 5, 8, 9, 68, 256])
def test_bisection_counts_the_entries_at_or_below_each_target(V: int) -> None:
    """`_bisect` against searchsorted on copied rows, for widths around powers of two, with
    runs of equal entries (symbols without mass) and targets on, below and past entries."""
    generator = torch.Generator().manual_seed(V)
    weights = torch.rand(40, V, generator=generator, dtype=torch.float64)
    weights[weights < 0.3] = 0.0
    cdf = weights.cumsum(-1)
    rows = torch.randint(40, (3000,), generator=generator)
    targets = torch.rand(3000, generator=generator, dtype=torch.float64) * 1.1 * (cdf[rows, -1] + 0.1)
    on_entry = torch.randint(V, (1000,), generator=generator)
    targets[:1000] = cdf[rows[:1000], on_entry]  # exactly on an entry (right=True counts it)
    targets[1000:1100] = -1.0
    expected = torch.searchsorted(cdf[rows], targets[:, None], right=True)[:, 0]
    assert torch.equal(categorical._bisect(cdf, rows, targets), expected)


def test_no_rows_and_a_short_last_block() -> None:
    empty = Categorical.from_logits(torch.zeros(0, 10), width=4)
    assert empty.log_total().shape == (0,)
    assert empty.sample(torch.Generator()).shape == (0,)
    logits = torch.full((1, 10), -math.inf)
    logits[0, 9] = 0.0  # the only mass sits in the short last block (columns 8, 9)
    drawn = Categorical.from_logits(logits, width=4).sample(torch.Generator(), torch.zeros(50).long())
    assert (drawn == 9).all()


@pytest.mark.parametrize("share", [0.0005, 0.5])  # gathered, and past SPARSE_SHARE reduced densely
def test_sparse_log_mass_equals_the_masked_logsumexp(share):
    generator = torch.Generator().manual_seed(2)
    log_probs = torch.log_softmax(torch.randn(6, 3000, generator=generator), -1)
    mask = torch.rand(6, 3000, generator=generator) < share
    mask[0] = False  # a row with nothing in the mask has mass −inf
    mask[1, 7] = True
    expected = torch.logsumexp(torch.where(mask, log_probs.double(), -math.inf), -1)
    got = sparse_log_mass(log_probs, mask)
    assert got.dtype == torch.float64 and got[0] == -math.inf
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)


def test_restrict_masses_equal_the_masked_logsumexp_even_where_they_underflow() -> None:
    logits, domain = _rows()
    masked, log_mass = restrict(logits, domain)
    assert torch.equal(masked, torch.where(domain, logits, -math.inf))
    expected = torch.logsumexp(torch.where(domain, logits.double(), -math.inf), -1)
    torch.testing.assert_close(log_mass.double(), expected, rtol=1e-6, atol=1e-6)
    assert torch.isfinite(log_mass[[2, 3]]).all() and log_mass[4] == -math.inf


def _as_excluded(domain: torch.Tensor) -> Excluded:
    """The mask's disallowed symbols, listed per row and padded with −1."""
    lists = [(~row).nonzero().flatten().tolist() for row in domain]
    width = max(map(len, lists))
    return Excluded(torch.tensor([symbols + [-1] * (width - len(symbols)) for symbols in lists]))


@pytest.mark.parametrize("width", [4, 256])
def test_an_excluded_list_masks_like_the_mask(width: int) -> None:
    """Rows masked by a list of excluded symbols (a scatter) draw from the same weights as
    rows masked by the [n, V] mask, including the rows redone with a shift."""
    logits, domain = _rows()
    excluded = _as_excluded(domain)
    by_mask = Categorical.from_logits(logits, domain, width=width)
    by_list = Categorical.from_logits(logits, excluded, width=width)
    assert torch.equal(by_list.weights, by_mask.weights)
    assert torch.equal(by_list.shift, by_mask.shift)
    torch.testing.assert_close(by_list.log_total(), by_mask.log_total(), rtol=0, atol=0)
    filled = fill_outside(logits.clone(), excluded, -math.inf)
    assert torch.equal(filled, fill_outside(logits.clone(), domain, -math.inf))
    assert torch.equal(filled, torch.where(domain, logits, -math.inf))
    nothing = Excluded(torch.zeros(len(logits), 0, dtype=torch.long))
    assert torch.equal(fill_outside(logits.clone(), nothing, 0.0), logits)
    assert torch.equal(restrict(logits, excluded)[0], restrict(logits, domain)[0])


def test_restrict_takes_an_excluded_lists_mass_from_what_it_leaves_out() -> None:
    # a model's rows are normalised: the mass left is 1 − p(excluded), summed only where
    # p(excluded) > ½ (the difference would lose digits)
    logits, domain = _rows()
    logits[1, 6] += 30.0  # row 1 excludes almost all of its mass
    log_probs = torch.log_softmax(logits, -1)
    (listed, listed_mass), (masked, mass) = (restrict(log_probs, _as_excluded(domain)),
                                             restrict(log_probs, domain))
    assert torch.equal(listed, masked)
    gone = torch.where(domain, 0.0, log_probs.double().exp()).sum(-1)
    assert (gone < 0.5).sum() >= 4  # most rows take 1 − p(excluded)
    assert listed_mass.dtype == mass.dtype and listed_mass[4] == -math.inf  # nothing left
    torch.testing.assert_close(listed_mass, mass, rtol=0, atol=2e-6)
    assert listed_mass[1] == mass[1] < -25  # summed, not 1 − (1 − tiny)


def test_a_mask_of_few_symbols_weighs_like_a_dense_one(monkeypatch) -> None:
    """A deciding step's mask (a few symbols per row) exps only those entries; the weights,
    shifts and totals are the dense path's, on the rows redone with a shift too."""
    logits, _ = _rows(V=400)
    domain = torch.zeros(logits.shape, dtype=torch.bool)
    domain[:, [3, 77, 399]] = True
    domain[4] = False  # a dead row
    assert categorical.few_allowed(domain)
    few = Categorical.from_logits(logits, domain, width=64)
    monkeypatch.setattr(categorical, "SPARSE_SHARE", 10**9)  # every mask is dense now
    dense = Categorical.from_logits(logits, domain, width=64)
    assert torch.equal(few.weights, dense.weights) and torch.equal(few.shift, dense.shift)
    assert torch.equal(few.log_total(), dense.log_total())
    assert few.log_total()[4] == -math.inf and torch.isfinite(few.log_total()[[2, 3]]).all()


def test_without_clears_the_same_symbols_from_a_list_and_a_mask() -> None:
    _, domain = _rows()
    rows = torch.tensor([0, 2, 0, 6])
    nth = torch.tensor([0, 0, 2, 1])  # the first, first, third and second allowed symbol
    symbols = torch.stack([domain[r].nonzero().flatten()[k] for r, k in zip(rows, nth, strict=True)])
    listed, masked = without(_as_excluded(domain), rows, symbols), without(domain, rows, symbols)
    assert isinstance(listed, Excluded) and not masked[rows, symbols].any()
    assert torch.equal(fill_outside(torch.zeros(domain.shape), listed, 1.0), (~masked).float())
    assert domain[rows, symbols].all()  # the mask given is left as it was
