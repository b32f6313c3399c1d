"""The Experiments part's figures, in the paper's layout, drawn from a :class:`attnlimits.experiments.Results`.

Each function returns a matplotlib figure and never computes anything but summaries of the tables: medians and
spreads across heads and windows (every head of every window is one sample), maxima over heads where the paper
takes them. Two kinds of uncertainty are drawn apart: the spread across heads (a 10-90 % band) says how heads
differ; the 95 % interval over windows (:func:`window_interval`, the jackknife t; error bars, or a band where a
figure shows no spread across heads) says how far a median would move on other text. :func:`save_all` writes
them all as PNG and SVG (what ``attnlimits analyze`` does).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter

from attnlimits.experiments.paper_claims import FRACTION, G_QUANTILE, g_quantile
from attnlimits.experiments.paper_claims.rules import METHOD
from attnlimits.infra import statistics
from attnlimits.infra.ks import KS_LEVEL
from attnlimits.infra.statistics import RESAMPLES, SEED

__all__ = [
    "FIGURES",
    "critical_figure",
    "critical_readings_figure",
    "distance_vs_length",
    "distance_vs_n",
    "drawable",
    "gradient_figure",
    "readings_vs_length",
    "readings_vs_n",
    "save_all",
    "separability_figure",
    "spread",
    "window_interval",
]

_SERIES = {
    "d_tilde": ("true distance $\\tilde d$", "C0"),
    "E": ("expectation $E$ (random $I_N$)", "C2"),
    "d_max": ("bound $d_{\\max}$ (Theorem 1)", "C3"),
}

#: d~ and every reading of the expectation (columns of the distance table and readings of Algorithm 3).
_READINGS = {
    "d_tilde": ("true distance $\\tilde d$", "C0"),
    "E": ("$E$: book's reconstruction", "C2"),
    "E_mc": ("$E_{mc}$: exact expectation (Monte Carlo)", "C1"),
    "E_full": ("$E_{full}$: inner factor 1", "C4"),
    "E_perm": ("$E_{perm}$: permutation null", "C5"),
}

_HEADS_LABEL = "heads 10-90 % (band)"
_WINDOWS_LABEL = "median, 95 % over windows (bars)"


def spread(table: pd.DataFrame, by: str, column: str, lo: float = 0.1, hi: float = 0.9) -> pd.DataFrame:
    """Median and the ``lo``-``hi`` quantile band of ``column`` across heads and windows, per value of ``by``."""
    g = table.groupby(by)[column]
    return pd.DataFrame({"median": g.median(), "lo": g.quantile(lo), "hi": g.quantile(hi), "mean": g.mean()})


def window_interval(table: pd.DataFrame, by: str, column: str) -> pd.DataFrame:
    """Per value of ``by``: the median of ``column`` over every head of every window, and its 95 % interval over
    windows: the jackknife t (:func:`attnlimits.infra.statistics.bootstrap_units` with the claims' method,
    :data:`attnlimits.experiments.paper_claims.rules.METHOD`), which covers at the book's window counts where the
    bootstrap's BCa falls short. Columns value, lo, hi.

    The interval says how far the curve would move on other text (other windows); the band of :func:`spread` is
    the spread across heads, a different thing. With one window (or identical windows) lo = value = hi. There is
    no such interval for a maximum over heads: its draws never exceed it, so it sits at the end of its own.
    """
    if column not in table.columns:
        raise ValueError(f"column: {column!r} is not a column of the table; it has {list(table.columns)}")
    rows = {}
    for key, part in table[["window", by, column]].dropna(subset=[column]).groupby(by):
        windows, labels = pd.factorize(part["window"], sort=True)
        values = part[column].to_numpy(float)

        def median_on(counts: np.ndarray, windows=windows, values=values) -> float:
            """The median over the rows of the windows drawn, each window as often as ``counts`` says."""
            return float(np.median(np.repeat(values, np.asarray(counts)[windows].astype(int))))

        iv = statistics.bootstrap_units(list(labels), median_on, method=METHOD, resamples=RESAMPLES, seed=SEED)
        rows[key] = (iv.value, iv.lo, iv.hi)
    return pd.DataFrame.from_dict(rows, orient="index", columns=["value", "lo", "hi"]).rename_axis(by)


def _window_bars(ax, s: pd.DataFrame, color, x=None, label=None):
    """Error bars from ``s``'s lo to hi (centred on their midpoint, so they show exactly [lo, hi] even where an
    interval of percentiles leaves out the value)."""
    keep = s[["lo", "hi"]].notna().all(axis=1)
    s = s[keep]
    x = s.index if x is None else np.asarray(x)[keep.to_numpy()]
    mid, half = (s.lo + s.hi) / 2, (s.hi - s.lo) / 2
    return ax.errorbar(x, mid, yerr=half, fmt="none", ecolor=color, elinewidth=2, capsize=4, label=label)


def _band(ax, table, by, column, label, color):
    """The median across heads x windows (line), its 10-90 % band (shaded) and the median's 95 % interval over
    windows (error bars)."""
    s = spread(table, by, column)
    ax.plot(s.index, s["median"], "o-", color=color, label=label)
    ax.fill_between(s.index, s["lo"], s["hi"], color=color, alpha=0.2, lw=0)
    _window_bars(ax, window_interval(table, by, column), color)


def _shade_key(label: str) -> tuple:
    """A grey legend key for a shaded band."""
    return Patch(facecolor="gray", alpha=0.3), label


def _bars_key(label: str) -> tuple:
    """A grey legend key for error bars."""
    return Line2D([], [], color="gray", marker="|", ms=12, mew=2, ls="none"), label


def _legend(ax, *keys: tuple, **legend) -> None:
    """The legend of the plotted series, then ``keys`` ((handle, label) pairs saying what shading and bars are)."""
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles=[*handles, *(k[0] for k in keys)], labels=[*labels, *(k[1] for k in keys)], **legend)


def _series(table: pd.DataFrame, series: dict) -> dict:
    """The entries of ``series`` that ``table`` has a measured value of (d_max: only the visible counting)."""
    return {c: v for c, v in series.items() if c in table.columns and table[c].notna().any()}


def _distance_figure(table, by: str, ticks, xlabel: str, title: str, ax):
    fig, ax = _axes(ax)
    for col, (label, color) in _series(table, _SERIES).items():
        _band(ax, table, by, col, label, color)
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="distance", title=title)
    _log_ticks(ax, ticks)
    _legend(ax, _shade_key(_HEADS_LABEL), _bars_key(_WINDOWS_LABEL), fontsize="small")
    return fig


def distance_vs_length(res, ax=None, counting: str = "visible"):
    """Figure 2a: d~, E and d_max against L at the preset's fixed N.

    Line: the median over heads x windows; band: its 10-90 % spread across heads x windows ("heads 10-90 %");
    error bars: the 95 % interval over windows (jackknife t) of that median ("median, 95 % over windows").
    ``counting``: the distance table's counting of a row's tokens ("visible" or "row"; d_max only for visible).
    """
    p = res.preset
    return _distance_figure(
        res.alg1(counting), "L", p.alg1_L, "sequence length $L$", f"Distance vs length (N = {p.alg1_N})", ax
    )


def distance_vs_n(res, ax=None, counting: str = "visible"):
    """Figure 2b: d~, E and d_max against N at the preset's fixed L (line, band and error bars as
    :func:`distance_vs_length`)."""
    p = res.preset
    return _distance_figure(
        res.alg2(counting), "N", p.alg2_N, "selected tokens $N$", f"Distance vs N (L = {p.alg2_L})", ax
    )


def _readings_figure(table, by: str, ticks, xlabel: str, title: str, ax):
    fig, ax = _axes(ax)
    for col, (label, color) in _series(table, _READINGS).items():
        s = window_interval(table, by, col)
        ax.plot(s.index, s["value"], "o-", ms=4, color=color, label=label)
        ax.fill_between(s.index, s["lo"], s["hi"], color=color, alpha=0.25, lw=0)
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="distance (median over heads)", title=title)
    _log_ticks(ax, ticks)
    _legend(ax, _shade_key("median, 95 % over windows (band)"), fontsize="small")
    return fig


def readings_vs_length(res, counting: str = "visible", ax=None):
    """Figure 2a beside every reading of the expectation: d~, E (the book's reconstruction of Eq. 10), E_mc (the
    exact expectation over random N-subsets, Monte Carlo), E_full (Eq. 10 with its inner factor 1) and E_perm (the
    permutation null) against L at the preset's fixed N, under ``counting``.

    Line: the median over heads x windows; band: its 95 % interval over windows (jackknife t; not the spread across
    heads). Readings the run did not measure are left out.
    """
    p = res.preset
    title = f"Readings of the expectation vs length (N = {p.alg1_N}, {counting} counting)"
    return _readings_figure(res.alg1(counting), "L", p.alg1_L, "sequence length $L$", title, ax)


def readings_vs_n(res, counting: str = "visible", ax=None):
    """Figure 2b beside every reading of the expectation: as :func:`readings_vs_length`, against N at the preset's
    fixed L."""
    p = res.preset
    title = f"Readings of the expectation vs N (L = {p.alg2_L}, {counting} counting)"
    return _readings_figure(res.alg2(counting), "N", p.alg2_N, "selected tokens $N$", title, ax)


def _critical_rows(res, reading: str | None = None, level: float | None = None) -> pd.DataFrame:
    """The rows of ``res.critical`` at ``reading`` and KS ``level`` (None: all), checking both exist."""
    crit = res.critical
    if reading is not None:
        readings = list(pd.unique(crit["reading"]))
        if reading not in readings:
            raise ValueError(f"reading: must be one of the run's readings {readings}, got {reading!r}")
        crit = crit[crit["reading"] == reading]
    if level is not None:
        levels = sorted(pd.unique(crit["ks_level"]).tolist())
        if not any(np.isclose(level, v) for v in levels):
            raise ValueError(f"level: must be one of the run's KS levels {levels}, got {level!r}")
        crit = crit[np.isclose(crit["ks_level"], level)]
    return crit


def _interval_of(t: pd.DataFrame, scale=1.0) -> pd.DataFrame:
    """``t``'s critical_N_lo and critical_N_hi (divided by ``scale``) as float columns lo, hi indexed like t."""
    return pd.DataFrame(
        {"lo": t.critical_N_lo.astype(float) / scale, "hi": t.critical_N_hi.astype(float) / scale}, index=t.index
    )


