"""Do the book's intervals cover? Coverage of the 95 % intervals of attnlimits.infra.statistics, measured on
simulated runs with a known truth at the book's sizes: 8 and 32 windows, 270 heads per window.

A simulated window shifts every head by the same random amount (its text: the heads of one window are not
independent), adds skewed (lognormal) noise per head and weighs each head's mean by unequal ``rows`` (each window its
own scale). The numbers the book decides on are pooled over the windows (each head's rows-weighted mean, then the
mean over heads): a pooled mean, a ratio of two pooled means (a reading over d~), and the log-log slope across 5
lengths of a per-length pooled mean (how the book reads a trend). An interval covers when it holds the truth; over
400 simulated runs a 95 % interval should cover 95 % of the time, give or take the simulation's own error (about 1.1
points).

What it shows (2000 runs per size, ``python tests/infra/test_interval_coverage.py 2000``): the jackknife Student-t
interval (``bootstrap_units(method="t")``) covers 94.0-95.1 % at 8 windows and 93.9-95.3 % at 32, the t interval of a
per-window value (``t_interval``) 94.7-95.3 % and 94.0-95.0 %; BCa covers 85.7-87.3 % at 8 windows and 91.0-93.1 % at
32, the percentile interval 86.0-88.0 % and 91.4-93.2 %. A bootstrap of few windows reads a spread that shrinks by
(n - 1) / n and normal tails where Student's are fatter. Every run is seeded, so the coverages here repeat exactly.

Heavy-tailed passages (:func:`test_the_t_interval_under_heavy_tailed_passages`; 20,000 runs of a per-window value
at 8, 12 and 32 windows, 4,000 in the test): symmetric heavy tails (Student t, 2.5 degrees of freedom) leave the t
interval conservative (95.6-96.4 %), but a skewed one (lognormal, sigma 1.5) drops it to 70-79 %, and one rare heavy
passage (a window in 12 shifted by 10 sd) to about 74 % at 8 and 12 windows and 92 % at 32. No interval
covers a mean there. The book's verdicts therefore read the median over windows of each window's own number with
its order-statistic interval (:func:`attnlimits.infra.statistics.median_interval`), whose coverage
:mod:`attnlimits.infra.coverage` measures at the book's window counts for every statistic the verdicts read (the
last three tests: at least 95 % everywhere from 6 windows on), beside the leave-one-window-out rule
(:func:`attnlimits.experiments.paper_claims.decided`: "hinges on one passage").
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnlimits.infra.statistics import METHODS, UnitSums, bootstrap_units, t_interval

HEADS = 270  # 30 layers of 9 heads
LENGTHS = np.array([32, 64, 128, 256, 512])
SLOPE_HEADS = 54  # per length: 270 (length, head) groups
SLOPE = -0.5  # the true log-log slope
SIMULATIONS = 400
BATCH = 10  # runs simulated together (one table), which keeps the test within seconds
LEVEL = 0.95
TOLERANCE = 0.04

_heads = np.random.default_rng(123)
MU = _heads.gamma(2.0, 1.0, HEADS) + 0.5  # each head's own level (the truth of a reading)
NU = _heads.gamma(3.0, 1.0, HEADS) + 0.5  # ... and of a second one (d~)
TRUTH = {"mean": MU.mean(), "ratio": MU.mean() / NU.mean(), "slope": SLOPE}


def _skewed(rng, size, sd):
    """Lognormal noise with mean 0 and standard deviation ``sd`` (skewness 6)."""
    z = rng.lognormal(0.0, 1.0, size)
    return sd * (z - np.exp(0.5)) / np.sqrt((np.e - 1) * np.e)


def _rows(rng, shape):
    """Unequal weights: each window's own scale (a sample of another size) times each head's."""
    return rng.uniform(0.5, 1.5, shape[:2] + (1,) * (len(shape) - 2)) * rng.uniform(20, 200, shape)


def _tidy(columns: dict, shape: tuple, names: tuple) -> pd.DataFrame:
    """A tidy table of arrays of ``shape``, one label column per axis (``names``)."""
    index = np.indices(shape).reshape(len(shape), -1)
    return pd.DataFrame({**dict(zip(names, index, strict=True)), **{k: v.ravel() for k, v in columns.items()}})


def _flat_runs(rng, runs: int, n: int) -> tuple[pd.DataFrame, np.ndarray]:
    """``runs`` simulated runs of ``n`` windows at one length, as one tidy table (run, window, head, rows, a
    reading ``a`` and d~ ``d``), and each window's mean of ``a`` over heads, shape (runs, n)."""
    shape = (runs, n, HEADS)
    b = rng.normal(0.0, 0.3, shape[:2] + (1,))  # the window's text moves every head...
    a = MU + b + _skewed(rng, shape, 1.0)
    d = NU + 0.6 * b + rng.normal(0.0, 0.2, shape[:2] + (1,)) + _skewed(rng, shape, 1.0)  # ...and both readings
    table = _tidy({"rows": _rows(rng, shape), "a": a, "d": d}, shape, ("run", "window", "head"))
    return table, a.mean(axis=-1)


