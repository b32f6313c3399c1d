"""Do the book's intervals cover? Their coverage measured on simulated runs with a known truth, at the window counts
the book reads and for the statistics its verdicts read.

A simulated run has ``n`` windows (passages). Each window's text moves all its heads together by a passage effect
drawn from one of :data:`TAILS` (normal; heavy and symmetric; heavy and skewed; or one rare passage in 12 far from
the others), and each head adds its own noise. From its heads a window gives one number, as a window of the book
does (:data:`STATISTICS`): its median head, the ratio of its median heads at two sizes, its 95th percentile over
heads, its critical N (a discrete value on a grid of N, L where none is reached) and the log-log slope of its
critical N across five lengths. An interval over the run's windows covers when it holds the truth: the mean of the
window's number over passages for the t and percentile intervals (which estimate a mean), its median for the
order-statistic interval (:func:`attnlimits.infra.medians.median_interval`, which estimates the median). The
truth is computed on an independent sample of :data:`TRUTH_WINDOWS` windows.

:func:`table` gives every (window count, tails, statistic, method) coverage; chapter 31 shows it. What it finds: the
order-statistic interval of the median holds at least 95 % everywhere it exists (6 windows and more), because its
coverage is binomial whatever the passages do; the t interval and the percentile bootstrap of a mean cover about
95 % and 86-93 % under normal passages but fall far short under a skewed tail or a rare heavy passage, where the
sample mostly holds no window from the tail. Every run is seeded: the table repeats exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from attnlimits.infra.medians import order_ranks

__all__ = ["COUNTS", "LEVEL", "METHODS", "STATISTICS", "TAILS", "TRUTH_WINDOWS", "coverage", "table"]

#: The window counts the book reads: 5 seeds (chapter 32), 8 windows (chapters 34 and 35), 12 (the book before its
#: results shipped), 32 windows (the Experiments).
COUNTS = (5, 8, 12, 32)
LEVEL = 0.95
#: How many windows the truth is computed on (independent of the runs).
TRUTH_WINDOWS = 100_000
HEADS = 32  # heads per simulated window
LENGTHS = np.array([1024, 2048, 4096, 8192, 16384])  # the critical N slope's lengths
GRID = np.unique(np.round(np.geomspace(1, 16384, 57)))  # the N a search evaluates (about 4 per octave)


def _light(rng, size):
    return rng.standard_normal(size)


def _heavy(rng, size):
    return rng.standard_t(2.5, size) / np.sqrt(5.0)  # unit variance


def _skewed(rng, size):
    z = rng.lognormal(0.0, 1.5, size)
    return (z - np.exp(1.125)) / np.sqrt((np.exp(2.25) - 1) * np.exp(2.25))  # mean 0, variance 1


def _rare(rng, size, p=1 / 12, shift=10.0):
    return rng.standard_normal(size) + shift * (rng.random(size) < p)


#: The passage effects: name -> draw(rng, size), scaled to a standard deviation of about 1 where it has one:
#: normal; heavy-tailed and symmetric (Student t, 2.5 degrees of freedom); heavy-tailed and skewed (lognormal,
#: sigma 1.5); one rare passage in 12 shifted by 10 standard deviations. Short names: the report's table is wide.
TAILS: dict[str, Callable] = {
    "normal": _light,
    "heavy (t, 2.5 df)": _heavy,
    "skewed (lognormal)": _skewed,
    "rare (1 in 12, 10 sd)": _rare,
}


def _heads(rng, b, scale, size=HEADS):
    """Each window's heads: a level per head (fixed across windows), the passage effect ``b`` (windows, 1) times
    ``scale``, and the head's own noise."""
    level = np.linspace(0.5, 1.5, size)
    return level + scale * b + 0.3 * rng.standard_normal(b.shape[:-1] + (size,))


def _median_head(rng, b):
    return np.median(_heads(rng, b, 0.3), axis=-1)


def _ratio_of_medians(rng, b):
    small = np.median(_heads(rng, b, 0.3), axis=-1) + 2.0
    large = np.median(_heads(rng, b, 0.6), axis=-1) + 2.2
    return large / small


def _q95(rng, b):
    return np.quantile(_heads(rng, b, 0.3), 0.95, axis=-1)


def _critical_at(rng, b, L):
    """A window's critical N at length L: the first N of :data:`GRID` at or above a latent value that moves with
    the passage (L where it passes L: no N reached)."""
    latent = 0.06 * L * np.exp(0.4 * b[..., 0] + 0.15 * rng.standard_normal(b.shape[:-1]))
    at = np.searchsorted(GRID, latent)
    return np.where(latent >= L, L, GRID[np.minimum(at, len(GRID) - 1)])


def _critical(rng, b):
    return _critical_at(rng, b, 4096).astype(float)