def critical_figure(res, reading: str = "E", ax=None):
    """Figure 2c: the critical N against L at each KS level for one ``reading`` of the expectation ("E": the book's
    reconstruction), with its 95 % bootstrap interval over windows as error bars, the paper's 0.06 L and N = L - 1.
    """
    fig, ax = _axes(ax)
    rows = _critical_rows(res, reading)
    crit = rows.dropna(subset=["critical_N"])
    for i, ((level, windows), t) in enumerate(crit.groupby(["ks_level", "windows"])):
        t = t.sort_values("L")
        color = f"C{i}"
        label = f"critical N, KS level {level:g} (windows {windows})"
        ax.plot(t.L, t.critical_N.astype(float), "o-", color=color, label=label)
        _window_bars(ax, _interval_of(t), color, x=t.L.to_numpy(float))
    lengths = np.array(sorted(res.critical.L.unique()), dtype=float)
    ax.plot(lengths, 0.06 * lengths, "k--", label="paper: 0.06 L")
    ax.plot(lengths, lengths - 1, ":", color="gray", label="N = L - 1 (largest possible)")
    _critical_axes(ax, lengths, "critical $N$", f"Critical N: KS cannot tell $\\tilde d$ from {reading}")
    return fig


def _critical_axes(ax, lengths, ylabel: str, title: str) -> None:
    """The log-log axes of a critical-N figure against L, with its legend (the window bars' key included)."""
    ax.set(xscale="log", yscale="log", xlabel="sequence length $L$", ylabel=ylabel, title=title)
    _log_ticks(ax, lengths, lambda v: str(int(v)))
    _legend(ax, _bars_key("95 % over windows (bars)"), fontsize="small")


