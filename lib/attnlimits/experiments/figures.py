"""The Experiments part's figures, in the paper's layout, drawn from a run's per-window summaries
(:class:`attnlimits.experiments.summaries.Summaries`; a per-head :class:`attnlimits.experiments.Results` is
summarised first).

Each function returns a matplotlib figure and never computes anything but the summaries' medians: per window, a
statistic over its heads (a median, a 10-90 % range, a maximum where the paper takes one); then the median over windows,
the number the claims read. Two kinds of uncertainty are drawn apart: the spread across heads (a band: 10-90 % of a
window's heads, median over windows) says how heads differ; the 95 % interval over windows (:func:`window_interval`,
order statistics; error bars, or a band where a figure shows no spread across heads) says how far the curve would move
on other text. :func:`save_all` writes them all as PNG and SVG (what ``attnlimits analyze`` does).
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
from attnlimits.experiments.paper_claims.rules import PerWindow, as_summaries, interval_over_windows
from attnlimits.infra.ks import KS_LEVEL

__all__ = [
    "FIGURES",
    "critical_figure",
    "critical_over_windows",
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

_HEADS_LABEL = "10-90 % of a window's heads, median over windows (band)"
_WINDOWS_LABEL = "median, 95 % over windows (bars)"


def spread(table: pd.DataFrame, by: str, quantity: str, lo: str = "q10", hi: str = "q90") -> pd.DataFrame:
    """Per value of ``by``: the median over windows of each window's median (``median``), ``lo`` and ``hi``
    quantiles (columns of :data:`attnlimits.experiments.summaries.STATS`) and mean over its heads of ``quantity``,
    from a table of summaries over heads (one row per window and value of ``by``)."""
    t = _quantity_rows(table, quantity)
    stats = {"median": "q50", "lo": lo, "hi": hi, "mean": "mean"}
    columns = {name: PerWindow(t, by, stat).medians(quantity) for name, stat in stats.items()}
    return pd.DataFrame(columns, index=pd.Index(PerWindow(t, by).levels, name=by))


def window_interval(table: pd.DataFrame, by: str, quantity: str) -> pd.DataFrame:
    """Per value of ``by``: the median over windows of each window's median over its heads of ``quantity``, and its
    95 % interval over windows: the order statistics of the claims
    (:func:`attnlimits.experiments.paper_claims.rules.interval_over_windows`), which covers at the book's window
    counts. Columns value, lo, hi.

    The interval says how far the curve would move on other text (other windows); the band of :func:`spread` is
    the spread across a window's heads, a different thing. With one window (or identical windows) lo = value = hi.
    """
    pw = PerWindow(_quantity_rows(table, quantity), by)
    rows = {}
    for i, level in enumerate(pw.levels):
        iv = pw.interval(lambda counts, i=i: pw.means(counts, quantity)[..., i])
        rows[level] = (iv.value, iv.lo, iv.hi)
    return pd.DataFrame.from_dict(rows, orient="index", columns=["value", "lo", "hi"]).rename_axis(by)


def _quantity_rows(table: pd.DataFrame, quantity: str) -> pd.DataFrame:
    """The rows of ``quantity`` in a table of summaries, checking it is there."""
    held = sorted(set(table["quantity"]))
    if quantity not in held:
        raise ValueError(f"quantity: {quantity!r} is not summarised in the table; it has {held}")
    return table[table["quantity"] == quantity]


def _window_bars(ax, s: pd.DataFrame, color, x=None, label=None):
    """Error bars from ``s``'s lo to hi (centred on their midpoint, so they show exactly [lo, hi])."""
    keep = s[["lo", "hi"]].notna().all(axis=1)
    s = s[keep]
    x = s.index if x is None else np.asarray(x)[keep.to_numpy()]
    mid, half = (s.lo + s.hi) / 2, (s.hi - s.lo) / 2
    return ax.errorbar(x, mid, yerr=half, fmt="none", ecolor=color, elinewidth=2, capsize=4, label=label)


