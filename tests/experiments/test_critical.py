"""Algorithm 3 (attnlimits.experiments.critical): the search on the KS decision, the rounds that look ahead, the
critical N against a dense scan on tiny random models, and the critical N recomputed from the per-head table with its
intervals over windows and subsets of heads."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import critical_heads
import numpy as np
import pandas as pd
import pytest

from attnlimits import experiments
from attnlimits.experiments import critical as alg3
from attnlimits.experiments.critical_reading import (
    critical_draws,
    critical_from_heads,
    critical_head_subsets,
    critical_intervals,
    one_head_per_group,
)
from attnlimits.infra import statistics
from attnlimits.infra.ks import ks_test

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import naive_experiments as naive  # noqa: E402


# ---------------------------------------------------------------------------------------------------------------
# the search
# ---------------------------------------------------------------------------------------------------------------
def _drive(L, level, p_of):
    gen = experiments.critical_search(L, level)
    asked = []
    try:
        n = next(gen)
        while True:
            asked.append(n)
            n = gen.send(p_of(n))
    except StopIteration as stop:
        return stop.value, asked


@pytest.mark.parametrize("L", [2, 3, 17, 64, 1024])
def test_search_finds_the_first_change_of_a_monotone_decision(L):
    for answer in range(1, L):
        found, asked = _drive(L, 0.05, lambda n, a=answer: 0.5 if n >= a else 0.001)
        assert found == answer
        assert len(asked) <= 2 * math.ceil(math.log2(L)) + 1
        assert answer in asked and (answer == 1 or answer - 1 in asked)


def test_search_returns_none_when_no_n_reaches_the_level():
    found, asked = _drive(40, 0.05, lambda n: 0.0)
    assert found is None and asked[-1] == 39


@pytest.mark.parametrize("guess", [None, 5, 30])
def test_search_tries_every_n_up_to_n_max(guess):
    """Without the sink the largest testable N is L - 2: the search must reach the answer just below it."""
    gen = experiments.critical_search(32, 0.05, guess, n_max=30)
    n, asked = next(gen), []
    try:
        while True:
            assert 1 <= n <= 30
            asked.append(n)
            n = gen.send(0.5 if n >= 29 else 0.0)
    except StopIteration as stop:
        assert stop.value == 29 and 28 in asked


@pytest.mark.parametrize("seed", range(4))
def test_looking_ahead_finds_the_critical_n_of_one_n_per_round_in_fewer_rounds(monkeypatch, seed):
    """Algorithm 3's rounds evaluate the N each search would ask after either outcome too: on p-values that rise
    with N through noise (so a search may cross the level more than once), the critical N are those of one N per
    round, and the rounds fewer."""
    rng = np.random.default_rng(seed)
    p_of = {}  # (reading, N, L) -> p: rising with N / L, noisy

    def evaluate(windows, todo, *args, **kwargs):
        rounds.append(len(todo))
        for key in todo:
            p_of.setdefault(key, float(np.clip(key[1] / key[2] - 0.3 + rng.normal(0, 0.15), 0, 1)))
        return {key: (0.0, p_of[key]) for key in todo}, []

    monkeypatch.setattr(alg3, "check_windows", lambda windows: None)
    monkeypatch.setattr(alg3, "_evaluate_ks", evaluate)
    found = {}
    for depth in (1, 2):
        monkeypatch.setattr(alg3, "LOOKAHEAD", depth)
        rounds = []
        critical = experiments.critical_n([], [32, 64, 128, 256, 1024], (0.05, 0.01))[1]
        found[depth] = (critical["critical_N"].tolist(), len(rounds))
    assert found[2][0] == found[1][0]
    assert found[2][1] < 0.75 * found[1][1], found


@pytest.mark.parametrize("L", [2, 5, 64, 1024])
def test_guided_search_finds_the_change_from_any_guess(L):
    for answer in sorted(a for a in {1, 2, L // 3, L - 1} if 1 <= a < L):
        for guess in sorted(g for g in {1, answer - 1, answer, answer + 1, L - 1, L // 2} if 1 <= g < L):
            found, asked = _drive_guided(L, answer, guess)
            assert found == answer, (answer, guess)
            assert answer in asked and (answer == 1 or answer - 1 in asked)
    found, _ = _drive_guided(L, None, L // 2 or 1)
    assert found is None


def _drive_guided(L, answer, guess):
    gen = experiments.critical_search(L, 0.05, guess)
    asked = []
    try:
        n = next(gen)
        while True:
            asked.append(n)
            n = gen.send(0.5 if answer is not None and n >= answer else 0.0)
    except StopIteration as stop:
        return stop.value, asked


def test_looking_ahead_reads_the_same_p_values_and_finds_the_same_critical_n(windows, monkeypatch):
    """Algorithm 3 evaluating two decisions ahead reads, at every (L, N, reading) it shares with one N per round,
    the same p-value (the permutation null E_perm included: its rows draw alike in any grouping), and so finds the
    same critical N."""
    found = {}
    for depth in (1, 2):
        monkeypatch.setattr(alg3, "LOOKAHEAD", depth)
        found[depth] = experiments.critical_n(windows, [64, 100], seed=3, row_stride=8)
    (scan, critical, _), (ahead, critical_ahead, _) = found[1], found[2]
    pd.testing.assert_frame_equal(critical_ahead, critical)
    both = scan.merge(ahead, on=["L", "N", "reading"], suffixes=("", "_ahead"))
    assert len(both) == len(scan) < len(ahead) and "E_perm" in set(both.reading)
    np.testing.assert_array_equal(both.p_value_ahead.to_numpy(), both.p_value.to_numpy())


# ---------------------------------------------------------------------------------------------------------------
# tiny random models against the literal reference
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("exclude_sink", [False, True])
def test_the_readings_of_algorithm_3_are_the_distance_tables(tiny, exclude_sink):
    """Every exact reading's KS p-value at an (L, N) is the test between the heads' d~ and that reading as the
    distance table has them (short windows: the row sample is every row), and the heads table reproduces each
    critical N."""
    _, windows = tiny
    scan, critical, heads = experiments.critical_n(windows, [8, 16], (0.05, 0.01), exclude_sink=exclude_sink)
    assert set(scan.reading) == set(critical.reading) == set(heads.reading) == set(experiments.CRITICAL_READINGS)
    grid = {}
    for row in scan.itertuples():
        grid.setdefault(int(row.N), set()).add(int(row.L))
    table = experiments.distance_table(windows, grid, exclude_sink=exclude_sink, countings=("visible",))
    for row in scan[scan.reading != "E_perm"].itertuples():  # E_perm: other draws than the table's (seeded)
        at = table[(table.L == row.L) & (table.N == row.N)]
        pooled = at.groupby(["layer", "head"])[["d_tilde", row.reading]].mean().dropna()
        p = ks_test(pooled.d_tilde, pooled[row.reading])[1]
        assert row.p_value == pytest.approx(p, rel=1e-9), row
    for row in critical.itertuples():
        again = critical_from_heads(heads, row.L, row.reading, row.ks_level)
        assert (pd.isna(row.critical_N) and again is None) or again == row.critical_N


@pytest.mark.parametrize("exclude_sink", [False, True])
def test_critical_n_matches_a_dense_scan(tiny, exclude_sink):
    _, windows = tiny
    lengths = [8, 16]
    scan, critical, _ = experiments.critical_n(
        windows, lengths, (0.05, 0.01), readings=("E",), exclude_sink=exclude_sink
    )
    ref_scan, ref_critical = naive.critical_scan(windows, lengths, (0.05, 0.01), exclude_sink=exclude_sink)
    assert not scan.p_value.isna().any()  # every N tried leaves rows to test
    merged = scan.merge(ref_scan, on=["L", "N"], suffixes=("", "_ref"))
    assert len(merged) == len(scan)  # every N the search evaluated is in the dense scan, with the same p-value
    np.testing.assert_allclose(merged.p_value, merged.p_value_ref, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(merged.ks_stat, merged.ks_stat_ref, rtol=1e-12)
    assert len(scan) < len(ref_scan)
    for row in critical.itertuples():
        ref = ref_critical[(ref_critical.L == row.L) & (ref_critical.ks_level == row.ks_level)].critical_N.item()
        dense = ref_scan[ref_scan.L == row.L].sort_values("N")
        monotone = (dense.p_value >= row.ks_level).is_monotonic_increasing
        if monotone:  # the search's premise; then it must find exactly the dense scan's answer
            assert (pd.isna(row.critical_N) and math.isnan(ref)) or row.critical_N == ref


# ---------------------------------------------------------------------------------------------------------------
# the critical N from the per-head table, and its intervals
# ---------------------------------------------------------------------------------------------------------------
def test_critical_from_heads_reproduces_the_search_on_all_windows():
    heads = critical_heads.table()
    found = 0
    for L in (32, 64):
        for reading in ("E", "E_full"):
            for level in (0.01, 0.05, 0.5):
                got = critical_from_heads(heads, L, reading, level)
                assert got == critical_heads.search_critical(heads, L, reading, level), (L, reading, level)
                found += got is not None
    assert found >= 6


def test_critical_from_heads_pools_the_windows_given_and_a_head_subset():
    heads = critical_heads.table()
    one = heads[heads.window == 2]
    assert critical_from_heads(heads, 64, "E", 0.05, windows=[2, 2]) == critical_heads.search_critical(
        one, 64, "E", 0.05
    )
    # a window listed twice weighs twice: [0, 0, 1] pools as (2 x window 0 + window 1) / 3
    w = heads[heads.window.isin([0, 1])].copy()
    w = pd.concat([w, w[w.window == 0]], ignore_index=True)
    w["window"] = 0  # one window whose mean is the weighted mean
    keys = ["layer", "head", "L", "N", "reading"]
    pooled = w.groupby(keys, as_index=False)[["rows", "d_tilde", "expected"]].mean()
    pooled["window"] = 0
    assert critical_from_heads(heads, 64, "E", 0.05, windows=[0, 0, 1]) == critical_heads.search_critical(
        pooled, 64, "E", 0.05
    )
    subset = [(0, 0), (0, 1), (1, 2), (2, 3), (2, 0)]
    kept = heads[[(a, b) in subset for a, b in zip(heads.layer, heads["head"], strict=True)]]
    assert critical_from_heads(heads, 32, "E", 0.05, head_index=subset) == critical_heads.search_critical(
        kept, 32, "E", 0.05
    )
    with pytest.raises(ValueError, match="windows"):
        critical_from_heads(heads, 32, "E", 0.05, windows=[9])
    with pytest.raises(ValueError, match="head_index"):
        critical_from_heads(heads, 32, "E", 0.05, head_index=[(7, 7)])
    with pytest.raises(ValueError, match="L: 33"):
        critical_from_heads(heads, 33, "E", 0.05)
    for not_a_reading in ("rows", "expected", "E_perm"):
        with pytest.raises(ValueError, match="reading"):
            critical_from_heads(heads, 32, not_a_reading, 0.05)
    with pytest.raises(ValueError, match="missing columns"):
        critical_from_heads(heads.drop(columns="expected"), 32, "E", 0.05)


def test_critical_from_heads_leaves_out_heads_without_rows_and_says_none():
    heads = critical_heads.table()
    blank = (heads.layer == 0) & (heads.head == 0)
    heads.loc[blank, "rows"] = 0
    heads.loc[blank, ["d_tilde", "expected"]] = np.nan
    assert critical_from_heads(heads, 64, "E", 0.05) == critical_heads.search_critical(heads, 64, "E", 0.05)
    assert critical_from_heads(heads, 64, "E", 1.01) is None  # no p-value reaches it


def test_each_reading_is_tested_against_its_own_d_tilde():
    """A reading that averages a sample of the rows has its own d~ and rows; its KS test reads those, not another
    reading's at the same (L, N)."""
    heads = critical_heads.table()
    full = heads.reading == "E_full"
    rng = np.random.default_rng(3)
    heads.loc[full, "d_tilde"] = heads.loc[full, "expected"] + rng.normal(0, 1e-3, full.sum())  # on its sample
    heads.loc[full, "rows"] = heads.loc[full, "rows"] * rng.uniform(0.2, 0.6, full.sum())  # rows the sample stands for
    with_e_d_tilde = heads.copy()
    with_e_d_tilde.loc[full, "d_tilde"] = heads.loc[heads.reading == "E", "d_tilde"].to_numpy()
    for L in (32, 64):
        first = int(heads[heads.L == L].N.min())
        assert critical_from_heads(heads, L, "E_full", 0.5) == first  # its own d~ sits on it
        assert critical_heads.search_critical(with_e_d_tilde, L, "E_full", 0.5) > first  # E's d~ would need a larger N
        assert critical_from_heads(heads, L, "E", 0.05) == critical_heads.search_critical(heads, L, "E", 0.05)
    t = critical_intervals(heads, [0.5], resamples=50, readings=["E_full"])
    assert (t.critical_N_lo == t.critical_N_hi).all()
    assert list(t.critical_N_lo) == [int(heads[heads.L == L].N.min()) for L in t.L]