def _slope_runs(rng, runs: int, n: int) -> tuple[pd.DataFrame, np.ndarray]:
    """``runs`` simulated runs of ``n`` windows over 5 lengths: a head's mean at L is MU L^SLOPE times the
    window's level and trend and skewed noise, its rows grow with L; and each window's own log-log slope of its
    mean over heads, shape (runs, n)."""
    shape = (runs, n, len(LENGTHS), SLOPE_HEADS)
    trend = np.log2(LENGTHS / LENGTHS[0])[:, None] / 4
    window = rng.normal(0.0, 0.15, shape[:2] + (1, 1)) + rng.normal(0.0, 0.1, shape[:2] + (1, 1)) * trend
    x = MU[:SLOPE_HEADS] * LENGTHS[:, None] ** SLOPE * (1 + window + _skewed(rng, shape, 0.3))
    rows = _rows(rng, shape) * LENGTHS[:, None]
    table = _tidy({"rows": rows, "x": x}, shape, ("run", "window", "L", "head"))
    table["L"] = LENGTHS[table["L"]]
    return table, _loglog_slope(x.mean(axis=-1))


def _loglog_slope(y: np.ndarray) -> np.ndarray:
    """Least-squares slope of log y against log L, along the last axis."""
    x = np.log(LENGTHS) - np.log(LENGTHS).mean()
    return np.log(y) @ x / (x @ x)


def _once(batch):
    """``batch`` remembering its answers: every run of a batch, and BCa and the percentile interval, read the
    same draws, and computing them once keeps the test fast."""
    seen = {}

    def statistic(counts):
        key = (counts.shape, counts.tobytes())
        if key not in seen:
            seen[key] = batch(counts)
        return seen[key]

    return statistic


def _batch_statistics(rng, runs: int, n: int) -> tuple[dict, dict, list]:
    """The book's three statistics for ``runs`` simulated runs at once, each a function of the windows' counts
    returning one value per run (last axis), the per-window values of the t interval, and the window labels.

    The runs share one table and one :class:`UnitSums` whose groups are (run, head): a draw of windows takes the
    same window positions in every run, as :func:`bootstrap_units` does with the book's seed, and each run's pooled
    means read only its own groups."""
    table, per_window_mean = _flat_runs(rng, runs, n)
    flat = UnitSums(table, ["a", "d"], by=["run", "head"])
    table, per_window_slope = _slope_runs(rng, runs, n)
    lengths = UnitSums(table, ["x"], by=["run", "L", "head"])
    assert list(flat.groups[:2]) == [(0, 0), (0, 1)] and list(lengths.groups[SLOPE_HEADS]) == [0, LENGTHS[1], 0]

    average = np.kron(np.full((HEADS, 1), 1 / HEADS), np.eye(2))  # (head, value) -> value: the mean over heads

    @_once
    def over_heads(c):  # each run's mean over heads of the pooled a and d: (..., runs, 2)
        return flat.pooled(c).reshape(*c.shape[:-1], runs, HEADS * 2) @ average

    @_once
    def slope(c):
        pooled = lengths.pooled(c)[..., 0].reshape(*c.shape[:-1], runs, len(LENGTHS), SLOPE_HEADS)
        return _loglog_slope(pooled.mean(axis=-1))

    statistics = {
        "mean": lambda c: over_heads(c)[..., 0],
        "ratio": lambda c: over_heads(c)[..., 0] / over_heads(c)[..., 1],
        "slope": slope,
    }
    return statistics, {"mean": per_window_mean, "slope": per_window_slope}, flat.units


