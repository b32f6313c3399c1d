"""Intervals over independent units (attnlimits.infra.statistics): per-unit sums that pool any multiset of windows
(UnitSums), the cluster bootstrap over windows (bootstrap_units: BCa, percentile, jackknife t) and the Student-t
interval of a per-window value (t_interval); and the interval the verdicts read (attnlimits.infra.medians): the
median over windows of each window's own number with its exact order-statistic interval (order_ranks,
median_interval, over_units). Their coverage is measured in test_interval_coverage.py."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sp

from attnlimits.infra import statistics
from attnlimits.infra.medians import median_interval, order_ranks, over_units
from attnlimits.infra.statistics import Interval, UnitSums, bootstrap_units, t_interval


def _tidy(windows=6, layers=3, per_layer=4, seed=0) -> pd.DataFrame:
    """One row per (window, layer, head): unequal ``rows``, two values, a head that never has rows (its values
    NaN) and a window where another head has none."""
    rng = np.random.default_rng(seed)
    n = windows * layers * per_layer
    t = pd.DataFrame(
        {
            "window": np.repeat([f"w{i}" for i in range(windows)][::-1], layers * per_layer),  # labels out of order
            "layer": np.tile(np.repeat(np.arange(layers), per_layer), windows),
            "head": np.tile(np.arange(per_layer), windows * layers),
            "rows": rng.integers(1, 50, n).astype(float),
            "x": rng.lognormal(0, 1, n),
            "y": rng.normal(2, 1, n),
        }
    )
    never = (t.layer == 0) & (t["head"] == 0)
    once = (t.layer == 1) & (t["head"] == 2) & (t.window == "w3")
    t.loc[never | once, "rows"] = 0.0
    t.loc[never | once, ["x", "y"]] = np.nan
    return t


def _pandas_means(t: pd.DataFrame, values=("x", "y"), weight="rows") -> pd.DataFrame:
    """The rows-weighted mean of each value per (layer, head) over every row, by pandas (NaN without rows)."""
    w = t[weight] if weight else pd.Series(1.0, index=t.index)
    t = t.assign(**{f"w_{v}": (w * t[v]).where(w > 0, 0.0) for v in values}, _w=w)
    sums = t.groupby(["layer", "head"])[["_w", *[f"w_{v}" for v in values]]].sum()
    out = pd.DataFrame({v: sums[f"w_{v}"] / sums["_w"] for v in values})
    return out.where(sums["_w"] > 0)


def _textbook_bca(value, draws, jack, level=0.95):
    """Efron's BCa interval, written out: bias z0 from the share of draws below the value, acceleration from the
    jackknife's skew, percentiles of the draws at the moved levels."""
    z0 = sp.norm.ppf((np.sum(draws < value) + 0.5 * np.sum(draws == value)) / len(draws))
    d = jack.mean() - jack
    a = np.sum(d**3) / (6 * np.sum(d**2) ** 1.5)
    ends = []
    for z in sp.norm.ppf([(1 - level) / 2, (1 + level) / 2]):
        ends.append(np.percentile(draws, 100 * sp.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))))
    return tuple(ends)


def _close(got: Interval, want: Interval, rel=1e-12) -> bool:
    """The same interval up to rounding: numbers close, units and method equal."""
    return tuple(got[:3]) == pytest.approx(tuple(want[:3]), rel=rel) and got[3:] == want[3:]


def _book_draws(n, resamples, seed):
    """The book's draws as multiplicities: the positions critical_draws and bootstrap_windows draw."""
    positions = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    return np.array([np.bincount(row, minlength=n) for row in positions], float)


# --- UnitSums ---------------------------------------------------------------------------------------------------


