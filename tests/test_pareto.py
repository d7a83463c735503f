"""Pareto fronts against a brute-force dominance check (hypothesis), 2 and 3 objectives."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flopsheet.pareto import BLOCK, pareto_mask


def brute(v, maximize):
    w = np.asarray(v, dtype=float) * np.where(maximize, -1.0, 1.0)
    keep = []
    for i in range(len(w)):
        if not np.isfinite(w[i]).all():
            keep.append(False)
            continue
        dominated = any(np.isfinite(w[j]).all() and (w[j] <= w[i]).all() and (w[j] < w[i]).any()
                        for j in range(len(w)) if j != i)
        keep.append(not dominated)
    return np.array(keep, dtype=bool)


# small integers make ties and duplicate points common; NaN rows must be left off
values = st.one_of(st.integers(0, 6).map(float), st.just(float("nan")))


@settings(max_examples=150, deadline=None)
@given(k=st.sampled_from([2, 3]), data=st.data())
def test_front_matches_brute_force(k, data):
    n = data.draw(st.integers(0, 40))
    v = np.array(data.draw(st.lists(st.lists(values, min_size=k, max_size=k), min_size=n,
                                    max_size=n)), dtype=float).reshape(n, k)
    maximize = data.draw(st.lists(st.booleans(), min_size=k, max_size=k))
    assert np.array_equal(pareto_mask(v, maximize), brute(v, maximize))


def test_front_across_blocks_matches_brute_force():
    rng = np.random.default_rng(3)
    v = rng.integers(0, 40, size=(3 * BLOCK + 17, 3)).astype(float)
    assert np.array_equal(pareto_mask(v, [False, True, False]), brute(v, [False, True, False]))


def test_hand_checked_front():
    # time (min) vs cost (min): (1,5) (2,3) (3,3) (4,1) (2,3) duplicate, (5,5)
    v = np.array([[1, 5], [2, 3], [3, 3], [4, 1], [2, 3], [5, 5]], dtype=float)
    assert list(pareto_mask(v, [False, False])) == [True, True, False, True, True, False]
    with pytest.raises(ValueError):
        pareto_mask(v, [False])