def critical_readings_figure(res, level: float = KS_LEVEL, ax=None):
    """Figure 2c for every reading: critical N / L against L at KS ``level``, each reading with its 95 % bootstrap
    interval over windows as error bars; dashed: the paper's 0.06, shaded: the band [0.03, 0.12] the book's verdict
    on Figure 2c accepts as a constant fraction like the paper's."""
    fig, ax = _axes(ax)
    crit = _critical_rows(res, level=level)
    ax.axhspan(*FRACTION, color="gray", alpha=0.15, label=f"verdict band [{FRACTION[0]:g}, {FRACTION[1]:g}]")
    ax.axhline(0.06, color="k", ls="--", label="paper: 0.06")
    for reading, t in crit.groupby("reading", sort=False):
        color = _READINGS.get(reading, (None, None))[1]
        t = t.dropna(subset=["critical_N"]).sort_values("L")
        if t.empty:
            continue
        line = ax.plot(t.L, t.critical_N.astype(float) / t.L, "o-", color=color, label=reading)[0]
        _window_bars(ax, _interval_of(t, t.L.to_numpy(float)), line.get_color(), x=t.L.to_numpy(float))
    lengths = np.array(sorted(crit.L.unique()), dtype=float)
    _critical_axes(ax, lengths, "critical $N / L$", f"Critical N per reading of the expectation (KS level {level:g})")
    return fig


