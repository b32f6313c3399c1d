"""What every claim shares: the bands of the rules, :class:`Claim`, and each window's statistic over its heads
(:class:`PerWindow`), whose median over windows a claim reads, with its interval over windows."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from attnlimits.experiments.summaries import Summaries
from attnlimits.infra import medians, statistics
from attnlimits.infra.verdicts import REPRODUCTION

#: Added to the paper's side of a claim measured with token 0 removed (``exclude_sink=True``).
SINK_VARIANT = " (book's variant: token 0 removed; the paper never removes it)"

#: The bands the rules compare intervals with.
LINEAR = (0.8, 1.2)  # a log-log slope of about 1
CONVERGED = (2 / 3, 3 / 2)  # a ratio of about 1
FRACTION = (0.03, 0.12)  # "fewer than 6 % of the tokens", within a factor of 2
PLATEAU = (0.8, 1.25)  # a change by at most a quarter
SATURATION = (0.70, 0.85)  # Figure 3's level
INVERSE_T = (-1.2, -0.8)  # g ~ 1/T
DROP = (30, 300)  # about two orders of magnitude


@dataclass(frozen=True)
class Claim:
    """One claim of the paper and our measurement of it: the number the verdict reads (``value``) and its 95 %
    interval over windows (``value_lo``, ``value_hi``; NaN where the rule reads no number), how many windows it
    rests on (``units``; None where not stated), and its ``kind``: :data:`REPRODUCTION`, a rule that can fail on the
    data, or :data:`SANITY_CHECK`, a statement true by proof or by construction (verdict "holds" or "violated"),
    never counted as a reproduction."""

    key: str
    figure: str
    paper: str
    measured: str
    verdict: str
    rule: str
    value: float = math.nan
    value_lo: float = math.nan
    value_hi: float = math.nan
    units: int | None = None
    kind: str = REPRODUCTION

    def as_dict(self) -> dict:
        """The claim as a plain dict (a table row)."""
        return asdict(self)


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x (the exponent of a power law)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def log_slopes(x, y) -> np.ndarray:
    """:func:`loglog_slope` of each row of ``y`` (..., len(x)) against ``x``, in one product."""
    lx = np.log(np.asarray(x, float))
    lx = lx - lx.mean()
    ly = np.log(np.asarray(y, float))
    return ((ly - ly.mean(axis=-1, keepdims=True)) @ lx) / (lx @ lx)


#: How every claim reads its windows: each window's own number (its slope, ratio or critical N, computed on that
#: window alone), then the median over windows with its exact order-statistic interval
#: (:func:`attnlimits.infra.medians.median_interval`). It covers at least 95 % whatever the passages do: heavy or
#: skewed tails, one rare passage far from the others, a discrete statistic (:mod:`attnlimits.infra.coverage`
#: measures it at the book's window counts). The jackknife t of the mean over windows, the book's method until
#: 2026-12-06, covers 73-76 % of a window's median head or 95th percentile with one rare heavy passage in 12 and
#: 83-90 % under a skewed tail at 8 and 12 windows (51-70 % for a discrete critical N).
METHOD = medians.METHOD
#: How the claims' texts name an interval's method (:attr:`attnlimits.infra.statistics.Interval.method`).
METHOD_WORDS = {
    "bca": "BCa",
    "percentile": "percentile",
    "t": "jackknife t",
    "median": "median and order-statistic interval",
    "none": "no interval",
}


def windows_text(n) -> str:
    """How many windows, in words (e.g. 4 windows, 1 window)."""
    return f"{n} window{'s' * (n != 1)}"


def stated(iv: statistics.Interval) -> str:
    """How an interval was made: "jackknife t over 32 windows" ("1 window, no interval")."""
    if iv.units <= 1:
        return f"{windows_text(iv.units)}, no interval"
    return f"{METHOD_WORDS.get(iv.method, iv.method)} over {windows_text(iv.units)}"


class PerWindow:
    """One statistic over each window's heads (``stat``, a column of :data:`attnlimits.experiments.summaries.STATS`:
    the median ``q50`` by default) of each quantity, at each level of ``at`` (L, N or T), from a run's summaries
    (:class:`attnlimits.experiments.summaries.Summaries`).

    The windows are the units (passages of text): a window's heads are summarised first, then the windows read
    together, so an interval over windows rests on independent units. ``means(counts, q)`` is the mean over the
    windows of a multiset (``counts``: multiplicities, one row per multiset) of each window's statistic of ``q``,
    per level; a row with one window is that window alone, which is how :meth:`interval` gets each window's own
    number."""

    def __init__(self, table: pd.DataFrame, at: str, stat: str = "q50"):
        if table.empty:
            raise ValueError("table: has no rows")
        self.stat = stat
        self.windows = sorted(int(w) for w in pd.unique(table["window"]))
        self.levels = np.array(sorted(set(table[at].tolist())))
        self._values = {}
        for quantity, t in table.groupby("quantity", sort=False):
            wide = t.pivot_table(index="window", columns=at, values=stat, aggfunc="first", dropna=False)
            self._values[quantity] = wide.reindex(index=self.windows, columns=self.levels).to_numpy(float)

    @property
    def units(self) -> list:
        """The windows, what the bootstrap resamples."""
        return self.windows

    @property
    def quantities(self) -> list[str]:
        return list(self._values)

    def per_window(self, quantity: str) -> np.ndarray:
        """Each window's statistic of ``quantity`` (windows, levels)."""
        if quantity not in self._values:
            raise ValueError(f"quantity: {quantity!r} is not summarised here; there are {self.quantities}")
        return self._values[quantity]

    def means(self, counts, quantity: str) -> np.ndarray:
        """The mean over the windows drawn of each window's statistic of ``quantity``, per level (..., levels);
        ``counts``: window multiplicities (..., windows), None for each window once. A window without a value at a
        level (NaN) is left out of that level's mean."""
        v = self.per_window(quantity)
        c = np.ones(len(self.windows)) if counts is None else np.asarray(counts, float)
        finite = np.isfinite(v)
        total = c @ finite
        with np.errstate(invalid="ignore", divide="ignore"):
            return (c @ np.where(finite, v, 0.0)) / np.where(total > 0, total, np.nan)

    def mean(self, counts, quantity: str, level) -> np.ndarray:
        """:meth:`means` at one level of ``at``."""
        return self.means(counts, quantity)[..., int(np.flatnonzero(self.levels == level)[0])]

    def interval(self, statistic: Callable[[np.ndarray], np.ndarray], *, ratio: bool = False) -> statistics.Interval:
        """The median over windows of ``statistic`` on each window alone (it takes one row of window
        multiplicities per evaluation) and its 95 % interval over windows (:func:`interval_over_windows`;
        ``ratio``: a positive ratio, on the log scale)."""
        return interval_over_windows(self.units, statistic, ratio=ratio)

    def medians(self, quantity: str) -> np.ndarray:
        """The median over windows of each window's statistic of ``quantity``, per level (a window without a value
        at a level is left out there): the line the figures draw, the number the claims read."""
        v = self.per_window(quantity)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a level no window has: NaN
            return np.nanmedian(v, axis=0)