def test_unit_sums_pool_each_head_as_pandas_weighted_means_do():
    t = _tidy()
    sums = UnitSums(t, ["x", "y"])
    assert sums.units == [f"w{i}" for i in range(6)]
    assert list(sums.groups) == sorted(set(zip(t.layer, t["head"], strict=True)))
    assert sums.weighted.shape == (6, 12, 2) and sums.weights.shape == (6, 12)
    want = _pandas_means(t)
    got = sums.means()
    pd.testing.assert_frame_equal(got, want, check_names=False, rtol=1e-12)
    assert got.loc[(0, 0)].isna().all() and got.notna().sum().sum() == 2 * 11  # the head without rows: NaN
    np.testing.assert_allclose(sums.pooled(), want.to_numpy(), rtol=1e-12)
    # unweighted, and grouped by one column
    pd.testing.assert_frame_equal(
        UnitSums(t.fillna(0.0), ["x"], weight=None).means(), t.fillna(0.0).groupby(["layer", "head"])[["x"]].mean()
    )
    by_layer = UnitSums(t, ["y"], by="layer").means()
    assert list(by_layer.index) == [0, 1, 2]
    at = t[t.layer == 1]
    assert by_layer.loc[1, "y"] == pytest.approx(np.nansum(at.rows * at.y) / at.rows.sum(), rel=1e-12)


def test_counts_weigh_a_unit_drawn_twice_as_the_table_with_it_duplicated():
    t = _tidy()
    sums = UnitSums(t, ["x", "y"])
    counts = np.array([2, 0, 1, 1, 3, 1])  # w0 twice, w1 left out, w4 three times
    copies = [
        t[t.window == "w0"].assign(window="w0 again"),
        *[t[t.window == "w4"].assign(window=f"w4 {i}") for i in (1, 2)],
    ]
    drawn = pd.concat([t[t.window != "w1"], *copies], ignore_index=True)
    want = UnitSums(drawn, ["x", "y"]).means()
    pd.testing.assert_frame_equal(sums.means(counts), want, rtol=1e-12)
    pd.testing.assert_frame_equal(sums.means(counts), _pandas_means(drawn), check_names=False, rtol=1e-12)
    assert not sums.means(counts).equals(sums.means())
    # many multisets at once: one per row
    rows = np.stack([counts, np.ones(6), np.eye(6)[2]])
    batch = sums.pooled(rows)
    assert batch.shape == (3, 12, 2)
    for row, got in zip(rows, batch, strict=True):
        np.testing.assert_allclose(got, sums.means(row).to_numpy(), rtol=1e-12)
    assert np.isnan(sums.pooled(np.eye(6)[3])[6]).all()  # (1, 2) has no rows in w3 alone


# --- bootstrap_units and t_interval -----------------------------------------------------------------------------


def test_one_unit_gives_no_interval():
    assert bootstrap_units(1, lambda c: 2.5 * c[0]) == Interval(2.5, 2.5, 2.5, 1, "none")
    for method in statistics.METHODS:
        assert bootstrap_units(["only"], lambda c: float(c.sum()), method=method) == (1.0, 1.0, 1.0, 1, "none")
    assert t_interval([4.0]) == Interval(4.0, 4.0, 4.0, 1, "none")
    one = _tidy(windows=1)
    sums = UnitSums(one, ["x"])
    assert bootstrap_units(sums.units, lambda c: float(np.nanmean(sums.means(c).x))).method == "none"


def test_the_same_seed_repeats_exactly_and_another_seed_does_not():
    x = np.random.default_rng(1).lognormal(size=12)

    def mean(c):
        return float(c @ x / c.sum())

    for method in statistics.METHODS:
        first = bootstrap_units(12, mean, method=method, seed=3)
        assert first == bootstrap_units(list("abcdefghijkl"), mean, method=method, seed=3)
        assert first.units == 12 and first.method == method and first.value == pytest.approx(x.mean())
        assert first.lo < first.value < first.hi
        if method != "t":  # the jackknife t draws nothing
            assert bootstrap_units(12, mean, method=method, seed=4) != first