def separability_figure(res, ax=None, tokens: str = "value"):
    """Figure 3: box plots of N_s/N per N over heads x windows, with Theorem 2's bounds (median over heads) and the
    95 % interval over windows (jackknife t) of the median N_s/N (error bars beside each box).

    ``tokens``: which tokens the table measured, where it has a ``tokens`` column (default the value vectors, the
    paper's reading); a table without that column is drawn whole.
    """
    fig, ax = _axes(ax)
    t = res.separability
    if "tokens" in t.columns:
        kinds = sorted(pd.unique(t["tokens"]))
        if tokens not in kinds:
            raise ValueError(f"tokens: must be one of the table's tokens {kinds}, got {tokens!r}")
        t = t[t["tokens"] == tokens]
    ns = sorted(t.N.unique())
    x = np.arange(len(ns))
    ax.boxplot([t[t.N == n].ns_frac for n in ns], positions=x, widths=0.5, showfliers=False)
    med = t.groupby("N")[["lower", "upper"]].median()
    ax.plot(x, med.loc[ns, "upper"], "v--", color="C3", label="upper bound (as reconstructed), median")
    ax.plot(
        x,
        med.loc[ns, "lower"].clip(lower=0),
        "^--",
        color="C2",
        label="lower bound (Theorem 2, clipped at 0), median",
    )
    interval = window_interval(t, "N", "ns_frac").loc[ns]
    _window_bars(ax, interval, "C0", x=x + 0.34, label="median $N_s/N$, 95 % over windows")
    ax.axhspan(0.70, 0.85, color="gray", alpha=0.15, label="paper: plateau 0.70-0.85")
    ax.set_xticks(x, [str(n) for n in ns])
    ax.set(
        xlabel="selected tokens $N$",
        ylabel="$N_s / N$",
        ylim=(-0.02, 1.02),
        title=f"Distinguishable fraction (L = {int(t.L.iloc[0])})",
    )
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)  # below: boxes stay clear
    return fig


