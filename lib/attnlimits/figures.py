"""The Experiments part's figures, in the paper's layout, drawn from a :class:`attnlimits.experiments.Results`.

Each function returns a matplotlib figure and never computes anything but summaries of the tables: medians and
spreads across heads and windows (every head of every window is one sample), maxima over heads where the paper
takes them. :func:`save_all` writes them all as PNG and SVG (what ``attnlimits analyze`` does).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

__all__ = [
    "FIGURES",
    "critical_figure",
    "distance_vs_length",
    "distance_vs_n",
    "gradient_figure",
    "save_all",
    "separability_figure",
    "spread",
]

_SERIES = {
    "d_tilde": ("true distance $\\tilde d$", "C0"),
    "E": ("expectation $E$ (random $I_N$)", "C2"),
    "d_max": ("bound $d_{\\max}$ (Theorem 1)", "C3"),
}


def spread(table: pd.DataFrame, by: str, column: str, lo: float = 0.1, hi: float = 0.9) -> pd.DataFrame:
    """Median and the ``lo``-``hi`` quantile band of ``column`` across heads and windows, per value of ``by``."""
    g = table.groupby(by)[column]
    return pd.DataFrame({"median": g.median(), "lo": g.quantile(lo), "hi": g.quantile(hi), "mean": g.mean()})


def _band(ax, table, by, column, label, color):
    s = spread(table, by, column)
    ax.plot(s.index, s["median"], "o-", color=color, label=label)
    ax.fill_between(s.index, s["lo"], s["hi"], color=color, alpha=0.2, lw=0)


def _distance_figure(table, by: str, ticks, xlabel: str, title: str, ax):
    fig, ax = _axes(ax)
    for col, (label, color) in _SERIES.items():
        _band(ax, table, by, col, label, color)
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="distance", title=title)
    ax.set_xticks(ticks, [str(v) for v in ticks])
    ax.legend(fontsize="small")
    return fig


def distance_vs_length(res, ax=None):
    """Figure 2a: d~, E and d_max against L at the preset's fixed N (median, 10-90 % band over heads x windows)."""
    p = res.preset
    return _distance_figure(
        res.alg1(), "L", p.alg1_L, "sequence length $L$", f"Distance vs length (N = {p.alg1_N})", ax
    )


def distance_vs_n(res, ax=None):
    """Figure 2b: d~, E and d_max against N at the preset's fixed L."""
    p = res.preset
    return _distance_figure(res.alg2(), "N", p.alg2_N, "selected tokens $N$", f"Distance vs N (L = {p.alg2_L})", ax)


def critical_figure(res, ax=None):
    """Figure 2c: the critical N against L at each KS level, with the paper's 0.06 L."""
    fig, ax = _axes(ax)
    crit = res.critical.dropna(subset=["critical_N"])
    for (level, windows), t in crit.groupby(["ks_level", "windows"]):
        ax.plot(t.L, t.critical_N.astype(float), "o-", label=f"critical N, KS level {level:g} (windows {windows})")
    lengths = np.array(sorted(res.critical.L.unique()), dtype=float)
    ax.plot(lengths, 0.06 * lengths, "k--", label="paper: 0.06 L")
    ax.plot(lengths, lengths - 1, ":", color="gray", label="N = L - 1 (largest possible)")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="sequence length $L$",
        ylabel="critical $N$",
        title="Critical N: KS cannot tell $\\tilde d$ from $E$",
    )
    ax.set_xticks(lengths, [str(int(v)) for v in lengths])
    ax.legend(fontsize="small")
    return fig


def separability_figure(res, ax=None):
    """Figure 3: box plots of N_s/N per N over heads x windows, with Theorem 2's bounds (median over heads)."""
    fig, ax = _axes(ax)
    t = res.separability
    ns = sorted(t.N.unique())
    ax.boxplot([t[t.N == n].ns_frac for n in ns], positions=range(len(ns)), widths=0.5, showfliers=False)
    med = t.groupby("N")[["lower", "upper"]].median()
    ax.plot(range(len(ns)), med.loc[ns, "upper"], "v--", color="C3", label="upper bound (as reconstructed), median")
    ax.plot(
        range(len(ns)),
        med.loc[ns, "lower"].clip(lower=0),
        "^--",
        color="C2",
        label="lower bound (Theorem 2, clipped at 0), median",
    )
    ax.axhspan(0.70, 0.85, color="gray", alpha=0.15, label="paper: plateau 0.70-0.85")
    ax.set_xticks(range(len(ns)), [str(n) for n in ns])
    ax.set(
        xlabel="selected tokens $N$",
        ylabel="$N_s / N$",
        ylim=(-0.02, 1.02),
        title=f"Distinguishable fraction (L = {int(t.L.iloc[0])})",
    )
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)  # below: boxes stay clear
    return fig


def gradient_figure(res, scaling: str = "model", ax=None):
    """Figure 4: g(T, eps) (max over heads of the mean over rows; dashed: the median head) against T, per eps,
    with the printed min{1/(4T), sqrt 2} and the book's sharp 1/(2T)."""
    fig, ax = _axes(ax)
    t = res.gradient[res.gradient.logit_scaling == scaling]
    temps = np.array(sorted(t["T"].unique()))
    for i, (eps, e) in enumerate(t.groupby("eps")):
        top = e.groupby("T").g.max()
        med = e.groupby("T").g.median()
        ax.plot(top.index, top.values, "o-", ms=3, color=f"C{i}", label=f"g, eps = {eps:g} (max over heads)")
        ax.plot(med.index, med.values, "--", lw=1, color=f"C{i}", label=f"median head, eps = {eps:g}")
    ax.plot(
        temps, np.minimum(1 / (4 * temps), np.sqrt(2)), "k-", lw=2, alpha=0.6, label="paper: min{1/(4T), $\\sqrt{2}$}"
    )
    ax.plot(temps, 1 / (2 * temps), ":", color="gray", label="book: 1/(2T) (sharp, every eps)")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="temperature $T$",
        ylabel="$g(T, \\varepsilon)$",
        title=f"Sensitivity vs temperature (logits: {'model-scaled' if scaling == 'model' else 'raw q.k'})",
    )
    ax.legend(fontsize="x-small", ncol=2)
    return fig


FIGURES = {
    "fig2a_distance_vs_length": distance_vs_length,
    "fig2b_distance_vs_n": distance_vs_n,
    "fig2c_critical_n": critical_figure,
    "fig3_separability": separability_figure,
    "fig4_gradient": gradient_figure,
}


def save_all(res, folder) -> list[Path]:
    """Draw every figure of :data:`FIGURES` and save each as PNG and SVG in ``folder``; returns the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, draw in FIGURES.items():
        fig = draw(res)
        for ext in ("png", "svg"):
            path = folder / f"{name}.{ext}"
            fig.savefig(path, bbox_inches="tight", dpi=150)
            paths.append(path)
        plt.close(fig)
    return paths


def _axes(ax):
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        return fig, ax
    return ax.figure, ax
