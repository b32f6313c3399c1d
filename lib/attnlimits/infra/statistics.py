"""How much a run's numbers would move with other text: intervals from resampling the run's windows.

A run measures every head on a few windows of text. The windows are the independent units (rows and heads of one
window share its tokens), so every interval here comes from the bootstrap over windows: draw as many windows as the
run has, with replacement, recompute the number, and read the percentile interval of the draws. A window drawn
twice counts twice. With a single window there is nothing to resample and an interval collapses onto its value.

Also here: a fast, exact KS p-value (:func:`ks_pvalue`), Algorithm 3's critical N recomputed from the per-head
table ``critical_heads`` (:func:`critical_from_heads`), its bootstrap interval (:func:`critical_intervals`), its
spread over random subsets of heads the size of GPT-2's 144 (:func:`critical_head_subsets`), and a paired test of
two per-head readings (:func:`wilcoxon_heads`). Every function is seeded: the same call gives the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "RESAMPLES",
    "SEED",
    "ks_test",
    "bootstrap_windows",
    "critical_draws",
    "critical_from_heads",
    "critical_head_subsets",
    "critical_intervals",
    "ks_pvalue",
    "one_head_per_group",
    "wilcoxon_heads",
]

#: The bootstrap behind every interval of the book: draws over windows and their seed (fixed, so an interval, and
#: the verdict decided on it, repeats exactly).
RESAMPLES = 1000
SEED = 0

#: The columns of ``critical_heads``: each window's per-head means of d~ and of one reading (``expected``) at every
#: (L, N) the search evaluated, and the rows they average.
_HEAD_KEYS = ("window", "layer", "head", "L", "N", "reading", "rows", "d_tilde", "expected")


def _check_resampling(resamples: int, level: float) -> None:
    if not (isinstance(resamples, int | np.integer) and resamples >= 1):
        raise ValueError(f"resamples: must be an integer >= 1, got {resamples!r}")
    if not 0 < level < 1:
        raise ValueError(f"level: must lie strictly between 0 and 1 (e.g. 0.95), got {level!r}")


def _draws(windows: Sequence, resamples: int, seed: int) -> list[tuple[int, ...]]:
    """``resamples`` bootstrap draws of the positions of ``windows``, each sorted (a multiset of positions)."""
    rng = np.random.default_rng(seed)
    k = len(windows)
    return [tuple(sorted(row)) for row in rng.integers(0, k, size=(resamples, k)).tolist()]


def bootstrap_windows(
    table: pd.DataFrame,
    statistic: Callable[[pd.DataFrame], float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """``(value, lo, hi)``: ``statistic`` on ``table`` and its percentile interval from the bootstrap over windows.

    ``table`` has a ``window`` column. Each of ``resamples`` draws takes as many windows as the table has, with
    replacement; a window drawn twice appears twice, its copies relabelled as distinct windows (0, 1, ... in the
    order of the draw), so a ``groupby("window")`` inside ``statistic`` still sees them apart. ``statistic`` must
    not depend on the order of the rows or on the window labels: it is evaluated once per distinct multiset of
    windows drawn (with 4 windows there are only 35), which gives the same numbers faster. ``lo`` and ``hi`` are
    the ``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles of the draws. With a single window, lo = hi = value.
    """
    _check_resampling(resamples, level)
    if "window" not in table.columns:
        raise ValueError(f"table: needs a 'window' column, has {list(table.columns)}")
    value = float(statistic(table))
    windows = list(pd.unique(table["window"]))
    if len(windows) <= 1:
        return value, value, value
    parts = [table[table["window"] == w] for w in windows]
    seen: dict[tuple[int, ...], float] = {}
    values = np.empty(resamples)
    for i, draw in enumerate(_draws(windows, resamples, seed)):
        if draw not in seen:
            resampled = pd.concat([parts[j].assign(window=copy) for copy, j in enumerate(draw)], ignore_index=True)
            seen[draw] = float(statistic(resampled))
        values[i] = seen[draw]
    lo, hi = np.percentile(values, [50 * (1 - level), 50 * (1 + level)])
    return value, float(lo), float(hi)


#: p-value by (D n m, n, m); see :func:`ks_pvalue`.
_P_CACHE: dict[tuple[int, int, int], float] = {}


def _scaled_ks(d: np.ndarray, e: np.ndarray) -> int:
    """The two-sample KS statistic times ``len(d) * len(e)``, an exact integer (d and e sorted)."""
    both = np.concatenate([d, e])
    i = np.searchsorted(d, both, side="right").astype(np.int64)
    j = np.searchsorted(e, both, side="right").astype(np.int64)
    return int(np.abs(i * len(e) - j * len(d)).max())


def ks_pvalue(d, e) -> float:
    """The p-value of :func:`ks_test` (scipy's ``ks_2samp``, default method),
    memoised.

    The p-value depends only on the statistic D and the sample sizes n, m; D n m is an integer, computed here
    exactly with numpy, and scipy is called on the samples themselves only the first time a (D n m, n, m) is seen.
    Samples with a NaN are passed to scipy every time (nothing to key on).
    """
    d, e = np.sort(np.asarray(d, float)), np.sort(np.asarray(e, float))
    if len(d) == 0 or len(e) == 0:
        raise ValueError(f"d, e: both samples must be non-empty, got sizes {len(d)} and {len(e)}")
    if np.isnan(d).any() or np.isnan(e).any():
        return ks_test(d, e)[1]
    key = (_scaled_ks(d, e), len(d), len(e))
    if key not in _P_CACHE:
        _P_CACHE[key] = ks_test(d, e)[1]
    return _P_CACHE[key]


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

    def p_values(self, reading: str, counts: np.ndarray, mask: np.ndarray):
        """Yield ``(N, p)`` at each evaluated N in ascending order (N where no kept head has rows are skipped)."""
        for k, n in enumerate(self.N):
            total = counts @ self.rows[reading][k]
            keep = mask & (total > 0)
            if keep.any():
                d = (counts @ self.d_tilde[reading][k])[keep] / total[keep]
                e = (counts @ self.readings[reading][k])[keep] / total[keep]
                yield n, ks_pvalue(d, e)

    def critical(self, reading: str, levels: Sequence[float], counts: np.ndarray, mask: np.ndarray) -> list:
        """The smallest evaluated N with p >= level, for each of ``levels`` (None where none); stops at the N that
        settles the last of them."""
        found: list[int | None] = [None] * len(levels)
        for n, p in self.p_values(reading, counts, mask):
            for i, level in enumerate(levels):
                if found[i] is None and p >= level:
                    found[i] = n
            if all(f is not None for f in found):
                break
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
    a subset. Returns the smallest N the search evaluated (ascending) whose KS p-value (:func:`ks_pvalue`) is >=
    ``level``, or None when none is. On all windows this is the search's critical N whenever p rises with N over
    the evaluated N (the search's N also has p(N - 1) < level).
    """
    scan = _Scan(heads, L, [reading])
    return scan.critical(reading, [level], scan.counts(windows), scan.mask(head_index))[0]


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

    Draw i takes the windows of :func:`bootstrap_windows`'s draw i (the same draws for every L, reading and KS
    level, so a statistic across L, such as the growth of the critical N, can be read per draw) and gives the
    critical N of :func:`critical_from_heads`; a draw where no evaluated N reaches the KS level counts as N = L
    ("no N reached"). ``readings``: default every reading of the table.
    """
    _check_resampling(resamples, 0.5)
    levels = [float(v) for v in levels]
    readings = _readings(heads) if readings is None else list(readings)
    parts = []
    for L in sorted(pd.unique(heads["L"]).tolist()):
        scan = _Scan(heads, L, readings)
        mask = scan.mask(None)
        found: dict[tuple[int, ...], dict[str, list]] = {}
        draws = _draws(scan.windows, resamples, seed)
        for draw in draws:
            if draw not in found:
                counts = np.bincount(draw, minlength=len(scan.windows)).astype(float)
                found[draw] = {r: scan.critical(r, levels, counts, mask) for r in readings}
        for reading in readings:
            for i, ks_level in enumerate(levels):
                values = [L if (n := found[d][reading][i]) is None else n for d in draws]
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
    critical N of :func:`critical_draws`. A draw where no evaluated N reaches the KS level counts as N = L ("no N
    reached"), so ``critical_N_hi == L`` says that some draws found none. The interval's ends are critical N of
    draws, so it is only as fine as the N the search evaluated. ``readings``: default every reading of the table.
    """
    _check_resampling(resamples, level)
    draws = critical_draws(heads, levels, resamples=resamples, seed=seed, readings=readings)
    rows = [
        (L, reading, ks_level, *_interval(group.critical_N.to_numpy(), level))
        for (L, reading, ks_level), group in draws.groupby(["L", "reading", "ks_level"], sort=False)
    ]
    table = pd.DataFrame(rows, columns=["L", "reading", "ks_level", "critical_N_lo", "critical_N_hi"])
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
    _check_resampling(draws, 0.95)
    rng = np.random.default_rng(seed)
    counts = scan.counts(None)
    values = []
    for _ in range(draws):
        mask = np.zeros(len(scan.heads), bool)
        mask[rng.choice(len(scan.heads), size=size, replace=False)] = True
        n = scan.critical(reading, [level], counts, mask)[0]
        values.append(L if n is None else n)
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