def test_critical_intervals_bracket_the_critical_n_on_evaluated_n():
    heads = critical_heads.table(windows=5)
    t = critical_intervals(heads, [0.01, 0.05], resamples=300, seed=1)
    columns = ["L", "reading", "ks_level", "critical_N_lo", "critical_N_hi", "units", "method"]
    assert list(t.columns) == columns
    assert len(t) == 2 * 2 * 2
    assert (t.units == 5).all() and (t.method == "percentile").all()
    for r in t.itertuples():
        n = critical_from_heads(heads, r.L, r.reading, r.ks_level)
        assert r.critical_N_lo <= n <= r.critical_N_hi
        evaluated = set(heads[heads.L == r.L].N) | {r.L}
        assert {r.critical_N_lo, r.critical_N_hi} <= evaluated
    assert (t.critical_N_lo < t.critical_N_hi).any()  # the windows differ, so the draws do
    again = critical_intervals(heads, [0.01, 0.05], resamples=300, seed=1)
    pd.testing.assert_frame_equal(t, again)
    single = critical_intervals(heads[heads.window == 0], [0.05], resamples=50)
    assert (single.units == 1).all() and (single.method == "none").all()
    for r in single.itertuples():
        n = critical_from_heads(heads[heads.window == 0], r.L, r.reading, 0.05)
        assert r.critical_N_lo == r.critical_N_hi == (r.L if n is None else n)