def _intervals(n: int, seed: int = 0) -> dict[tuple[str, str], list]:
    """Per (statistic, method), the intervals of ``SIMULATIONS`` simulated runs of ``n`` windows (seeded)."""
    rng = np.random.default_rng(seed)
    out: dict[tuple[str, str], list] = {}
    for first in range(0, SIMULATIONS, BATCH):
        runs = min(BATCH, SIMULATIONS - first)
        statistics, per_window, units = _batch_statistics(rng, runs, n)
        for run in range(runs):
            for name, values in per_window.items():
                out.setdefault((name, "t_interval"), []).append(t_interval(values[run], level=LEVEL))
            for name, statistic in statistics.items():
                for method in METHODS:
                    interval = bootstrap_units(
                        units, lambda c, s=statistic, r=run: s(c)[..., r], method=method, level=LEVEL, batch=True
                    )
                    assert interval.units == n and interval.method == method
                    out.setdefault((name, method), []).append(interval)
    return out


def _coverage(intervals: dict[tuple[str, str], list]) -> dict[tuple[str, str], float]:
    return {key: float(np.mean([iv.lo <= TRUTH[key[0]] <= iv.hi for iv in found])) for key, found in intervals.items()}


@pytest.fixture(scope="module", params=[8, 32], ids=["8 windows", "32 windows"])
def coverage(request):
    return request.param, _coverage(_intervals(request.param))


def test_the_t_intervals_cover_at_8_and_32_windows(coverage):
    """The jackknife t of each pooled statistic (UnitSums and bootstrap_units) and the t interval of a per-window
    value cover within the tolerance at both sizes: the intervals to decide verdicts on."""
    n, found = coverage
    for statistic in ("mean", "ratio", "slope"):
        assert abs(found[statistic, "t"] - LEVEL) <= TOLERANCE, (n, statistic, found)
    for statistic in ("mean", "slope"):
        assert abs(found[statistic, "t_interval"] - LEVEL) <= TOLERANCE, (n, statistic, found)


def test_the_bootstrap_intervals_are_too_narrow_at_8_windows_and_cover_less_than_t(coverage):
    """BCa (the bootstrap's default) and the percentile interval fall well below 95 % at 8 windows, and on the same
    runs they cover less than the jackknife t at both sizes (at 32 windows they are 2 to 4 points short). This test
    fails if that changes, and with it the advice of the module to decide on t."""
    n, found = coverage
    for statistic in ("mean", "ratio", "slope"):
        for method in ("bca", "percentile"):
            assert found[statistic, method] < found[statistic, "t"], (n, statistic, method, found)
            if n == 8:
                assert found[statistic, method] < LEVEL - TOLERANCE, (n, statistic, method, found)


def _t_coverage(draw, n: int, runs: int = 4000) -> float:
    """How often :func:`t_interval` of ``n`` per-window values drawn by ``draw`` (centred: the truth is 0) holds 0."""
    found = [t_interval(row, level=LEVEL) for row in draw((runs, n))]
    return float(np.mean([iv.lo <= 0 <= iv.hi for iv in found]))


def test_the_t_interval_under_heavy_tailed_passages():
    """What the t interval covers when a passage can be far from the others (the module's text gives the numbers):
    symmetric heavy tails keep it near 95 %; a skewed heavy tail and one rare heavy passage break it at the book's
    window counts. This test fails if either changes, and with it what the leave-one-window-out rule is for."""
    rng = np.random.default_rng(7)

    def symmetric(shape):
        return rng.standard_t(2.5, shape)

    def skewed(shape):
        return rng.lognormal(0.0, 1.5, shape) - np.exp(1.5**2 / 2)

    def rare(shape, p=1 / 12, shift=10.0):
        return rng.normal(0.0, 1.0, shape) + shift * (rng.random(shape) < p) - shift * p

    for n in (8, 12, 32):
        assert abs(_t_coverage(symmetric, n) - LEVEL) <= 0.02, n
        assert _t_coverage(skewed, n) < LEVEL - 0.1, n
    assert _t_coverage(rare, 8) < 0.8 and _t_coverage(rare, 12) < 0.8
    assert _t_coverage(rare, 32) > _t_coverage(rare, 12) + 0.1  # more windows see the rare passage more often