def test_the_draws_are_the_book_draws_and_batch_gives_the_same_interval():
    x = np.random.default_rng(2).normal(size=7)
    seen = []

    def batch(c):
        seen.append(c.copy())
        return c @ x / c.sum(axis=1)

    got = bootstrap_units(7, batch, resamples=300, seed=5, batch=True)
    np.testing.assert_array_equal(seen[0], np.ones((1, 7)))
    np.testing.assert_array_equal(seen[1], 1 - np.eye(7))  # the jackknife: one unit left out at a time
    np.testing.assert_array_equal(seen[2], _book_draws(7, 300, 5))
    one_by_one = bootstrap_units(7, lambda c: float(c @ x / c.sum()), resamples=300, seed=5)
    assert _close(one_by_one, got)


def test_bca_is_the_textbook_interval_and_agrees_with_scipy():
    x = np.random.default_rng(3).lognormal(0, 1, size=10)  # skewed: BCa moves away from the percentile interval

    def mean(c):
        return c @ x / c.sum(axis=-1)

    draws = mean(_book_draws(10, 2000, 1))
    jack = np.array([np.delete(x, i).mean() for i in range(10)])
    bca = bootstrap_units(10, mean, resamples=2000, seed=1, batch=True)
    assert (bca.lo, bca.hi) == pytest.approx(_textbook_bca(x.mean(), draws, jack), rel=1e-12)
    percentile = bootstrap_units(10, mean, resamples=2000, seed=1, batch=True, method="percentile")
    assert (percentile.lo, percentile.hi) == pytest.approx(tuple(np.percentile(draws, [2.5, 97.5])), rel=1e-12)
    assert bca.lo > percentile.lo and bca.hi > percentile.hi  # right skew: both ends move up
    # an independent implementation, with its own draws: the ends agree to a few percent of the width
    want = sp.bootstrap((x,), np.mean, method="BCa", n_resamples=20000, rng=np.random.default_rng(0))
    got = bootstrap_units(10, mean, resamples=20000, batch=True)
    width = got.hi - got.lo
    assert abs(got.lo - want.confidence_interval.low) < 0.04 * width
    assert abs(got.hi - want.confidence_interval.high) < 0.04 * width


def test_t_interval_is_students_and_the_jackknife_t_of_a_mean_is_it():
    x = np.random.default_rng(4).normal(3, 2, size=8)
    got = t_interval(x, level=0.9)
    lo, hi = sp.t.interval(0.9, 7, loc=x.mean(), scale=sp.sem(x))
    assert _close(got, Interval(x.mean(), lo, hi, 8, "t"))
    jack = bootstrap_units(8, lambda c: float(c @ x / c.sum()), method="t", level=0.9)
    assert _close(jack, got)


def test_nan_draws_are_dropped_with_a_warning_and_too_many_give_no_interval():
    def few(c):  # NaN in a few draws: where unit 0 is drawn 4 times or more
        return np.nan if c[0] >= 4 else float(c[1] - c[2])

    counts = _book_draws(8, 1000, 0)
    values = np.where(counts[:, 0] >= 4, np.nan, counts[:, 1] - counts[:, 2])
    assert 0 < np.isnan(values).mean() <= statistics.NAN_TOLERANCE
    with pytest.warns(RuntimeWarning, match=r"\d+ of 1000 bootstrap draws .* dropped"):
        got = bootstrap_units(8, few, method="percentile")
    assert (got.lo, got.hi) == tuple(np.percentile(values[~np.isnan(values)], [2.5, 97.5]))
    with pytest.warns(RuntimeWarning, match="dropped"):
        assert np.isfinite(bootstrap_units(8, few)[:3]).all()

    def many(c):  # NaN wherever unit 0 is not drawn: a third of the draws
        return np.nan if c[0] == 0 else float(c[1])

    for method in ("bca", "percentile"):
        with pytest.warns(RuntimeWarning, match="the interval is NaN"):
            got = bootstrap_units(8, many, method=method)
        assert got.value == 1.0 and np.isnan(got.lo) and np.isnan(got.hi) and got.units == 8
    with pytest.warns(RuntimeWarning, match="leave-one-window-out values .* the interval is NaN"):
        assert np.isnan(bootstrap_units(8, many, method="t").lo)
    with pytest.warns(RuntimeWarning, match="1 of 4 values are NaN"):
        assert t_interval([1.0, np.nan, 2.0, 3.0]) == t_interval([1.0, 2.0, 3.0])