def test_critical_draws_give_each_draw_the_critical_n_of_its_windows():
    heads = critical_heads.table(windows=3)
    draws = critical_draws(heads, [0.05], resamples=30, seed=5, readings=["E"])
    assert list(draws.columns) == ["L", "reading", "ks_level", "draw", "critical_N"]
    chosen = np.random.default_rng(5).integers(0, 3, size=(30, 3))  # bootstrap_windows' draws
    for r in draws[draws.draw.isin([0, 7, 29])].itertuples():
        n = critical_from_heads(heads, r.L, "E", 0.05, windows=chosen[r.draw].tolist())
        assert r.critical_N == (r.L if n is None else n)


def test_bootstrap_units_draws_the_windows_of_critical_draws():
    """Draw i of bootstrap_units is draw i of critical_draws (same seed): a statistic read per draw lines up."""
    heads = critical_heads.table(windows=5)
    sums = statistics.UnitSums(heads[(heads.L == 64) & (heads.reading == "E")], ["d_tilde"], by=["N", "layer", "head"])
    seen = []

    def record(counts):
        seen.append(counts)
        return np.zeros(len(counts))

    statistics.bootstrap_units(sums.units, record, resamples=40, seed=3, batch=True)
    draws = critical_draws(heads, [0.05], resamples=40, seed=3, readings=["E"])
    at = draws[draws.L == 64].set_index("draw").critical_N
    for i in (0, 11, 39):
        windows = np.repeat(sums.units, seen[-1][i].astype(int)).tolist()
        n = critical_from_heads(heads, 64, "E", 0.05, windows=windows)
        assert at[i] == (64 if n is None else n)
    assert len({tuple(row) for row in seen[-1]}) > 20  # the draws differ


