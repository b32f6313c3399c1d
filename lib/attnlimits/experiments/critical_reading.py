"""Algorithm 3's critical N read from a run's per-head table (``critical_heads``): recomputed on any multiset of
windows or subset of heads, its bootstrap draws over windows and the interval read from them, and its spread over
subsets of heads.

What the search of :mod:`attnlimits.experiments.critical` computed is the computation; this module is the analysis
of it: it imports the book's statistics, which the computed tables (and so the results cache's key on them) do not.

- :func:`critical_from_heads`     the critical N recomputed from ``critical_heads`` on any multiset of windows or
                                  subset of heads.
- :func:`critical_draws`          the critical N of every bootstrap draw of windows (the draws of
                                  :func:`attnlimits.infra.statistics.bootstrap_units`), and
                                  :func:`critical_intervals` the interval read from them.
- :func:`critical_head_subsets`   its spread over random subsets of heads the size of GPT-2's 144;
                                  :func:`one_head_per_group` the heads of the check for grouped-query attention.

Every function is seeded: the same call gives the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from attnlimits.infra.ks import ks_pvalue_rows, reaches
from attnlimits.infra.statistics import RESAMPLES, SEED, check_resampling, draw_counts

__all__ = [
    "critical_draws",
    "critical_from_heads",
    "critical_head_subsets",
    "critical_intervals",
    "one_head_per_group",
    "with_intervals",
]


#: The columns of ``critical_heads``: each window's per-head means of d~ and of one reading (``expected``) at every
#: (L, N) the search evaluated, and the rows they average.
_HEAD_KEYS = ("window", "layer", "head", "L", "N", "reading", "rows", "d_tilde", "expected")


class _Scan:
    """One L of ``critical_heads`` as arrays: per reading and evaluated N (ascending), rows-weighted sums per window
    and head.

    ``rows[r][k][w, h]`` is the rows of head h in window w at the k-th N of reading r (0 where the head has none),
    ``d_tilde[r][k]`` and ``readings[r][k]`` the rows-weighted sums of d~ and of the reading, so that the pooled
    value of a multiset of windows with multiplicities ``c`` is ``c @ d_tilde[r][k] / c @ rows[r][k]`` (the
    rows-weighted mean over the windows drawn). Each reading keeps its own d~: a reading may average other rows.
    """

    def __init__(self, heads: pd.DataFrame, L: int, readings: Sequence[str]):
        missing = sorted(set(_HEAD_KEYS) - set(heads.columns))
        if missing:
            raise ValueError(f"heads: missing columns {missing}; critical_heads has {list(_HEAD_KEYS)}")
        unknown = [r for r in readings if r not in _readings(heads)]
        if unknown:
            raise ValueError(f"reading: {unknown} not among the table's readings {_readings(heads)}")
        t = heads[heads["L"] == L]
        if t.empty:
            raise ValueError(f"L: {L!r} is not in the table; it has L = {sorted(set(heads['L']))}")
        self.windows = sorted(pd.unique(heads["window"]).tolist())
        self.heads = sorted(set(zip(t["layer"], t["head"], strict=True)))
        columns = pd.MultiIndex.from_tuples(self.heads, names=["layer", "head"])
        self.N = sorted(int(n) for n in pd.unique(t["N"]))
        index = pd.MultiIndex.from_product([self.N, self.windows], names=["N", "window"])
        shape = (len(self.N), len(self.windows), len(self.heads))
        self.rows, self.d_tilde, self.readings = {}, {}, {}
        for r in readings:
            wide = t[t["reading"] == r].pivot(index=["N", "window"], columns=["layer", "head"])

            def block(name: str, wide=wide) -> np.ndarray:
                return np.nan_to_num(wide[name].reindex(index=index, columns=columns).to_numpy(float).reshape(shape))

            rows = block("rows")
            self.rows[r] = rows
            self.d_tilde[r] = np.where(rows > 0, rows * block("d_tilde"), 0.0)
            self.readings[r] = np.where(rows > 0, rows * block("expected"), 0.0)

    def counts(self, windows: Iterable | None) -> np.ndarray:
        """Multiplicity of each of the table's windows in ``windows`` (None: each once)."""
        if windows is None:
            return np.ones(len(self.windows))
        position = {w: i for i, w in enumerate(self.windows)}
        unknown = [w for w in windows if w not in position]
        if unknown:
            raise ValueError(f"windows: {unknown} not in the table's windows {self.windows}")
        return np.bincount([position[w] for w in windows], minlength=len(self.windows)).astype(float)

    def mask(self, head_index: Iterable | None) -> np.ndarray:
        """Which of the table's heads ``head_index`` (``(layer, head)`` pairs; None: all) keeps."""
        if head_index is None:
            return np.ones(len(self.heads), bool)
        wanted = {tuple(int(v) for v in pair) for pair in head_index}
        unknown = sorted(wanted - set(self.heads))
        if unknown:
            raise ValueError(f"head_index: (layer, head) pairs {unknown[:5]} are not in the table at this L")
        return np.array([h in wanted for h in self.heads])

    def critical(self, reading: str, levels: Sequence[float], counts: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The smallest evaluated N with p >= level, for each row of ``counts`` (D, W: multiplicities of the
        windows, one draw per row) and each of ``levels``: an int array (D, len(levels)), -1 where no evaluated N
        reaches the level. N where a draw keeps no head with rows are skipped for that draw; the scan stops at the N
        that settles the last draw and level."""
        counts = np.atleast_2d(counts)
        found = np.full((len(counts), len(levels)), -1)
        for k, n in enumerate(self.N):
            open_ = np.flatnonzero((found < 0).any(axis=1))
            if not len(open_):
                break
            c = counts[open_]
            total = c @ self.rows[reading][k][:, mask]
            keep = total > 0
            safe = np.where(keep, total, 1.0)
            d = (c @ self.d_tilde[reading][k][:, mask]) / safe
            e = (c @ self.readings[reading][k][:, mask]) / safe
            p = ks_pvalue_rows(d, e, keep)
            for i, level in enumerate(levels):
                hit = open_[(found[open_, i] < 0) & reaches(p, level)]
                found[hit, i] = n
        return found


def _readings(heads: pd.DataFrame) -> list[str]:
    return list(pd.unique(heads["reading"])) if "reading" in heads.columns else []


def critical_from_heads(
    heads: pd.DataFrame,
    L: int,
    reading: str,
    level: float,
    *,
    windows: Sequence | None = None,
    head_index: Iterable | None = None,
) -> int | None:
    """Algorithm 3's critical N at ``L``, recomputed from the per-head table ``critical_heads``.

    Each head's d~ and ``reading`` (e.g. "E") are pooled over ``windows`` (labels of the table's windows; None:
    all of them once; repeats allowed, a window listed twice weighs twice, as in a bootstrap draw) as the
    rows-weighted mean; heads without rows there are left out, and ``head_index`` (``(layer, head)`` pairs) keeps
    a subset. Returns the smallest N the search evaluated (ascending) whose KS p-value
    (:func:`attnlimits.infra.ks.ks_pvalue`) is >= ``level``, or None when none is. On all windows this is the
    search's critical N whenever p rises with N over the evaluated N (the search's N also has p(N - 1) < level).
    """
    scan = _Scan(heads, L, [reading])
    n = int(scan.critical(reading, [level], scan.counts(windows), scan.mask(head_index))[0, 0])
    return None if n < 0 else n


def _interval(values: np.ndarray, level: float) -> tuple[int, int]:
    """The percentile interval of ``values``, its ends taken among the values themselves."""
    lo = np.percentile(values, 50 * (1 - level), method="lower")
    hi = np.percentile(values, 50 * (1 + level), method="higher")
    return int(lo), int(hi)


def critical_draws(
    heads: pd.DataFrame,
    levels: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    readings: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The critical N of every bootstrap draw of windows, for every L and reading of ``critical_heads`` and every
    KS level in ``levels``: columns L, reading, ks_level, draw, critical_N.

    Draw i takes the windows of draw i of :func:`attnlimits.infra.statistics.bootstrap_windows` and
    :func:`attnlimits.infra.statistics.bootstrap_units` (the same draws for every L, reading and KS level, so a
    statistic across L, such as the growth of the critical N, can be read per draw) and gives the critical N of
    :func:`critical_from_heads`; a draw where no evaluated N reaches the KS level counts as N = L ("no N
    reached"). ``readings``: default every reading of the table.
    """
    check_resampling(resamples, 0.5)
    levels = [float(v) for v in levels]
    readings = _readings(heads) if readings is None else list(readings)
    parts = []
    for L in sorted(pd.unique(heads["L"]).tolist()):
        scan = _Scan(heads, L, readings)
        mask = scan.mask(None)
        distinct, inverse = np.unique(draw_counts(len(scan.windows), resamples, seed), axis=0, return_inverse=True)
        for reading in readings:
            found = scan.critical(reading, levels, distinct, mask)[inverse.reshape(-1)]
            for i, ks_level in enumerate(levels):
                values = np.where(found[:, i] < 0, L, found[:, i])
                keys = {"L": L, "reading": reading, "ks_level": ks_level}
                parts.append(pd.DataFrame({**keys, "draw": range(resamples), "critical_N": values}))
    return pd.concat(parts, ignore_index=True)