def _critical_slope(rng, b):
    # the passage moves the critical N's growth too: its log grows by 0.4 * 0.25 b more per doubling of L
    n = np.stack([_critical_at(rng, b * (1 + 0.25 * np.log2(L / LENGTHS[0])), L) for L in LENGTHS], axis=-1)
    x = np.log(LENGTHS) - np.log(LENGTHS).mean()
    return np.log(n) @ x / (x @ x)


#: The statistics a window gives (what the book's verdicts read): name -> statistic(rng, passage effects).
STATISTICS: dict[str, Callable] = {
    "median head": _median_head,
    "ratio of medians": _ratio_of_medians,
    "95th percentile": _q95,
    "critical N (discrete)": _critical,
    "critical N slope (discrete)": _critical_slope,
}

#: The intervals measured: the Student t of the mean, the percentile bootstrap of the mean (resampling windows),
#: and the order-statistic interval of the median (the book's).
METHODS = ("t", "percentile", "median")


def _t(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from scipy.special import stdtrit

    n = values.shape[-1]
    half = stdtrit(n - 1, (1 + LEVEL) / 2) * values.std(axis=-1, ddof=1) / np.sqrt(n)
    mean = values.mean(axis=-1)
    return mean - half, mean + half


def _percentile(values: np.ndarray, rng, resamples: int) -> tuple[np.ndarray, np.ndarray]:
    """The percentile bootstrap of the mean over windows, each run's ``resamples`` draws of its windows with
    replacement (the same draws of window positions for every run, as the book's seeded draws are: a product)."""
    runs, n = values.shape
    positions = rng.integers(0, n, (resamples, n))
    counts = np.stack([np.bincount(row, minlength=n) for row in positions]).astype(float)
    means = values @ counts.T / n
    lo, hi = np.percentile(means, [50 * (1 - LEVEL), 50 * (1 + LEVEL)], axis=-1)
    return lo, hi


def _median(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = values.shape[-1]
    ranks = order_ranks(n, LEVEL)
    if ranks is None:
        nan = np.full(len(values), np.nan)
        return nan, nan
    x = np.sort(values, axis=-1)
    return x[:, ranks[0] - 1], x[:, n - ranks[0]]


def coverage(statistic: str, tails: str, *, runs: int = 2000, resamples: int = 200, seed: int = 0) -> pd.DataFrame:
    """The coverage of each of :data:`METHODS` for one statistic and one kind of passage effect, at every window
    count of :data:`COUNTS`: columns windows, statistic, tails, method, estimand, truth, coverage (NaN where the
    method gives no interval: the median's below 6 windows), width (the median interval width), runs.

    The runs of a smaller count are the first windows of the runs of the largest (a nested design: the same
    passages, fewer of them)."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic: must be one of {list(STATISTICS)}, got {statistic!r}")
    if tails not in TAILS:
        raise ValueError(f"tails: must be one of {list(TAILS)}, got {tails!r}")
    if not (isinstance(runs, int) and runs >= 10):
        raise ValueError(f"runs: must be an integer >= 10, got {runs!r}")
    rng = np.random.default_rng([seed, list(STATISTICS).index(statistic), list(TAILS).index(tails)])
    draw, stat = TAILS[tails], STATISTICS[statistic]
    truth_values = stat(rng, draw(rng, (TRUTH_WINDOWS, 1)))
    truth = {"mean": float(truth_values.mean()), "median": float(np.median(truth_values))}
    values = stat(rng, draw(rng, (runs, max(COUNTS), 1)))
    rows = []
    for n in COUNTS:
        v = values[:, :n]
        found = {"t": _t(v), "percentile": _percentile(v, rng, resamples), "median": _median(v)}
        for method, (lo, hi) in found.items():
            estimand = "median" if method == "median" else "mean"
            true = truth[estimand]
            has = np.isfinite(lo)
            cover = float(np.mean((lo <= true) & (true <= hi))) if has.all() else np.nan
            width = float(np.median(hi - lo)) if has.all() else np.nan
            rows.append((n, statistic, tails, method, estimand, true, cover, width, runs))
    columns = ["windows", "statistic", "tails", "method", "estimand", "truth", "coverage", "width", "runs"]
    return pd.DataFrame(rows, columns=columns)


def table(*, runs: int = 2000, resamples: int = 200, seed: int = 0) -> pd.DataFrame:
    """:func:`coverage` for every statistic of :data:`STATISTICS` and every kind of passage of :data:`TAILS`, one
    table (seeded: the same call gives the same table)."""
    parts = [
        coverage(statistic, tails, runs=runs, resamples=resamples, seed=seed)
        for statistic in STATISTICS
        for tails in TAILS
    ]
    return pd.concat(parts, ignore_index=True)