def _band(ax, table, by, quantity, label, color):
    """The median over a window's heads, its median over windows (line), the 10-90 % of a window's heads, median
    over windows (shaded) and the line's 95 % interval over windows (error bars)."""
    s = spread(table, by, quantity)
    ax.plot(s.index, s["median"], "o-", color=color, label=label)
    ax.fill_between(s.index, s["lo"], s["hi"], color=color, alpha=0.2, lw=0)
    _window_bars(ax, window_interval(table, by, quantity), color)


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
    """The entries of ``series`` that ``table`` has a measured median of (d_max: only the visible counting)."""
    held = set(table.loc[table["q50"].notna(), "quantity"])
    return {q: v for q, v in series.items() if q in held}


def _distance_figure(table, by: str, ticks, xlabel: str, title: str, ax):
    fig, ax = _axes(ax)
    for quantity, (label, color) in _series(table, _SERIES).items():
        _band(ax, table, by, quantity, label, color)
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="distance (median over a window's heads)", title=title)
    _log_ticks(ax, ticks)
    _legend(ax, _shade_key(_HEADS_LABEL), _bars_key(_WINDOWS_LABEL), fontsize="small")
    return fig


def distance_vs_length(res, ax=None, counting: str = "visible"):
    """Figure 2a: d~, E and d_max against L at the preset's fixed N.

    Line: the median over a window's heads, its median over windows; band: 10-90 % of a window's heads, median over
    windows (the spread across heads); error bars: the line's 95 % interval over windows (order statistics).
    ``counting``: the distance table's counting of a row's tokens ("visible" or "row"; d_max only for visible).
    """
    res = as_summaries(res)
    p = res.preset
    return _distance_figure(
        res.alg1(counting), "L", p.alg1_L, "sequence length $L$", f"Distance vs length (N = {p.alg1_N})", ax
    )


def distance_vs_n(res, ax=None, counting: str = "visible"):
    """Figure 2b: d~, E and d_max against N at the preset's fixed L (line, band and error bars as
    :func:`distance_vs_length`)."""
    res = as_summaries(res)
    p = res.preset
    return _distance_figure(
        res.alg2(counting), "N", p.alg2_N, "selected tokens $N$", f"Distance vs N (L = {p.alg2_L})", ax
    )


def _readings_figure(table, by: str, ticks, xlabel: str, title: str, ax):
    fig, ax = _axes(ax)
    for quantity, (label, color) in _series(table, _READINGS).items():
        s = window_interval(table, by, quantity)
        ax.plot(s.index, s["value"], "o-", ms=4, color=color, label=label)
        ax.fill_between(s.index, s["lo"], s["hi"], color=color, alpha=0.25, lw=0)
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="distance (median over a window's heads)", title=title)
    _log_ticks(ax, ticks)
    _legend(ax, _shade_key("median over windows, 95 % over windows (band)"), fontsize="small")
    return fig


def readings_vs_length(res, counting: str = "visible", ax=None):
    """Figure 2a beside every reading of the expectation: d~, E (the book's reconstruction of Eq. 10), E_mc (the
    exact expectation over random N-subsets, Monte Carlo), E_full (Eq. 10 with its inner factor 1) and E_perm (the
    permutation null) against L at the preset's fixed N, under ``counting``.

    Line: the median over a window's heads, its median over windows; band: its 95 % interval over windows (order
    statistics; not the spread across heads). Readings the run did not measure are left out.
    """
    res = as_summaries(res)
    p = res.preset
    title = f"Readings of the expectation vs length (N = {p.alg1_N}, {counting} counting)"
    return _readings_figure(res.alg1(counting), "L", p.alg1_L, "sequence length $L$", title, ax)


def readings_vs_n(res, counting: str = "visible", ax=None):
    """Figure 2b beside every reading of the expectation: as :func:`readings_vs_length`, against N at the preset's
    fixed L."""
    res = as_summaries(res)
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


def critical_over_windows(crit: pd.DataFrame) -> pd.DataFrame:
    """Per L of ``crit`` (each window's own critical N for one reading at one KS level, a row per window): the median
    over windows of the critical N, a window where no evaluated N reached the level counting as N = L (``value``),
    its 95 % interval over windows (order statistics; ``lo``, ``hi``), and how many windows reached the level
    (``reached``) of how many (``windows``). Lengths where no window reached it are left out."""
    rows = {}
    for L, t in crit.sort_values("window").groupby("L"):
        found = t["critical_N"].astype("Float64")
        if found.isna().all():
            continue
        n = found.fillna(L).to_numpy(float)
        iv = interval_over_windows(list(t["window"]), lambda counts, n=n: (counts @ n) / counts.sum(axis=-1))
        rows[L] = (iv.value, iv.lo, iv.hi, int(found.notna().sum()), len(t))
    columns = ["value", "lo", "hi", "reached", "windows"]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns).rename_axis("L")