def critical_intervals(
    heads: pd.DataFrame,
    levels: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = 0.95,
    readings: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The bootstrap interval over windows of the critical N, for every L and reading of ``critical_heads`` and
    every KS level in ``levels``.

    Columns: L, reading, ks_level, critical_N_lo, critical_N_hi: the percentile interval (at ``level``) of the
    critical N of :func:`critical_draws`; units: the number of windows it rests on; method: "percentile" ("none"
    with one window, where lo = hi). A draw where no evaluated N reaches the KS level counts as N = L ("no N
    reached"), so ``critical_N_hi == L`` says that some draws found none. The interval's ends are critical N of
    draws, so it is only as fine as the N the search evaluated; on such a coarse, discrete statistic (often the
    same N in most draws) BCa's corrections are not defined, so it stays the percentile interval.
    ``readings``: default every reading of the table.
    """
    check_resampling(resamples, level)
    draws = critical_draws(heads, levels, resamples=resamples, seed=seed, readings=readings)
    units = int(pd.unique(heads["window"]).size)
    method = "percentile" if units > 1 else "none"
    rows = [
        (L, reading, ks_level, *_interval(group.critical_N.to_numpy(), level), units, method)
        for (L, reading, ks_level), group in draws.groupby(["L", "reading", "ks_level"], sort=False)
    ]
    columns = ["L", "reading", "ks_level", "critical_N_lo", "critical_N_hi", "units", "method"]
    table = pd.DataFrame(rows, columns=columns)
    return table.astype({"critical_N_lo": "Int64", "critical_N_hi": "Int64"})


def critical_head_subsets(
    heads: pd.DataFrame,
    L: int,
    reading: str,
    level: float,
    *,
    size: int = 144,
    draws: int = 200,
    seed: int = SEED,
) -> tuple[float, int, int]:
    """``(median, lo, hi)`` of the critical N at ``L`` over ``draws`` random subsets of ``size`` heads.

    The KS test compares as many per-head means as the model has heads; this asks what a model with ``size`` heads
    (GPT-2's 144, the paper's) would see, on the same windows. Each subset is drawn without replacement (seeded);
    a subset where no N reaches the level counts as N = L. lo and hi: the 95 % percentile interval, its ends among
    the subsets' critical N.
    """
    scan = _Scan(heads, L, [reading])
    if not 1 <= size <= len(scan.heads):
        raise ValueError(f"size: must be between 1 and the {len(scan.heads)} heads of the table, got {size!r}")
    check_resampling(draws, 0.95)
    rng = np.random.default_rng(seed)
    counts = scan.counts(None)
    values = []
    for _ in range(draws):
        mask = np.zeros(len(scan.heads), bool)
        mask[rng.choice(len(scan.heads), size=size, replace=False)] = True
        n = int(scan.critical(reading, [level], counts, mask)[0, 0])
        values.append(L if n < 0 else n)
    lo, hi = _interval(np.array(values), 0.95)
    return float(np.median(values)), lo, hi


def one_head_per_group(heads: pd.DataFrame, n_heads: int, n_kv_heads: int, seed: int = 0) -> list[tuple[int, int]]:
    """A ``head_index`` with one query head per key/value group of every layer of ``heads`` (seeded choice).

    With grouped-query attention, query head h reads key/value head h // (n_heads // n_kv_heads) (the layout of
    Hugging Face's ``repeat_kv``), so heads of one group share their value vectors and are not independent
    samples; keeping one per group is the sensitivity check.
    """
    if n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads: must be >= 1 and divide n_heads = {n_heads}, got {n_kv_heads!r}")
    if heads["head"].max() >= n_heads:
        raise ValueError(f"n_heads: the table has head {heads['head'].max()}, more than n_heads = {n_heads} allow")
    group = n_heads // n_kv_heads
    rng = np.random.default_rng(seed)
    return [
        (int(layer), g * group + int(rng.integers(group)))
        for layer in sorted(pd.unique(heads["layer"]).tolist())
        for g in range(n_kv_heads)
    ]


def with_intervals(critical: pd.DataFrame, heads: pd.DataFrame, levels: Sequence[float], *,
                   resamples: int = RESAMPLES, seed: int = SEED) -> pd.DataFrame:  # fmt: skip
    """The table ``critical`` of a run with its bootstrap interval over windows (:func:`critical_intervals`, from the
    per-window head means ``heads``) beside each critical N. A run's tables are computed without it: the interval
    is analysis, read when the run is."""
    intervals = critical_intervals(heads, levels, resamples=resamples, seed=seed)
    return critical.merge(intervals, on=["L", "reading", "ks_level"], how="left", validate="one_to_one")
