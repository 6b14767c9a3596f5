"""The distance kernel (no Spark): the capped cloaking count and the nearest distances
against a brute-force scan, in any order of the queries, and the scaled coordinates of
values of any size."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from privacy_eval.distance import kernel
from privacy_eval.distance.kernel import TIE, cloaking_in_cell


def brute(index: np.ndarray, queries: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = np.sqrt(((queries[:, None, :] - index[None, :, :]) ** 2).sum(-1))
    tau = TIE * np.maximum(1.0, r)[:, None]
    return (d < r[:, None] - tau).any(axis=1), (d <= r[:, None] + tau).sum(axis=1)


# BALL_FACTOR 0 sends every full ball to the k-nearest route, inf every one to the ball
# count: both routes must give the brute-force counts, whatever the estimate says.
DEFAULT_FACTOR = kernel.BALL_FACTOR
ROUTES = [0, DEFAULT_FACTOR, np.inf]


@pytest.mark.parametrize("ball_factor", ROUTES)
@pytest.mark.parametrize("limit", [3, 20, 5000])
def test_counts_are_exact_up_to_the_limit_and_exact_when_nothing_is_closer(limit, ball_factor, monkeypatch):
    monkeypatch.setattr(kernel, "BALL_FACTOR", ball_factor)
    rng = np.random.default_rng(11)
    index = rng.integers(0, 4, size=(600, 3)).astype(float)  # integer grid: many exact ties
    index[:150] = index[0]  # one point duplicated 150 times: a tie group past any small limit
    queries = rng.integers(0, 4, size=(300, 3)).astype(float)
    queries[:20] = index[0]
    own = index[rng.integers(0, len(index), len(queries))]
    r = np.sqrt(((queries - own) ** 2).sum(axis=1))
    closer, either = cloaking_in_cell(index, queries, r, limit)
    want_closer, want_either = brute(index, queries, r)
    assert (closer == want_closer).all()
    assert (np.minimum(either, limit) == np.minimum(want_either, limit)).all()
    assert (either[~closer] == want_either[~closer]).all()  # the hit needs the exact tie count
    assert (want_either > limit).any() or limit == 5000


@pytest.mark.parametrize("ball_factor", ROUTES)
def test_continuous_data_with_balls_of_every_size(ball_factor, monkeypatch):
    monkeypatch.setattr(kernel, "BALL_FACTOR", ball_factor)
    rng = np.random.default_rng(5)
    index = rng.normal(size=(3000, 4))
    queries = rng.normal(size=(400, 4))
    r = rng.uniform(0.05, 2.5, len(queries))  # from empty balls to a third of the index
    limit = 50
    closer, either = cloaking_in_cell(index, queries, r, limit)
    want_closer, want_either = brute(index, queries, r)
    assert (closer == want_closer).all()
    assert (np.minimum(either, limit) == np.minimum(want_either, limit)).all()
    # Balls the first query settles, and balls the default factor sends to each route.
    assert (want_either < 16).any() and (want_either > DEFAULT_FACTOR * limit).any()


def test_answers_do_not_depend_on_the_order_of_the_queries():
    """The kernel searches the queries in space order, not in theirs: every answer must
    still come back in its query's row."""
    rng = np.random.default_rng(7)
    index, queries = rng.normal(size=(2000, 3)), rng.normal(size=(500, 3))
    r = rng.uniform(0.05, 1.5, len(queries))
    shuffled = rng.permutation(len(queries))
    closer, either = cloaking_in_cell(index, queries, r, 100)
    again = cloaking_in_cell(index, queries[shuffled], r[shuffled], 100)
    assert (again[0] == closer[shuffled]).all() and (again[1] == either[shuffled]).all()
    want_closer, want_either = brute(index, queries, r)
    assert (closer == want_closer).all() and (np.minimum(either, 100) == np.minimum(want_either, 100)).all()
    d = kernel.nearest(index, queries, 2)
    assert (kernel.nearest(index, queries[shuffled], 2) == d[shuffled]).all()
    every = np.sort(np.sqrt(((queries[:, None, :] - index[None, :, :]) ** 2).sum(-1)), axis=1)
    np.testing.assert_allclose(d, every[:, :2], rtol=1e-12)


def test_counts_do_not_depend_on_the_order_of_the_records():
    """The counting tree holds the records in its own order: any order given gives the
    same counts, duplicates and ties included."""
    rng = np.random.default_rng(3)
    index = np.repeat(rng.integers(0, 5, size=(700, 3)).astype(float), 3, axis=0)  # every record thrice
    queries = rng.integers(0, 5, size=(400, 3)).astype(float)
    r = np.sqrt(((queries - index[rng.integers(0, len(index), len(queries))]) ** 2).sum(axis=1))
    closer, either = cloaking_in_cell(index, queries, r, 5000)
    again = cloaking_in_cell(index[rng.permutation(len(index))], queries, r, 5000)
    assert (again[0] == closer).all() and (again[1] == either).all()
    want_closer, want_either = brute(index, queries, r)
    assert (closer == want_closer).all() and (either == want_either).all()


def test_empty_sides():
    closer, either = cloaking_in_cell(np.zeros((0, 2)), np.ones((3, 2)), np.ones(3), 10)
    assert not closer.any() and (either == 0).all()


def test_a_rescaled_column_gives_the_coordinates_of_its_ordinary_values():
    """A column read as x·2^-e with its moments in those units (frames.binary_exponent)
    gets the coordinates the column divided by 2^e gets natively, bit for bit; a value
    whose coordinate would exceed MAX_COORDINATE (or overflow) is reported, not used."""
    from privacy_eval.frames import binary_exponent

    rng = np.random.default_rng(5)
    x = rng.normal(3.0, 2.0, 200)
    mean, sd = float(x.mean()), float(x.std())
    plain = kernel.Scaling(("x",), (mean,), (sd,), (), (), ())
    z_plain, imputed, far = kernel.scaled(pd.DataFrame({"x": x}), plain)
    assert (far == -1).all() and (imputed == 0).all()
    for power in (664, 1015, -664, -900):
        big = np.ldexp(x, power)
        e = binary_exponent(float(np.abs(big).max()))
        assert e != 0 and 0.5 <= np.abs(np.ldexp(big, -e)).max() < 1.0
        # the moments of x·2^-e: those of x times 2^(power - e), exactly
        rescaled = kernel.Scaling(("x",), (math.ldexp(mean, power - e),), (math.ldexp(sd, power - e),), (), (), (), (e,))
        z, _, far = kernel.scaled(pd.DataFrame({"x": big}), rescaled)
        assert (z == z_plain).all(), power
        assert (far == -1).all()
    outliers = pd.DataFrame({"x": [mean, mean + sd * 2e150, 1.7e308, -np.inf]})
    _, imputed, far = kernel.scaled(outliers, kernel.Scaling(("x",), (-1.7e308,), (1.0,), (), (), ()))
    assert far.tolist() == [0, 0, 0, -1] and imputed.tolist() == [0, 0, 0, 1]
    _, _, far = kernel.scaled(outliers.iloc[:2], plain)
    assert far.tolist() == [-1, 0]