def _unreached(s: pd.DataFrame) -> str:
    """A legend's note where some windows found no critical N at some length (:func:`critical_over_windows`)."""
    if (s["reached"] == s["windows"]).all():
        return ""
    fewest, windows = int(s["reached"].min()), int(s["windows"].max())
    return f" (some L: {fewest} of {windows} windows; the rest count as N = L)"


def critical_figure(res, reading: str = "E", ax=None):
    """Figure 2c: the critical N against L at each KS level for one ``reading`` of the expectation ("E": the book's
    reconstruction): each window's own critical N (Algorithm 3 on that window's heads), median over windows (a
    window where no evaluated N reached the level counts as N = L; a length where none did is not drawn), with its
    95 % interval over windows (order statistics) as error bars; the paper's 0.06 L and N = L - 1."""
    res = as_summaries(res)
    fig, ax = _axes(ax)
    rows = _critical_rows(res, reading)
    for i, (level, t) in enumerate(rows.groupby("ks_level")):
        s = critical_over_windows(t)
        if s.empty:
            continue
        label = f"critical N, KS level {level:g}: a window's own, median over {t.window.nunique()} windows"
        label += _unreached(s)
        ax.plot(s.index, s["value"], "o-", color=f"C{i}", label=label)
        _window_bars(ax, s, f"C{i}")
    lengths = np.array(sorted(res.critical.L.unique()), dtype=float)
    ax.plot(lengths, 0.06 * lengths, "k--", label="paper: 0.06 L")
    ax.plot(lengths, lengths - 1, ":", color="gray", label="N = L - 1 (largest possible)")
    _critical_axes(ax, lengths, "critical $N$", f"Critical N: KS cannot tell $\\tilde d$ from {reading}")
    return fig


def _critical_axes(ax, lengths, ylabel: str, title: str) -> None:
    """The log-log axes of a critical-N figure against L, with its legend (the window bars' key included)."""
    ax.set(xscale="log", yscale="log", xlabel="sequence length $L$", ylabel=ylabel, title=title)
    _log_ticks(ax, lengths, lambda v: str(int(v)))
    key = _bars_key("95 % over windows (bars)")
    _legend(ax, key, fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)  # below the lines


def critical_readings_figure(res, level: float = KS_LEVEL, ax=None):
    """Figure 2c for every reading: critical N / L against L at KS ``level``, each window's own critical N, median
    over windows (as :func:`critical_figure`), each reading with its 95 % interval over windows as error bars;
    dashed: the paper's 0.06, shaded: the band [0.03, 0.12] the book's verdict on Figure 2c accepts as a constant
    fraction like the paper's."""
    res = as_summaries(res)
    fig, ax = _axes(ax)
    crit = _critical_rows(res, level=level)
    ax.axhspan(*FRACTION, color="gray", alpha=0.15, label=f"verdict band [{FRACTION[0]:g}, {FRACTION[1]:g}]")
    ax.axhline(0.06, color="k", ls="--", label="paper: 0.06")
    for reading, t in crit.groupby("reading", sort=False):
        found = critical_over_windows(t)
        if found.empty:
            continue
        s = found[["value", "lo", "hi"]].div(found.index.to_numpy(float), axis=0)
        color = _READINGS.get(reading, (None, None))[1]
        line = ax.plot(s.index, s["value"], "o-", color=color, label=reading + _unreached(found))[0]
        _window_bars(ax, s, line.get_color())
    lengths = np.array(sorted(crit.L.unique()), dtype=float)
    title = f"Critical N per reading of the expectation (KS level {level:g}; a window's own, median)"
    _critical_axes(ax, lengths, "critical $N / L$", title)
    return fig


