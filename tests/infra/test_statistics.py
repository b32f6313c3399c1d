"""Intervals from resampling windows and the paired test over heads (attnlimits.infra.statistics)."""

from __future__ import annotations

import critical_heads
import numpy as np
import pandas as pd
import pytest

from attnlimits.infra import statistics

# --- bootstrap_windows ------------------------------------------------------------------------------------------


def _by_window(seed=1, windows=5):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"window": np.repeat(np.arange(windows), 3), "x": rng.normal(size=3 * windows)})


def test_bootstrap_is_seeded_and_brackets_its_value():
    t = _by_window()
    value, lo, hi = statistics.bootstrap_windows(t, lambda s: s.x.mean(), resamples=500, seed=3)
    assert value == pytest.approx(t.x.mean())
    assert lo < value < hi
    assert statistics.bootstrap_windows(t, lambda s: s.x.mean(), resamples=500, seed=3) == (value, lo, hi)
    assert statistics.bootstrap_windows(t, lambda s: s.x.mean(), resamples=500, seed=4) != (value, lo, hi)


def test_bootstrap_counts_a_window_drawn_twice_as_two_windows():
    t = _by_window(windows=3)
    seen = []

    def windows_seen(s):
        seen.append(s.groupby("window").size().to_list())
        return s.window.nunique()

    value, lo, hi = statistics.bootstrap_windows(t, windows_seen, resamples=50, seed=0)
    assert value == lo == hi == 3  # every draw has three distinct windows, even with repeats
    assert seen[-3:] == [[3, 3]] * 3  # BCa's jackknife: the table with one window left out, for each window
    assert all(sizes == [3, 3, 3] for sizes in seen[:-3])
    assert len(seen) > 2 + 3  # the original and more than one distinct draw


def _textbook_bca(value, draws, jack, level=0.95):
    """Efron's BCa interval, written out: bias z0 from the share of draws below the value (ties half),
    acceleration from the jackknife's skew, percentiles of the draws at the moved levels."""
    from scipy.stats import norm

    draws, jack = np.asarray(draws), np.asarray(jack)
    z0 = norm.ppf((np.sum(draws < value) + 0.5 * np.sum(draws == value)) / len(draws))
    d = jack.mean() - jack
    a = np.sum(d**3) / (6 * np.sum(d**2) ** 1.5)
    z = norm.ppf([(1 - level) / 2, (1 + level) / 2])
    return tuple(np.percentile(draws, 100 * norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))))


def test_bootstrap_is_the_bca_interval_of_a_plain_loop_over_draws():
    """Evaluating once per distinct multiset of windows gives the numbers of evaluating every draw, and the
    interval is BCa: the percentiles of the draws moved by their bias and by the jackknife's skew."""
    t = _by_window(windows=6).assign(x=lambda s: np.exp(2 * s.x))  # skewed: BCa moves the ends

    def top(s):
        return float(s.x.quantile(0.8))

    rng = np.random.default_rng(7)
    plain = [top(pd.concat([t[t.window == w] for w in draw])) for draw in rng.integers(0, 6, size=(300, 6))]
    jack = [top(t[t.window != w]) for w in range(6)]
    value, lo, hi = statistics.bootstrap_windows(t, top, resamples=300, seed=7)
    assert value == top(t)
    assert (lo, hi) == pytest.approx(_textbook_bca(value, plain, jack), rel=1e-12)
    assert (lo, hi) != pytest.approx(tuple(np.percentile(plain, [2.5, 97.5])), rel=1e-3)  # not the percentiles


def test_bootstrap_windows_is_bootstrap_units_on_a_pooled_mean():
    """The tidy-table bootstrap and the fast one over per-window sums give one interval: same draws, same BCa."""
    t = _by_window(windows=9).assign(rows=lambda s: 1.0 + s.index % 4, head=0)

    def pooled(s):
        return float((s.rows * s.x).sum() / s.rows.sum())

    sums = statistics.UnitSums(t, ["x"], by="head")
    fast = statistics.bootstrap_units(sums.units, lambda c: float(sums.means(c).x.iloc[0]), resamples=400, seed=2)
    assert statistics.bootstrap_windows(t, pooled, resamples=400, seed=2) == pytest.approx(fast[:3], rel=1e-12)
    assert fast.units == 9 and fast.method == "bca"


def test_bootstrap_with_one_window_collapses_and_checks_its_arguments():
    t = _by_window(windows=1)
    assert statistics.bootstrap_windows(t, lambda s: s.x.sum()) == (t.x.sum(),) * 3
    with pytest.raises(ValueError, match="resamples"):
        statistics.bootstrap_windows(t, len, resamples=0)
    for bad in (0, 1, 1.5):
        with pytest.raises(ValueError, match="level"):
            statistics.bootstrap_windows(t, len, level=bad)
    with pytest.raises(ValueError, match="window"):
        statistics.bootstrap_windows(t.drop(columns="window"), len)


def test_wilcoxon_heads_tests_the_pooled_per_head_difference():
    from scipy.stats import wilcoxon

    heads = critical_heads.table()
    at_n = heads[(heads.L == 64) & (heads.N == heads[heads.L == 64].N.min())]
    at = at_n[at_n.reading == "E"]
    stat, p, n = statistics.wilcoxon_heads(at, b="expected")
    diff = at.groupby(["layer", "head"]).apply(lambda g: (g.d_tilde - g.expected).mean(), include_groups=False)
    want = wilcoxon(diff.to_numpy())
    assert (stat, p, n) == (float(want.statistic), float(want.pvalue), 12)
    assert p < 0.01  # E sits above d~ in every head
    # a slice of the distance table: the reading is a column of its own
    distance = at.rename(columns={"expected": "E"}).drop(columns="reading")
    assert statistics.wilcoxon_heads(distance) == (stat, p, n)
    with pytest.raises(ValueError, match=r"select one \(L, N, reading\)"):
        statistics.wilcoxon_heads(at_n, b="expected")  # both readings at this (L, N)
    with pytest.raises(ValueError, match="one row per"):
        statistics.wilcoxon_heads(heads[(heads.L == 64) & (heads.reading == "E")], b="expected")
    with pytest.raises(ValueError, match=r"a, b: \['E'\]"):
        statistics.wilcoxon_heads(at)  # critical_heads has no column E


def test_wilcoxon_heads_weighs_windows_by_their_rows():
    from scipy.stats import wilcoxon

    heads = critical_heads.table()
    at = heads[(heads.L == 64) & (heads.N == heads[heads.L == 64].N.min()) & (heads.reading == "E")].copy()
    at["expected"] = at.d_tilde + np.random.default_rng(1).normal(0, 1, len(at))  # differences of either sign
    at["rows"] = 0.25 + 4 * at.window  # a sampled reading: each window's rows stand for a fractional count
    stat, p, n = statistics.wilcoxon_heads(at, b="expected")
    diff = at.groupby(["layer", "head"]).apply(
        lambda g: np.average(g.d_tilde - g.expected, weights=g.rows), include_groups=False
    )
    want = wilcoxon(diff.to_numpy())
    assert (stat, p, n) == (float(want.statistic), float(want.pvalue), 12)
    assert (stat, p) != statistics.wilcoxon_heads(at.drop(columns="rows"), b="expected")[:2]  # the weights matter
    at.loc[at.layer == 0, "rows"] = 0  # heads without rows are left out
    assert statistics.wilcoxon_heads(at, b="expected")[2] == 8
