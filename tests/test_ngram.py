"""The count-based n-gram surrogate: hand-computed probabilities, normalisation, order choice."""

import pytest
import torch

from seqq.errors import DataError
from seqq.models import MarkovModel
from seqq.models.ngram import auto_order, fit_ngram

CORPUS = [[0, 1, 2, 1], [1, 2]]  # bigrams (0,1) (1,2) (2,1) | (1,2); nothing across the break


def test_probabilities_match_hand_counts():
    """D = 0.5 at both orders (Ney's n1/(n1+2·n2) on the bigrams: 2/(2+2·1)); the unigram
    level interpolates with the uniform: P0 = (N − D + D·3·⅓)/6 = N/6 = [1, 3, 2]/6."""
    p0 = torch.tensor([1, 3, 2], dtype=torch.float64) / 6
    expected = torch.stack([
        0.5 * p0 + torch.tensor([0.0, 0.5, 0.0]),  # after 0: N(0,1)=1, one type
        (0.5 * p0 + torch.tensor([0.0, 0.0, 1.5])) / 2,  # after 1: N(1,2)=2, one type
        0.5 * p0 + torch.tensor([0.0, 0.5, 0.0]),  # after 2: N(2,1)=1, one type
    ])
    for discount in (None, 0.5):
        model = fit_ngram(CORPUS, 3, order=1, discount=discount)
        assert isinstance(model, MarkovModel) and model.order == 1
        torch.testing.assert_close(model.log_table.exp(), expected, rtol=1e-12, atol=0)
    unigram = fit_ngram(CORPUS, 3, order=0, discount=0.5)
    torch.testing.assert_close(unigram.log_table.exp()[0], p0, rtol=1e-12, atol=0)


def test_unseen_contexts_fall_back_to_the_lower_order():
    bigram = fit_ngram(CORPUS, 3, order=1, discount=0.5).log_table
    trigram = fit_ngram(CORPUS, 3, order=2, discount=0.5).log_table  # context id = 3·older + newer
    torch.testing.assert_close(trigram[0 * 3 + 0], bigram[0])  # (0, 0) never seen: P(·|0)
    torch.testing.assert_close(trigram[2 * 3 + 2], bigram[2])
    seen = trigram[0 * 3 + 1].exp()  # (0, 1) → 2 once: (1 − D + D·P(2|1)) = 0.5 + 0.5·5/6
    assert seen[2].item() == pytest.approx(0.5 + 0.5 * 5 / 6, rel=1e-12)


def test_fitted_tables_are_normalised_and_positive():
    g = torch.Generator().manual_seed(0)
    corpus = [torch.randint(0, 7, (int(n),), generator=g).tolist()
              for n in torch.randint(1, 40, (30,), generator=g)]
    for order in (0, 1, 2, 3):
        probs = fit_ngram(corpus, 7, order=order).log_table.exp()
        assert probs.shape == (7**order, 7)
        assert (probs > 0).all()
        torch.testing.assert_close(probs.sum(-1), torch.ones(7**order, dtype=torch.float64))


def test_order_is_chosen_to_keep_the_table_small():
    assert auto_order(67) == 2  # Shakespeare characters: 67^3 ≤ 2^20 < 67^4
    assert auto_order(100) == 2
    assert auto_order(50257) == 0  # GPT-2: even a bigram table is too big
    assert auto_order(5, max_table=5**4) == 3
    assert fit_ngram(CORPUS, 3, max_table=3**3).order == 2


def test_bad_input_is_refused():
    with pytest.raises(DataError, match="no tokens"):
        fit_ngram([[]], 3)
    with pytest.raises(DataError, match="0..2"):
        fit_ngram([[0, 3]], 3)
    with pytest.raises(DataError, match="discount"):
        fit_ngram(CORPUS, 3, order=1, discount=1.5)