def separability_figure(res, ax=None, tokens: str = "value"):
    """Figure 3: per N, box plots of N_s/N over a window's heads, median over windows (box: the quartiles, line:
    the median, whiskers: the 5th and 95th percentiles, each the median over windows of that window's), Theorem 2's
    bounds (the median over a window's heads, median over windows) and the 95 % interval over windows (order
    statistics) of the median N_s/N (error bars beside each box).

    ``tokens``: which tokens Algorithm 4 measured on (default the value vectors, the paper's reading; or
    "embedding").
    """
    res = as_summaries(res)
    fig, ax = _axes(ax)
    t = res.alg4(tokens)
    stats = {s: PerWindow(t, "N", s).medians("ns_frac") for s in ("q05", "q25", "q50", "q75", "q95")}
    medians = PerWindow(t, "N")
    ns = medians.levels
    x = np.arange(len(ns))
    boxes = [
        {"label": str(n), "whislo": stats["q05"][i], "q1": stats["q25"][i], "med": stats["q50"][i],
         "q3": stats["q75"][i], "whishi": stats["q95"][i]}
        for i, n in enumerate(ns)
    ]  # fmt: skip
    ax.bxp(boxes, positions=x, widths=0.5, showfliers=False)
    ax.plot(x, medians.medians("upper"), "v--", color="C3", label="upper bound (as reconstructed), median")
    lower = np.clip(medians.medians("lower"), 0, None)
    ax.plot(x, lower, "^--", color="C2", label="lower bound (Theorem 2, clipped at 0), median")
    interval = window_interval(t, "N", "ns_frac")
    _window_bars(ax, interval, "C0", x=x + 0.34, label="median $N_s/N$, 95 % over windows")
    ax.axhspan(0.70, 0.85, color="gray", alpha=0.15, label="paper: plateau 0.70-0.85")
    ax.set_xticks(x, [str(n) for n in ns])
    ax.set(
        xlabel="selected tokens $N$",
        ylabel="$N_s / N$ (a window's heads, median over windows)",
        ylim=(-0.02, 1.02),
        title=f"Distinguishable fraction (L = {int(t.L.iloc[0])})",
    )
    box = Patch(facecolor="none", edgecolor="black"), "a window's heads: quartiles (box), 5-95 % (whiskers)"
    _legend(ax, box, fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)  # below the boxes
    return fig


def gradient_figure(res, scaling: str = "model", ax=None):
    """Figure 4: g(T, eps) against T, per eps: the paper's g (the largest head's) read per window, each window's
    maximum over its heads, median over windows. At the smallest eps, the quantile over a window's heads Figure
    4's rules are decided on (:func:`attnlimits.experiments.paper_claims.g_quantile`, the 95th percentile, median
    over windows) with its 95 % interval over windows (order statistics, shaded). The printed min{1/(4T), sqrt 2}
    dashed, the book's sharp 1/(2T) solid grey."""
    res = as_summaries(res)
    fig, ax = _axes(ax)
    res.g(scaling=scaling)  # checks the scaling
    t = res.gradient[res.gradient.logit_scaling == scaling]
    temps = np.array(sorted(t["T"].unique()))
    for i, eps in enumerate(sorted(t.eps.unique())):
        top = g_quantile(res, eps, scaling, q=None)
        label = f"paper's g: max over a window's heads, eps = {eps:g}"
        ax.plot(top.index, top["value"], "o-", ms=3, color=f"C{i}", label=label)
        if i == 0:
            q = g_quantile(res, eps, scaling)
            label = f"{100 * G_QUANTILE:g}th percentile over a window's heads, eps = {eps:g}"
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
        ylabel="$g(T, \\varepsilon)$, median over windows",
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
    """The names of :data:`FIGURES` the run (summaries or per-head) has the tables for (Figure 4 needs Algorithm
    5's, which a run on attention weights without their logits lacks)."""
    return [name for name in FIGURES if name != "fig4_gradient" or not res.gradient.empty]


def save_all(res, folder) -> list[Path]:
    """Draw every figure of :data:`FIGURES` the run has the tables for (:func:`drawable`) and save each as PNG and
    SVG in ``folder``; returns the paths. A per-head run is summarised once, for all of them."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    res = as_summaries(res)
    paths = []
    for name in drawable(res):
        fig = FIGURES[name](res)
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