# --- attnlimits.infra.medians: order_ranks, median_interval, over_units -------------------------------------------


def _widest_k(n: int, level: float) -> int | None:
    """By scipy's binomial: the largest k whose k-th smallest to k-th largest of n values covers the median with
    probability 1 - 2 P(Binomial(n, 1/2) <= k - 1) >= level; None when not even k = 1 does."""
    covering = [k for k in range(1, n // 2 + 1) if 1 - 2 * sp.binom.cdf(k - 1, n, 0.5) >= level]
    return max(covering) if covering else None


@pytest.mark.parametrize("n, k", [(5, None), (6, 1), (8, 1), (12, 3), (32, 10)])
def test_order_ranks_give_the_widest_ranks_whose_exact_binomial_coverage_is_at_least_95(n, k):
    got = order_ranks(n)
    assert _widest_k(n, 0.95) == k
    if k is None:
        assert got is None
        assert 1 - 2 * sp.binom.cdf(0, n, 0.5) < 0.95  # the smallest and largest of 5 cover 93.75 %
        return
    exact = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n  # by counting, not by scipy
    coverage = 1 - 2 * sp.binom.cdf(k - 1, n, 0.5)
    assert exact == pytest.approx(coverage, rel=1e-14)
    assert got == (k, pytest.approx(coverage, rel=1e-14)) and isinstance(got[0], int)
    assert coverage >= 0.95 > 1 - 2 * sp.binom.cdf(k, n, 0.5)  # one rank further in covers less
    assert {6: 31 / 32, 8: 127 / 128, 12: 1 - 2 * 79 / 4096}.get(n, coverage) == pytest.approx(coverage, rel=1e-14)


def test_order_ranks_match_the_binomial_at_every_size_and_level():
    for level in (0.8, 0.9, 0.95, 0.99):
        for n in range(1, 80):
            want = _widest_k(n, level)
            got = order_ranks(n, level)
            assert (got is None) == (want is None), (n, level)
            if want is not None:
                assert got == (want, pytest.approx(1 - 2 * sp.binom.cdf(want - 1, n, 0.5), rel=1e-12)), (n, level)
    for bad in (0, 1, 1.5, -0.1, 95):
        with pytest.raises(ValueError, match="level"):
            order_ranks(12, bad)
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match=r"^n: must be an integer >= 1"):
            order_ranks(bad)


def test_median_interval_is_the_median_between_two_of_the_values():
    x = np.random.default_rng(7).lognormal(0, 1, size=12)
    got = median_interval(x)
    s = np.sort(x)
    assert got == Interval(np.median(x), s[2], s[9], 12, "median")  # k = 3: the 3rd smallest, the 3rd largest
    assert got.lo in x and got.hi in x and got.lo < got.value < got.hi
    assert median_interval(list(x[::-1])) == got  # the order of the units does not matter
    x32 = np.random.default_rng(8).standard_cauchy(32)  # heavy tails: the ends stay values of the sample
    s32 = np.sort(x32)
    assert median_interval(x32) == Interval(np.median(x32), s32[9], s32[22], 32, "median")
    for n in (6, 7, 8):  # the smallest and largest value
        assert median_interval(x[:n])[1:] == (x[:n].min(), x[:n].max(), n, "median")
    five = median_interval(x[:5])  # fewer than 6: no pair of values covers 95 %
    assert five.value == np.median(x[:5]) and np.isnan(five.lo) and np.isnan(five.hi)
    assert five[3:] == (5, "median")
    assert median_interval([2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 5.0]) == Interval(2.0, 2.0, 5.0, 7, "median")  # ties
    s11 = np.sort(x[:11])
    assert median_interval(x[:11])[1:3] == (s11[1], s11[9])  # k = 2 at 95 %
    assert median_interval(x[:11], level=0.9)[1:3] == (s11[2], s11[8])  # k = 3 at 90 %


def test_median_interval_leaves_nan_out_with_a_warning_and_one_value_is_no_interval():
    x = np.random.default_rng(9).normal(size=9)
    with pytest.warns(RuntimeWarning, match="2 of 11 values are NaN: left out"):
        got = median_interval(np.r_[np.nan, x, np.nan])
    assert got == median_interval(x) and got.units == 9
    assert median_interval([4.0]) == Interval(4.0, 4.0, 4.0, 1, "none")
    with pytest.warns(RuntimeWarning, match="1 of 2 values are NaN"):
        assert median_interval([np.nan, 4.0]) == Interval(4.0, 4.0, 4.0, 1, "none")
    for bad in ([1.0, np.inf, 2.0], [-np.inf] * 6):
        with pytest.raises(ValueError, match="infinite"):
            median_interval(bad)
    for bad in ([np.nan], [np.nan] * 7, []):
        with pytest.raises(ValueError, match="values"):
            median_interval(bad)


def test_over_units_is_the_median_interval_of_the_statistic_on_each_unit_alone():
    t = _tidy(windows=12)
    sums = UnitSums(t, ["x"])
    seen = []

    def statistic(c):  # the mean over heads of each head's pooled x, per multiset of windows
        seen.append(np.array(c, float))
        return np.nanmean(sums.pooled(c)[..., 0], axis=-1)

    got = over_units(sums.units, statistic)
    np.testing.assert_array_equal(seen[0], np.eye(12))  # every window alone, once; nothing drawn
    assert len(seen) == 1
    alone = [float(_pandas_means(t[t.window == w], ["x"]).x.mean()) for w in sums.units]  # by pandas, window by window
    assert _close(got, median_interval(alone))
    s = np.sort(alone)
    assert _close(got, Interval(np.median(alone), s[2], s[9], 12, "median"))
    assert got.value != pytest.approx(statistic(np.ones((1, 12)))[0])  # not the statistic of the pooled windows
    assert _close(over_units(12, statistic), got)  # a count of units or their labels
    per_unit = np.r_[np.nan, np.arange(11.0)]  # a unit without the statistic: left out, with a warning

    def own(c):  # the value of the one unit in each row
        return per_unit[np.argmax(c, axis=-1)]

    with pytest.warns(RuntimeWarning, match="1 of 12 values are NaN"):
        left = over_units(12, own)
    assert left == median_interval(np.arange(11.0)) == Interval(5.0, 1.0, 9.0, 11, "median")
    per_unit = np.r_[np.inf, -np.inf, np.arange(10.0)]  # a unit whose own number is undefined (the log of 0): left out
    with pytest.warns(RuntimeWarning, match="2 of 12 values are NaN"):
        assert over_units(12, own) == median_interval(np.arange(10.0))
    for bad in (0, []):
        with pytest.raises(ValueError, match=r"^units: needs at least one unit"):
            over_units(bad, own)
    with pytest.raises(ValueError, match=r"^statistic: must return one value per row"):
        over_units(5, lambda c: np.zeros(3))
    nothing = over_units(8, lambda c: np.full(len(c), np.nan))  # no window has the number: NaN, no error
    assert np.isnan([nothing.value, nothing.lo, nothing.hi]).all() and nothing.units == 0


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(st.integers(-3, 3).map(float), st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False)),
        min_size=1,
        max_size=70,
    )
)
def test_the_median_interval_contains_the_median_at_ranks_that_cover_95(values):
    x = np.array(values)
    n = len(x)
    got = median_interval(x)
    assert got.value == np.median(x) and got.units == n
    ranks = order_ranks(n)
    if n == 1:
        assert got == Interval(x[0], x[0], x[0], 1, "none")
        return
    assert got.method == "median"
    if ranks is None:
        assert n < 6 and np.isnan(got.lo) and np.isnan(got.hi)
        return
    k, coverage = ranks
    assert 1 - 2 * sp.binom.cdf(k - 1, n, 0.5) >= 0.95 > 1 - 2 * sp.binom.cdf(k, n, 0.5)
    assert coverage == pytest.approx(1 - 2 * sp.binom.cdf(k - 1, n, 0.5), rel=1e-12)
    s = np.sort(x)
    assert (got.lo, got.hi) == (s[k - 1], s[n - k])
    assert got.lo <= got.value <= got.hi and got.lo in x and got.hi in x


