"""Algorithm 3's decision: the two-sample KS test, its level, and the rule that picks the critical N.

The paper's Algorithm 3 compares, at each N, the heads' mean d~ with their mean of the expectation E by a two-sample
Kolmogorov-Smirnov test; the critical N is the first N at which the test cannot tell the two apart, its p-value at or
above the KS level. Everything that decides a critical N reads that decision here: the search of
:mod:`attnlimits.experiments.critical`, the long-context study's N grid, the alternative normalisers' grid.

- :func:`ks_test`          scipy's ``ks_2samp`` (default method): ``(statistic, p-value)``.
- :func:`ks_pvalue`        the same p-value, memoised on the exact integer statistic D n m and the sizes, so that a
                           search or a bootstrap that meets the same (D n m, n, m) again does not call scipy.
- :func:`ks_pvalue_rows`   the p-values of many pairs of samples (one per row) in one vectorised pass.
- :func:`reaches`          the decision: p >= level (the samples cannot be told apart).
- :func:`first_reaching`   the first N of a grid whose p-value reaches the level.

This module imports nothing of the library, so a study that decides a critical N keeps its results-cache key to
the code it computes with (:func:`attnlimits.infra.cache.dependencies`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["KS_LEVEL", "KS_LEVELS", "first_reaching", "ks_pvalue", "ks_pvalue_rows", "ks_test", "reaches"]

#: Algorithm 3's KS level: the level every critical N of the book is decided at (Figure 2c's claims included).
KS_LEVEL = 0.05
#: The KS levels a run of the experiments searches a critical N at: Algorithm 3's, then the paper's text's (the
#: paper states 0.05 in Algorithm 3 and 0.01 in its text; the book shows both).
KS_LEVELS = (KS_LEVEL, 0.01)

#: p-value by (D n m, n, m); see :func:`ks_pvalue`.
_P_CACHE: dict[tuple[int, int, int], float] = {}


def ks_test(d_means, e_means) -> tuple[float, float]:
    """Algorithm 3's decision statistic: the two-sample KS test between the heads' mean d~ and their mean E,
    ``(statistic, p-value)``; the critical N is the first N whose p-value :func:`reaches` the level (the two cannot
    be told apart)."""
    import warnings

    from scipy.stats import ks_2samp

    with warnings.catch_warnings():  # scipy notes when it falls back to the asymptotic p-value
        warnings.simplefilter("ignore", RuntimeWarning)
        res = ks_2samp(np.asarray(d_means), np.asarray(e_means))
    return float(res.statistic), float(res.pvalue)


def reaches(p, level):
    """Algorithm 3's decision on a p-value (or an array of them): True where ``p >= level``, the KS test cannot
    tell the two samples apart at that level."""
    return p >= level


def first_reaching(tests: Iterable[tuple[int, float]], level: float) -> tuple[int, float] | None:
    """The first ``(N, p-value)`` of ``tests`` (pairs in increasing N) whose p-value :func:`reaches` ``level``, or
    None when none does. ``tests`` may be lazy (a generator computing each p-value): it is read up to the answer."""
    for n, p in tests:
        if reaches(p, level):
            return n, p
    return None


def _scaled_ks_rows(d: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The two-sample KS statistic times ``n * m`` of each row pair of ``d`` (R, n) and ``e`` (R, m), as exact
    integers (R,): the largest |m #{d <= v} - n #{e <= v}| over the rows' values v, read at the last of each run of
    tied values in the rows' merged order (no NaN)."""
    n, m = d.shape[1], e.shape[1]
    both = np.concatenate([d, e], axis=1)
    order = np.argsort(both, axis=1)  # the order within a run of ties does not matter: only its end is read
    merged = np.take_along_axis(both, order, axis=1)
    steps = np.cumsum(np.where(order < n, m, -n), axis=1)
    last = np.ones(merged.shape, bool)
    last[:, :-1] = merged[:, 1:] != merged[:, :-1]
    return np.abs(np.where(last, steps, 0)).max(axis=1)


def _memoised_p(scaled: int, d: np.ndarray, e: np.ndarray) -> float:
    """The p-value of ``ks_test(d, e)`` whose KS statistic times ``len(d) * len(e)`` is ``scaled``, from
    :data:`_P_CACHE` when that (statistic, sizes) was seen before."""
    key = (int(scaled), len(d), len(e))
    if key not in _P_CACHE:
        _P_CACHE[key] = ks_test(d, e)[1]
    return _P_CACHE[key]


def ks_pvalue(d, e) -> float:
    """The p-value of :func:`ks_test` (scipy's ``ks_2samp``, default method),
    memoised.

    The p-value depends only on the statistic D and the sample sizes n, m; D n m is an integer, computed here
    exactly with numpy, and scipy is called on the samples themselves only the first time a (D n m, n, m) is seen.
    Samples with a NaN are passed to scipy every time (nothing to key on).
    """
    d, e = np.asarray(d, float), np.asarray(e, float)
    if len(d) == 0 or len(e) == 0:
        raise ValueError(f"d, e: both samples must be non-empty, got sizes {len(d)} and {len(e)}")
    if np.isnan(d).any() or np.isnan(e).any():
        return ks_test(d, e)[1]
    return _memoised_p(_scaled_ks_rows(d[None], e[None])[0], d, e)


def ks_pvalue_rows(d: np.ndarray, e: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """:func:`ks_pvalue` of ``d[i, keep[i]]`` against ``e[i, keep[i]]`` for every row i (R, H), NaN where a row
    keeps no head: the rows that keep the same heads in one vectorised pass (a row with a NaN on its own)."""
    p = np.full(len(d), np.nan)
    groups: dict[bytes, list[int]] = {}
    for i, pattern in enumerate(np.packbits(keep, axis=1)):
        groups.setdefault(pattern.tobytes(), []).append(i)
    for rows in map(np.array, groups.values()):
        pattern = keep[rows[0]]
        if not pattern.any():
            continue
        dg, eg = d[np.ix_(rows, pattern)], e[np.ix_(rows, pattern)]
        finite = ~(np.isnan(dg).any(axis=1) | np.isnan(eg).any(axis=1))
        for i in np.flatnonzero(~finite):
            p[rows[i]] = ks_pvalue(dg[i], eg[i])
        for i, scaled in zip(np.flatnonzero(finite), _scaled_ks_rows(dg[finite], eg[finite]), strict=True):
            p[rows[i]] = _memoised_p(scaled, dg[i], eg[i])
    return p
