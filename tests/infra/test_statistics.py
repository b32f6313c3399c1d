"""Intervals from resampling windows, the memoised KS p-value and the critical N recomputed from per-head means
(attnlimits.infra.statistics)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from attnlimits.infra import statistics


def _heads(layers=3, per_layer=4, windows=4, lengths=(32, 64), n_grid=8, seed=0, shift=3.0, readings=("E", "E_full")):
    """A critical_heads table (one row per window, head, L, N and reading) in which reading i (of ``readings``) is
    d~ shifted by (i + 1) times a constant that shrinks as N grows, so the KS p-value of each reading rises with N;
    window noise moves d~ and the readings together. Every reading has the same d~ and rows here."""
    rng = np.random.default_rng(seed)
    parts = []
    for L in lengths:
        ns = np.unique(np.geomspace(1, L - 1, n_grid).astype(int))
        base = rng.gamma(2.0, 1.0, size=layers * per_layer)
        for w in range(windows):
            noise = rng.normal(0, 0.3, size=base.shape)
            for n in ns:
                d = base + noise
                s = shift * L / (n * 40)
                for i, reading in enumerate(readings):
                    parts.append(
                        pd.DataFrame(
                            {
                                "window": w,
                                "layer": np.repeat(np.arange(layers), per_layer),
                                "head": np.tile(np.arange(per_layer), layers),
                                "L": L,
                                "N": int(n),
                                "reading": reading,
                                "rows": float(L - int(n)),
                                "d_tilde": d,
                                "expected": d + (i + 1) * s,
                            }
                        )
                    )
    return pd.concat(parts, ignore_index=True)


def _search_critical(heads, L, reading, level):
    """The search's critical N from the scan: smallest evaluated N with p >= level whose next smaller N fails (each
    head's d~ and reading pooled over the windows as the rows-weighted mean)."""
    at = heads[(heads.L == L) & (heads.reading == reading) & (heads.rows > 0)]
    at = at.assign(d_tilde=at.rows * at.d_tilde, expected=at.rows * at.expected)
    previous = None
    for n, t in at.groupby("N", sort=True):
        sums = t.groupby(["layer", "head"])[["rows", "d_tilde", "expected"]].sum()
        pooled = sums[["d_tilde", "expected"]].div(sums.rows, axis=0)
        p = statistics.ks_test(pooled.d_tilde, pooled.expected)[1]
        if p >= level and (previous is None or previous < level):
            return int(n)
        previous = p
    return None


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


# --- ks_pvalue --------------------------------------------------------------------------------------------------


def test_ks_pvalue_equals_ks_test_exactly_with_and_without_ties():
    rng = np.random.default_rng(0)
    for trial in range(400):
        n, m = rng.integers(1, 60, size=2)
        if trial % 2:  # heavy ties: few distinct values, shared between the samples
            d, e = rng.integers(0, 5, n).astype(float), rng.integers(0, 5, m).astype(float)
        else:
            d, e = rng.normal(size=n), rng.normal(0.3, 1.2, size=m)
        assert statistics.ks_pvalue(d, e) == statistics.ks_test(d, e)[1], (n, m)
    for n, m in [(5, 7), (6, 6), (10, 4)] * 60:  # fixed sizes: every value of D n m comes back, from the cache
        d, e = rng.normal(size=n), rng.normal(rng.uniform(-2, 2), size=m)
        assert statistics.ks_pvalue(d, e) == statistics.ks_test(d, e)[1], (n, m)
    x = rng.normal(size=270)
    for shift in np.linspace(0, 1, 40):  # the sizes of Algorithm 3 (one value per head)
        assert statistics.ks_pvalue(x, x + shift) == statistics.ks_test(x, x + shift)[1]