def test_bad_arguments_raise_naming_the_argument():
    def mean(c):
        return float(c.sum())

    for bad in ("BCa", "none", "student", ""):
        with pytest.raises(ValueError, match="method"):
            bootstrap_units(5, mean, method=bad)
    for bad in (0, 1, 1.5, -0.1, 95):
        with pytest.raises(ValueError, match="level"):
            bootstrap_units(5, mean, level=bad)
        with pytest.raises(ValueError, match="level"):
            t_interval([1.0, 2.0], level=bad)
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match="resamples"):
            bootstrap_units(5, mean, resamples=bad)
    for bad in (0, []):
        with pytest.raises(ValueError, match="units"):
            bootstrap_units(bad, mean)
    with pytest.raises(ValueError, match="statistic"):
        bootstrap_units(5, lambda c: np.zeros(3), batch=True)
    with pytest.raises(ValueError, match="values"):
        t_interval([np.nan])
    t = _tidy()
    sums = UnitSums(t, ["x"])
    for bad in (np.ones(5), np.ones(7), np.ones((2, 5)), [[1.0]]):
        with pytest.raises(ValueError, match="counts"):
            sums.means(bad)
        with pytest.raises(ValueError, match="counts"):
            sums.pooled(bad)
    with pytest.raises(ValueError, match="counts"):
        sums.means(-np.ones(6))
    with pytest.raises(ValueError, match="counts"):
        sums.means(np.ones((2, 6)))  # one multiset here; pooled takes many
    with pytest.raises(ValueError, match=r"table: missing columns \['z'\]"):
        UnitSums(t, ["z"])
    with pytest.raises(ValueError, match="table: missing columns"):
        UnitSums(t, ["x"], unit="text")
    with pytest.raises(ValueError, match="weight"):
        UnitSums(t.assign(rows=-t.rows), ["x"])
    with pytest.raises(ValueError, match="values"):
        UnitSums(t, [])
    with pytest.raises(ValueError, match="by"):
        UnitSums(t, ["x"], by=[])


def test_bootstrap_units_is_fast_at_the_size_of_the_book():
    """32 windows, 270 heads, 1000 draws, a statistic that reads the pooled means table at every draw."""
    rng = np.random.default_rng(0)
    n, heads = 32, 270
    t = pd.DataFrame(
        {
            "window": np.repeat(np.arange(n), heads),
            "layer": np.tile(np.arange(heads) // 9, n),
            "head": np.tile(np.arange(heads) % 9, n),
            "rows": rng.integers(1, 100, n * heads).astype(float),
            "x": rng.lognormal(size=n * heads),
        }
    )
    sums = UnitSums(t, ["x"])
    bootstrap_units(sums.units, lambda c: float(sums.means(c)["x"].mean()), resamples=5)  # imports scipy
    start = time.process_time()  # this process's time: the machine may be busy with other work
    got = bootstrap_units(sums.units, lambda c: float(sums.means(c)["x"].mean()))
    assert time.process_time() - start < 1.0
    start = time.process_time()
    batch = bootstrap_units(sums.units, lambda c: sums.pooled(c)[..., 0].mean(axis=-1), batch=True)
    assert time.process_time() - start < 0.5
    assert _close(batch, got, rel=1e-9)
    assert got.units == 32 and got.lo < got.value < got.hi