def gradient_figure(res, scaling: str = "model", ax=None):
    """Figure 4: g(T, eps) against T as the paper computes it, per eps: the largest over heads of each head's g
    pooled over its rows in every window (:meth:`attnlimits.experiments.Results.g_max`; a maximum has no valid
    interval, so none is drawn). At the smallest eps, the quantile over heads Figure 4's rules are decided on
    (:func:`attnlimits.experiments.paper_claims.g_quantile`, the 95th percentile) with its 95 % interval over
    windows (jackknife t, shaded). The printed min{1/(4T), sqrt 2} dashed, the book's sharp 1/(2T)
    solid grey."""
    fig, ax = _axes(ax)
    res.g(scaling=scaling)  # checks the scaling
    t = res.gradient[res.gradient.logit_scaling == scaling]
    temps = np.array(sorted(t["T"].unique()))
    for i, eps in enumerate(sorted(t.eps.unique())):
        top = res.g_max(eps, scaling)
        label = f"paper's g: max over heads, eps = {eps:g} (no valid interval)"
        ax.plot(top.index, top.values, "o-", ms=3, color=f"C{i}", label=label)
        if i == 0:
            q = g_quantile(res, eps, scaling)
            label = f"{100 * G_QUANTILE:g}th percentile over heads, eps = {eps:g}"
            ax.plot(q.index, q["value"], "s-", ms=2, lw=1, color=f"C{i}", alpha=0.8, label=label)
            label = f"its 95 % interval ({q.attrs['stated']})"
            ax.fill_between(q.index, q["lo"], q["hi"], color=f"C{i}", alpha=0.25, lw=0, label=label)
    printed = np.minimum(1 / (4 * temps), np.sqrt(2))
    ax.plot(temps, printed, "k--", lw=1.5, alpha=0.7, label="paper: min{1/(4T), $\\sqrt{2}$} (printed)")
    ax.plot(temps, 1 / (2 * temps), "-", lw=1, color="gray", label="book: 1/(2T) (sharp, every eps)")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="temperature $T$",
        ylabel="$g(T, \\varepsilon)$",
        title=f"Sensitivity vs temperature (logits: {'model-scaled' if scaling == 'model' else 'raw q.k'})",
    )
    ax.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)  # below the curves
    return fig


FIGURES = {
    "fig2a_distance_vs_length": distance_vs_length,
    "fig2a_readings": readings_vs_length,
    "fig2b_distance_vs_n": distance_vs_n,
    "fig2b_readings": readings_vs_n,
    "fig2c_critical_n": critical_figure,
    "fig2c_readings": critical_readings_figure,
    "fig3_separability": separability_figure,
    "fig4_gradient": gradient_figure,
}


def drawable(res) -> list[str]:
    """The names of :data:`FIGURES` the run has the tables for (Figure 4 needs Algorithm 5's, which a run on
    attention weights without their logits lacks)."""
    return [name for name in FIGURES if name != "fig4_gradient" or not res.gradient.empty]


def save_all(res, folder) -> list[Path]:
    """Draw every figure of :data:`FIGURES` the run has the tables for (:func:`drawable`) and save each as PNG and
    SVG in ``folder``; returns the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in drawable(res):
        draw = FIGURES[name]
        fig = draw(res)
        for ext in ("png", "svg"):
            path = folder / f"{name}.{ext}"
            fig.savefig(path, bbox_inches="tight", dpi=150)
            paths.append(path)
        plt.close(fig)
    return paths


def _log_ticks(ax, ticks, fmt=str) -> None:
    """Label the x axis at ``ticks`` only (no minor labels such as 2 x 10^1 crowding them)."""
    ax.set_xticks(ticks, [fmt(v) for v in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())


def _axes(ax):
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        return fig, ax
    return ax.figure, ax
