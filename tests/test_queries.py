import math

import pytest
import torch

from seqq import queries as Q
from seqq.errors import QueryError


def test_hitting_time_matches_figure_2():
    # V = {a, b, c}, K = 3: Q = {b,c} × {b,c} × {a} = {bba, bca, cba, cca}
    q = Q.hitting_time("a", 3, vocab=["a", "b", "c"])
    masks = q.masks(3)
    assert masks.shape == (1, 3, 3)
    assert q.size(3) == 4
    paths = torch.tensor([[1, 1, 0], [1, 2, 0], [2, 1, 0], [2, 2, 0], [0, 1, 0], [1, 1, 1]])
    assert q.contains(paths, 3).tolist() == [True, True, True, True, False, False]


def test_count_has_binomial_many_disjoint_products():
    q = Q.count(2, n=3, K=6)
    assert q.masks(5).shape == (math.comb(6, 3), 6, 5)
    assert q.size(5) == math.comb(6, 3) * 4**3


def test_a_before_b_terms_are_padded_with_the_full_vocabulary():
    q = Q.a_before_b([0], [1], K=3)
    m = q.masks(4)
    assert m.shape == (3, 3, 4)
    assert m[0, 1].all() and m[0, 2].all()  # term 1: {a} × V × V
    assert m[2, 0].tolist() == [False, False, True, True]


def test_sets_of_symbols_and_tokens():
    q = Q.event_at(["x", "y"], 2, vocab={"x": 0, "y": 2, "z": 1})
    assert q.masks(3)[0, 1].tolist() == [True, False, True]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Q.hitting_time(7, 3).masks(5), "outside the model's vocabulary"),
        (lambda: Q.hitting_time(1, 0), "horizon K"),
        (lambda: Q.event_at([], 3), "empty"),
        (lambda: Q.product([[0], []]), "empty"),
        (lambda: (Q.event_at(0, 2) | Q.product([[0, 1], [0]])).masks(3), "overlap"),
        (lambda: Q.a_before_b(1, [1, 2], 3), "share symbols"),
        (lambda: Q.count(0, 4, 3), "count n"),
        (lambda: Q.hitting_time("q", 2), "vocab="),
        (lambda: Q.hitting_time(-1, 2), "negative"),
    ],
)
def test_bad_queries_raise_clear_errors(make, message):
    with pytest.raises(QueryError, match=message):
        make()


def test_disjoint_union_is_accepted():
    # {a} × V ⊔ {b,c} × {b}: the disjoint form of "X_1 = a or X_2 = b"
    q = Q.product([[0], None]) | Q.product([[1, 2], [1]])
    assert q.masks(3).shape == (2, 2, 3)


def test_next_event_is_one_position():
    q = Q.next_event([1, 2])
    assert q.horizon == 1 and q.masks(4)[0, 0].tolist() == [False, True, True, False]