def interval_over_windows(units, statistic: Callable[[np.ndarray], np.ndarray], *, ratio: bool = False):
    """The median over ``units`` (windows) of ``statistic`` on each window alone (batch: one value per row of window
    multiplicities; a row with a single 1 is that window) and its 95 % interval (:data:`METHOD`). ``ratio=True`` for
    a positive ratio: the median and interval of its logarithm, mapped back by exp (the same order statistics,
    except that a median between two windows is their geometric mean)."""
    if not ratio:
        return medians.over_units(units, statistic)

    def log_of(counts):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(statistic(counts))

    iv = medians.over_units(units, log_of)
    return iv._replace(value=math.exp(iv.value), lo=math.exp(iv.lo), hi=math.exp(iv.hi))


def as_summaries(res):
    """``res`` as the analysis reads it: a :class:`attnlimits.experiments.summaries.Summaries` as it is, a per-head
    :class:`attnlimits.experiments.Results` summarised per window (:meth:`Summaries.of`)."""
    return res if isinstance(res, Summaries) else Summaries.of(res)


def show_interval(value: float, lo: float, hi: float, digits: int = 2) -> str:
    """``value [lo, hi]``."""
    return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def run_windows(res) -> int | None:
    """How many windows the run measured (its provenance), None where it does not say."""
    windows = res.provenance.get("windows")
    return len(windows) if isinstance(windows, list | tuple) else None


def make_claim(
    res,
    key,
    figure,
    paper,
    measured,
    verdict,
    rule,
    value=math.nan,
    lo=math.nan,
    hi=math.nan,
    *,
    units: int | None = None,
    kind: str = REPRODUCTION,
) -> Claim:
    """A :class:`Claim`, its paper side marked when the run removed token 0; ``units`` (default: the run's windows;
    0 for a claim resting on none) is named in the measured text when the text does not name its windows."""
    if res.provenance.get("exclude_sink"):
        paper += SINK_VARIANT
    units = run_windows(res) if units is None else int(units)
    if units and "window" not in measured:
        measured += f"; {windows_text(units)}"
    return Claim(key, figure, paper, measured, verdict, rule, float(value), float(lo), float(hi), units, kind)


#: How the claims name the tokens Algorithm 4 measured on (its table's ``tokens`` column).
TOKEN_NAMES = {"value": "value vectors", "embedding": "input token embeddings", "residual": "residual stream"}
