"""The median over windows and its exact order-statistic interval: the interval every experimental verdict of the book
is decided on.

A run's windows (passages of text) are the independent units. Each gives one number (its median head, its slope in
L, its critical N), and a verdict reads their median with the interval from the k-th smallest to the k-th largest
value. The count of windows below the median over passages is Binomial(n, 1/2) whatever the passages' distribution,
so that interval holds the median with probability at least its stated level under any tails: skewed, heavy, one
rare passage far from the others, or a discrete statistic with ties (where it covers more). The intervals of
:mod:`attnlimits.infra.statistics` estimate a mean over passages instead, and :mod:`attnlimits.infra.coverage`
measures how far short they fall there.

- :func:`order_ranks`      which order statistics bound the interval for n values, and its exact level.
- :func:`median_interval`  the median of per-window values and its interval.
- :func:`over_units`       the same for a statistic of window multiplicities (the form the claims' statistics take):
                           evaluated on each window alone.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np

from attnlimits.infra.statistics import Interval, check_resampling

__all__ = ["METHOD", "median_interval", "order_ranks", "over_units"]

#: How an :class:`attnlimits.infra.statistics.Interval` of this module names its method.
METHOD = "median"


def order_ranks(n: int, level: float = 0.95) -> tuple[int, float] | None:
    """``(k, coverage)``: the k-th smallest and k-th largest of ``n`` values bound the median's interval at
    ``level``, and ``coverage`` is its exact level (1 - 2 P(Binomial(n, 1/2) < k)); k is the largest that keeps it
    at least ``level``. None when even the smallest and largest value cover less (fewer than 6 values at 95 %)."""
    from scipy.stats import binom

    check_resampling(1, level)
    if not (isinstance(n, int | np.integer) and n >= 1):
        raise ValueError(f"n: must be an integer >= 1, got {n!r}")
    k = int(binom.ppf((1 - level) / 2, n, 0.5))  # the largest k with P(B < k) <= (1 - level) / 2, or one above
    while k >= 1 and 1 - 2 * binom.cdf(k - 1, n, 0.5) < level:
        k -= 1
    return None if k < 1 else (k, float(1 - 2 * binom.cdf(k - 1, n, 0.5)))


def median_interval(values: Sequence[float], level: float = 0.95) -> Interval:
    """The median of a per-unit value (one number per window: a window's median head, its slope in L, its critical
    N) and its distribution-free interval: the k-th smallest to the k-th largest value (:func:`order_ranks`).

    It holds the median over passages with probability at least ``level`` whatever the distribution of the windows'
    values. Its price: it is wider than a t interval where the windows are normal (at 6-8 windows it is the
    smallest to the largest), it reads the median passage rather than the mean, and with fewer than 6 windows no
    pair of values covers 95 %: lo = hi = NaN. NaN values are left out (a warning says how many); ``units`` counts
    the windows used. With one value: method "none", lo = hi = value."""
    x = np.asarray(values, float).reshape(-1)
    if np.isinf(x).any():
        raise ValueError("values: must be finite or NaN, got an infinite value")
    if np.isnan(x).all():
        raise ValueError(f"values: needs at least one value that is not NaN, got {len(x)} values")
    if np.isnan(x).any():
        warnings.warn(f"{int(np.isnan(x).sum())} of {len(x)} values are NaN: left out", RuntimeWarning, 2)
        x = x[~np.isnan(x)]
    value = float(np.median(x))
    if len(x) == 1:
        return Interval(value, value, value, 1, "none")
    ranks = order_ranks(len(x), level)
    if ranks is None:
        return Interval(value, np.nan, np.nan, len(x), METHOD)
    x = np.sort(x)
    k = ranks[0]
    return Interval(value, float(x[k - 1]), float(x[len(x) - k]), len(x), METHOD)


def over_units(units: int | Sequence, statistic: Callable[[np.ndarray], np.ndarray], level: float = 0.95) -> Interval:
    """:func:`median_interval` of ``statistic`` on each unit alone. ``units``: how many units (windows), or their
    labels; ``statistic(counts)`` takes unit multiplicities, one multiset per row (2-D), and returns one value per
    row, the form of the claims' statistics (a row with a single 1 is that window alone). Where no unit has a
    finite value, value, lo and hi are NaN and ``units`` is 0."""
    n = units if isinstance(units, int | np.integer) else len(units)
    if n < 1:
        raise ValueError(f"units: needs at least one unit, got {units!r}")
    values = np.asarray(statistic(np.eye(n)), float).reshape(-1)
    if len(values) != n:
        raise ValueError(f"statistic: must return one value per row of counts, got {len(values)} for {n} rows")
    with np.errstate(invalid="ignore"):
        values = np.where(np.isinf(values), np.nan, values)  # a window whose own number is undefined (log of 0)
    if np.isnan(values).all():  # no window has the number (e.g. a length where none reached the level)
        return Interval(np.nan, np.nan, np.nan, 0, METHOD)
    return median_interval(values, level)