@pytest.fixture(scope="module")
def book_table():
    """The reproducibility report's coverage table (attnlimits.infra.coverage) on fewer runs: the same design."""
    from attnlimits.infra import coverage

    return coverage.table(runs=400, resamples=100)


def test_the_order_statistic_interval_covers_every_case_the_book_reads(book_table):
    """The book's interval (the median over windows, its order-statistic interval) holds the median at least 95 %
    of the time for every statistic and every kind of passage, at 8, 12 and 32 windows (its coverage is binomial
    whatever the passages do; 0.03 is the simulation's own error at 400 runs), and gives no interval at 5."""
    t = book_table[book_table.method == "median"]
    assert t[t.windows == 5].coverage.isna().all()
    held = t[t.windows > 5]
    assert (held.coverage >= LEVEL - 0.03).all(), held[held.coverage < LEVEL - 0.03]
    assert (held.estimand == "median").all() and held.width.gt(0).all()


def test_the_t_interval_of_a_mean_fails_where_the_passages_are_skewed_rare_or_discrete(book_table):
    """The book's earlier interval: near 95 % under normal passages, far short with one rare heavy passage (the
    median head and the 95th percentile at 8 and 12 windows), under a skewed tail, and for a discrete critical N.
    This test fails if that changes, and with it the reason the verdicts read the median."""
    t = book_table[book_table.method == "t"].set_index(["statistic", "tails", "windows"]).coverage
    rare, skewed = "rare (1 in 12, 10 sd)", "skewed (lognormal)"
    for statistic in ("median head", "95th percentile", "critical N (discrete)"):
        assert abs(t[statistic, "normal", 8] - LEVEL) <= 0.04, statistic
        for n in (8, 12):
            assert t[statistic, rare, n] < 0.88, (statistic, n)
    assert t["critical N (discrete)", rare, 8] < 0.6 and t["critical N (discrete)", skewed, 12] < 0.8
    percentile = book_table[(book_table.method == "percentile") & (book_table.windows == 8)]
    assert (percentile.coverage < LEVEL - 0.04).all()  # the bootstrap of 8 windows is too narrow everywhere


def test_the_coverage_table_repeats_exactly_and_checks_its_arguments():
    from attnlimits.infra import coverage

    a = coverage.coverage("critical N (discrete)", "normal", runs=50, resamples=20)
    b = coverage.coverage("critical N (discrete)", "normal", runs=50, resamples=20)
    pd.testing.assert_frame_equal(a, b)
    assert list(a.windows.unique()) == list(coverage.COUNTS) and set(a.method) == set(coverage.METHODS)
    with pytest.raises(ValueError, match="statistic"):
        coverage.coverage("mean head", "normal")
    with pytest.raises(ValueError, match="tails"):
        coverage.coverage("median head", "cauchy")
    with pytest.raises(ValueError, match="runs"):
        coverage.coverage("median head", "normal", runs=3)


if __name__ == "__main__":  # the table of coverages: python tests/infra/test_interval_coverage.py [simulations]
    import sys
    import time

    SIMULATIONS = int(sys.argv[1]) if len(sys.argv) > 1 else SIMULATIONS
    for n in (8, 32):
        start = time.perf_counter()
        found = _intervals(n)
        cover = _coverage(found)
        print(f"{n} windows, {SIMULATIONS} simulated runs, {time.perf_counter() - start:.0f} s")
        for (statistic, method), value in sorted(cover.items()):
            width = np.mean([iv.hi - iv.lo for iv in found[statistic, method]])
            print(f"  {statistic:6s} {method:11s} coverage {value:.3f}  mean width {width:.4f}")