def wilcoxon_heads(table: pd.DataFrame, a: str = "d_tilde", b: str = "E") -> tuple[float, float, int]:
    """``(statistic, p_value, n)``: scipy's Wilcoxon signed-rank test on the per-head differences ``a - b``.

    ``table`` holds one row per (window, layer, head) with columns ``a`` and ``b``: the distance table at one (L, N,
    counting), ``b`` one of its readings (e.g. "E"), or ``critical_heads`` at one (L, N, reading) with
    ``b="expected"`` (each reading there has its own d~, averaged over the rows that reading read). Each head's
    difference is pooled over the windows (rows-weighted where the table has ``rows``, heads without rows left
    out). n: the number of heads tested.
    """
    from scipy.stats import wilcoxon

    missing = [c for c in (a, b) if c not in table.columns]
    if missing:
        raise ValueError(f"a, b: {missing} are not columns of the table; it has {list(table.columns)}")
    if table.duplicated(["window", "layer", "head"]).any():
        keys = ", ".join(k for k in ("L", "N", "counting", "reading") if k in table.columns)
        raise ValueError(f"table: more than one row per (window, layer, head); select one ({keys}) first")
    rows = table["rows"].to_numpy(float) if "rows" in table.columns else np.ones(len(table))
    t = pd.DataFrame({"layer": table["layer"], "head": table["head"], "w": rows})
    t["wd"] = np.where(rows > 0, rows * (table[a] - table[b]).to_numpy(float), 0.0)
    pooled = t.groupby(["layer", "head"])[["w", "wd"]].sum()
    pooled = pooled[pooled.w > 0]
    diff = pooled.wd / pooled.w
    res = wilcoxon(diff.to_numpy())
    return float(res.statistic), float(res.pvalue), len(diff)


def ks_test(d_means, e_means) -> tuple[float, float]:
    """Algorithm 3's decision statistic: the two-sample KS test between the heads' mean d~ and their mean E,
    ``(statistic, p-value)``; the critical N is the first N with p >= the level (the two cannot be told apart)."""
    import warnings

    from scipy.stats import ks_2samp

    with warnings.catch_warnings():  # scipy notes when it falls back to the asymptotic p-value
        warnings.simplefilter("ignore", RuntimeWarning)
        res = ks_2samp(np.asarray(d_means), np.asarray(e_means))
    return float(res.statistic), float(res.pvalue)