def test_ks_pvalues_of_many_rows_equal_ks_test_on_each_rows_kept_heads():
    """The vectorised p-values of Algorithm 3's bootstrap (one row per draw): each row its own kept heads, ties
    between and within the samples, a row with a NaN, rows that keep no head (NaN)."""
    rng = np.random.default_rng(1)
    rows, heads = 60, 40
    d = rng.integers(0, 6, size=(rows, heads)).astype(float)  # few distinct values: heavy ties
    e = rng.integers(0, 6, size=(rows, heads)).astype(float)
    e[::2] += rng.normal(0, 2, size=(rows // 2, heads))  # and rows without ties
    keep = np.ones((rows, heads), bool)
    keep[:20] = rng.random((20, heads)) < 0.7  # other patterns of kept heads
    keep[20:23] = False
    d[30, 5] = np.nan
    p = statistics._ks_pvalue_rows(d, e, keep)
    assert np.isnan(p[20:23]).all()
    for i in [*range(20), *range(23, rows)]:
        np.testing.assert_equal(p[i], statistics.ks_test(d[i, keep[i]], e[i, keep[i]])[1], err_msg=f"row {i}")


def test_ks_pvalue_rejects_an_empty_sample():
    with pytest.raises(ValueError, match="non-empty"):
        statistics.ks_pvalue([], [1.0])


# --- critical N from the per-head table -------------------------------------------------------------------------


def test_critical_from_heads_reproduces_the_search_on_all_windows():
    heads = _heads()
    found = 0
    for L in (32, 64):
        for reading in ("E", "E_full"):
            for level in (0.01, 0.05, 0.5):
                got = statistics.critical_from_heads(heads, L, reading, level)
                assert got == _search_critical(heads, L, reading, level), (L, reading, level)
                found += got is not None
    assert found >= 6


def test_critical_from_heads_pools_the_windows_given_and_a_head_subset():
    heads = _heads()
    one = heads[heads.window == 2]
    assert statistics.critical_from_heads(heads, 64, "E", 0.05, windows=[2, 2]) == _search_critical(one, 64, "E", 0.05)
    # a window listed twice weighs twice: [0, 0, 1] pools as (2 x window 0 + window 1) / 3
    w = heads[heads.window.isin([0, 1])].copy()
    w = pd.concat([w, w[w.window == 0]], ignore_index=True)
    w["window"] = 0  # one window whose mean is the weighted mean
    keys = ["layer", "head", "L", "N", "reading"]
    pooled = w.groupby(keys, as_index=False)[["rows", "d_tilde", "expected"]].mean()
    pooled["window"] = 0
    assert statistics.critical_from_heads(heads, 64, "E", 0.05, windows=[0, 0, 1]) == _search_critical(
        pooled, 64, "E", 0.05
    )
    subset = [(0, 0), (0, 1), (1, 2), (2, 3), (2, 0)]
    kept = heads[[(a, b) in subset for a, b in zip(heads.layer, heads["head"], strict=True)]]
    assert statistics.critical_from_heads(heads, 32, "E", 0.05, head_index=subset) == _search_critical(
        kept, 32, "E", 0.05
    )
    with pytest.raises(ValueError, match="windows"):
        statistics.critical_from_heads(heads, 32, "E", 0.05, windows=[9])
    with pytest.raises(ValueError, match="head_index"):
        statistics.critical_from_heads(heads, 32, "E", 0.05, head_index=[(7, 7)])
    with pytest.raises(ValueError, match="L: 33"):
        statistics.critical_from_heads(heads, 33, "E", 0.05)
    for not_a_reading in ("rows", "expected", "E_perm"):
        with pytest.raises(ValueError, match="reading"):
            statistics.critical_from_heads(heads, 32, not_a_reading, 0.05)
    with pytest.raises(ValueError, match="missing columns"):
        statistics.critical_from_heads(heads.drop(columns="expected"), 32, "E", 0.05)


def test_critical_from_heads_leaves_out_heads_without_rows_and_says_none():
    heads = _heads()
    blank = (heads.layer == 0) & (heads.head == 0)
    heads.loc[blank, "rows"] = 0
    heads.loc[blank, ["d_tilde", "expected"]] = np.nan
    assert statistics.critical_from_heads(heads, 64, "E", 0.05) == _search_critical(heads, 64, "E", 0.05)
    assert statistics.critical_from_heads(heads, 64, "E", 1.01) is None  # no p-value reaches it


def test_each_reading_is_tested_against_its_own_d_tilde():
    """A reading that averages a sample of the rows has its own d~ and rows; its KS test reads those, not another
    reading's at the same (L, N)."""
    heads = _heads()
    full = heads.reading == "E_full"
    rng = np.random.default_rng(3)
    heads.loc[full, "d_tilde"] = heads.loc[full, "expected"] + rng.normal(0, 1e-3, full.sum())  # on its sample
    heads.loc[full, "rows"] = heads.loc[full, "rows"] * rng.uniform(0.2, 0.6, full.sum())  # rows the sample stands for
    with_e_d_tilde = heads.copy()
    with_e_d_tilde.loc[full, "d_tilde"] = heads.loc[heads.reading == "E", "d_tilde"].to_numpy()
    for L in (32, 64):
        first = int(heads[heads.L == L].N.min())
        assert statistics.critical_from_heads(heads, L, "E_full", 0.5) == first  # its own d~ sits on it
        assert _search_critical(with_e_d_tilde, L, "E_full", 0.5) > first  # E's d~ would need a larger N
        assert statistics.critical_from_heads(heads, L, "E", 0.05) == _search_critical(heads, L, "E", 0.05)
    t = statistics.critical_intervals(heads, [0.5], resamples=50, readings=["E_full"])
    assert (t.critical_N_lo == t.critical_N_hi).all()
    assert list(t.critical_N_lo) == [int(heads[heads.L == L].N.min()) for L in t.L]


def test_critical_intervals_bracket_the_critical_n_on_evaluated_n():
    heads = _heads(windows=5)
    t = statistics.critical_intervals(heads, [0.01, 0.05], resamples=300, seed=1)
    columns = ["L", "reading", "ks_level", "critical_N_lo", "critical_N_hi", "units", "method"]
    assert list(t.columns) == columns
    assert len(t) == 2 * 2 * 2
    assert (t.units == 5).all() and (t.method == "percentile").all()
    for r in t.itertuples():
        n = statistics.critical_from_heads(heads, r.L, r.reading, r.ks_level)
        assert r.critical_N_lo <= n <= r.critical_N_hi
        evaluated = set(heads[heads.L == r.L].N) | {r.L}
        assert {r.critical_N_lo, r.critical_N_hi} <= evaluated
    assert (t.critical_N_lo < t.critical_N_hi).any()  # the windows differ, so the draws do
    again = statistics.critical_intervals(heads, [0.01, 0.05], resamples=300, seed=1)
    pd.testing.assert_frame_equal(t, again)
    single = statistics.critical_intervals(heads[heads.window == 0], [0.05], resamples=50)
    assert (single.units == 1).all() and (single.method == "none").all()
    for r in single.itertuples():
        n = statistics.critical_from_heads(heads[heads.window == 0], r.L, r.reading, 0.05)
        assert r.critical_N_lo == r.critical_N_hi == (r.L if n is None else n)


def test_critical_draws_give_each_draw_the_critical_n_of_its_windows():
    heads = _heads(windows=3)
    draws = statistics.critical_draws(heads, [0.05], resamples=30, seed=5, readings=["E"])
    assert list(draws.columns) == ["L", "reading", "ks_level", "draw", "critical_N"]
    chosen = np.random.default_rng(5).integers(0, 3, size=(30, 3))  # bootstrap_windows' draws
    for r in draws[draws.draw.isin([0, 7, 29])].itertuples():
        n = statistics.critical_from_heads(heads, r.L, "E", 0.05, windows=chosen[r.draw].tolist())
        assert r.critical_N == (r.L if n is None else n)


def test_bootstrap_units_draws_the_windows_of_critical_draws():
    """Draw i of bootstrap_units is draw i of critical_draws (same seed): a statistic read per draw lines up."""
    heads = _heads(windows=5)
    sums = statistics.UnitSums(heads[(heads.L == 64) & (heads.reading == "E")], ["d_tilde"], by=["N", "layer", "head"])
    seen = []

    def critical(counts):
        seen.append(counts)
        return np.zeros(len(counts))

    statistics.bootstrap_units(sums.units, critical, resamples=40, seed=3, batch=True)
    draws = statistics.critical_draws(heads, [0.05], resamples=40, seed=3, readings=["E"])
    at = draws[draws.L == 64].set_index("draw").critical_N
    for i in (0, 11, 39):
        windows = np.repeat(sums.units, seen[-1][i].astype(int)).tolist()
        n = statistics.critical_from_heads(heads, 64, "E", 0.05, windows=windows)
        assert at[i] == (64 if n is None else n)
    assert len({tuple(row) for row in seen[-1]}) > 20  # the draws differ


def test_critical_intervals_count_no_n_reached_as_l():
    heads = _heads(shift=1e6)  # the readings never come near d~
    t = statistics.critical_intervals(heads, [0.05], resamples=20)
    assert (t.critical_N_lo == t.L).all() and (t.critical_N_hi == t.L).all()


def test_critical_intervals_are_fast_at_the_size_of_the_paper_preset():
    lengths = (32, 64, 128, 256, 512, 1024)
    heads = _heads(layers=30, per_layer=9, windows=4, lengths=lengths, n_grid=14, readings=("E", "E_full", "E_perm"))
    start = time.perf_counter()
    statistics.critical_intervals(heads, [0.01, 0.05], resamples=1000)
    assert time.perf_counter() - start < 20


def test_critical_head_subsets_spread_around_the_full_set():
    heads = _heads(layers=6, per_layer=8)
    full = statistics.critical_from_heads(heads, 64, "E", 0.05)
    median, lo, hi = statistics.critical_head_subsets(heads, 64, "E", 0.05, size=24, draws=60, seed=2)
    assert lo <= median <= hi and lo <= full <= hi
    assert statistics.critical_head_subsets(heads, 64, "E", 0.05, size=48, draws=5) == (full, full, full)
    assert statistics.critical_head_subsets(heads, 64, "E", 0.05, size=24, draws=60, seed=2) == (median, lo, hi)
    with pytest.raises(ValueError, match="size"):
        statistics.critical_head_subsets(heads, 64, "E", 0.05, size=49)


def test_one_head_per_group_takes_one_query_head_of_each_key_value_group():
    heads = _heads(layers=30, per_layer=9, lengths=(32,), windows=1, n_grid=2)
    index = statistics.one_head_per_group(heads, n_heads=9, n_kv_heads=3, seed=0)
    assert len(index) == 90
    for layer in range(30):
        assert sorted(h // 3 for lay, h in index if lay == layer) == [0, 1, 2]
    assert index != statistics.one_head_per_group(heads, 9, 3, seed=1)
    kept = heads[[(a, b) in set(index) for a, b in zip(heads.layer, heads["head"], strict=True)]]
    assert statistics.critical_from_heads(heads, 32, "E", 0.5, head_index=index) == _search_critical(kept, 32, "E", 0.5)
    with pytest.raises(ValueError, match="n_kv_heads"):
        statistics.one_head_per_group(heads, 9, 2)
    with pytest.raises(ValueError, match="n_heads"):
        statistics.one_head_per_group(heads, 6, 3)


def test_wilcoxon_heads_tests_the_pooled_per_head_difference():
    from scipy.stats import wilcoxon

    heads = _heads()
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

    heads = _heads()
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