def test_critical_intervals_count_no_n_reached_as_l():
    heads = critical_heads.table(shift=1e6)  # the readings never come near d~
    t = critical_intervals(heads, [0.05], resamples=20)
    assert (t.critical_N_lo == t.L).all() and (t.critical_N_hi == t.L).all()


def test_critical_intervals_are_fast_at_the_size_of_the_paper_preset():
    lengths = (32, 64, 128, 256, 512, 1024)
    heads = critical_heads.table(
        layers=30, per_layer=9, windows=4, lengths=lengths, n_grid=14, readings=("E", "E_full", "E_perm")
    )
    start = time.perf_counter()
    critical_intervals(heads, [0.01, 0.05], resamples=1000)
    assert time.perf_counter() - start < 20


def test_critical_head_subsets_spread_around_the_full_set():
    heads = critical_heads.table(layers=6, per_layer=8)
    full = critical_from_heads(heads, 64, "E", 0.05)
    median, lo, hi = critical_head_subsets(heads, 64, "E", 0.05, size=24, draws=60, seed=2)
    assert lo <= median <= hi and lo <= full <= hi
    assert critical_head_subsets(heads, 64, "E", 0.05, size=48, draws=5) == (full, full, full)
    assert critical_head_subsets(heads, 64, "E", 0.05, size=24, draws=60, seed=2) == (median, lo, hi)
    with pytest.raises(ValueError, match="size"):
        critical_head_subsets(heads, 64, "E", 0.05, size=49)


def test_one_head_per_group_takes_one_query_head_of_each_key_value_group():
    heads = critical_heads.table(layers=30, per_layer=9, lengths=(32,), windows=1, n_grid=2)
    index = one_head_per_group(heads, n_heads=9, n_kv_heads=3, seed=0)
    assert len(index) == 90
    for layer in range(30):
        assert sorted(h // 3 for lay, h in index if lay == layer) == [0, 1, 2]
    assert index != one_head_per_group(heads, 9, 3, seed=1)
    kept = heads[[(a, b) in set(index) for a, b in zip(heads.layer, heads["head"], strict=True)]]
    assert critical_from_heads(heads, 32, "E", 0.5, head_index=index) == critical_heads.search_critical(
        kept, 32, "E", 0.5
    )
    with pytest.raises(ValueError, match="n_kv_heads"):
        one_head_per_group(heads, 9, 2)
    with pytest.raises(ValueError, match="n_heads"):
        one_head_per_group(heads, 6, 3)
