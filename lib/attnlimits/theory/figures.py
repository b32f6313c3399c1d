"""The Theory part's figures (chapters 11-15), drawn from the tables and tensors the chapters compute.

Each function takes what a chapter computed (a sweep's DataFrame, a check's details, tokens and weights), returns
a matplotlib figure and computes nothing but what it draws; the chapter passes the figure to
:func:`attnlimits.infra.plotting.finish`. Normalisers keep their colours of
:data:`attnlimits.infra.plotting.NORMALIZER_COLORS`.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.patches import Circle

from attnlimits.core import selection
from attnlimits.infra import plotting
from attnlimits.infra.plotting import NORMALIZER_COLORS

__all__ = [
    "corollary1_tightness_figure",
    "distance_vs_length_figure",
    "distance_vs_n_figure",
    "g_vs_temperature_figure",
    "jacobian_scatter_figure",
    "max_weight_figure",
    "multihead_coverage_figure",
    "normalizer_weights_figure",
    "selection_geometry_figure",
    "separability_vs_n_figure",
    "vanishing_normalizers_figure",
]


def normalizer_weights_figure(logits: torch.Tensor, weights: dict[str, torch.Tensor]):
    """Chapter 11, Figure: the weights each normaliser gives the same logits, one bar chart per normaliser.

    ``weights`` maps a normaliser's name to its weights on ``logits`` (L,). Tokens are sorted by decreasing logit;
    each title counts the exact zeros and gives the largest weight.
    """
    fig, axes = plt.subplots(1, len(weights), figsize=(16, 3.2), sharey=True)
    order = torch.argsort(logits, descending=True)
    for ax, (name, w) in zip(axes, weights.items(), strict=True):
        ax.bar(np.arange(len(logits)), w[order].numpy(), color=NORMALIZER_COLORS[name])
        ax.set_title(f"{name}\nzeros: {(w == 0).sum().item()}, max: {w.max().item():.2f}", fontsize=10)
        ax.set_xlabel("token, by decreasing logit")
    axes[0].set_ylabel(r"weight $\alpha_n$")
    return fig


def max_weight_figure(by_gap: dict[float, pd.DataFrame]):
    """Chapter 11, Figure: the largest weight against the length L per normaliser, log-log, with 1/L dotted.

    ``by_gap`` maps the needle's logit gap to its :func:`attnlimits.theory.sweeps.max_weight_sweep` table; one
    panel per gap.
    """
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.4), sharey=True)
    for ax, (gap, sweep) in zip(axes, by_gap.items(), strict=True):
        for name, part in sweep.groupby("normalizer", sort=False):
            ax.plot(part["L"], part["max_weight"], "o-", label=name, color=NORMALIZER_COLORS[name])
        lengths = np.unique(sweep["L"])
        ax.plot(lengths, 1 / lengths, "k:", label="$1/L$")
        ax.set(xscale="log", yscale="log", xlabel="sequence length $L$", title=f"logit gap of the top token: {gap}")
    axes[0].set_ylabel(r"largest weight $\max_n \alpha_n$")
    axes[1].legend(fontsize=9)
    return fig


def selection_geometry_figure(small: tuple, large: tuple):
    """Chapter 11, Figure: the paper's Figure 1 rebuilt from 2-d tokens and their weights, in three panels.

    ``small`` and ``large`` are ``(x (L, 2), alpha (L,), N)``: (a) the tokens of ``small`` and its top-N set;
    (b) and (c) the weighted tokens, context vector and ball B_r(s) of ``small`` and ``large``
    (:func:`attnlimits.infra.plotting.draw_selection`), titled with their distinguishable fraction N_s / N.
    """
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.9))
    x, alpha, n = small
    chosen = selection.top_n_mask(alpha, n)
    axes[0].scatter(*x[~chosen].T, facecolors="none", edgecolors="0.45", label="tokens $x_j$")
    axes[0].scatter(*x[chosen].T, color=NORMALIZER_COLORS["softmax"], label="selected $I_N$")
    axes[0].add_patch(Circle((0, 0), 1.0, fill=False, color="0.8"))
    axes[0].set_aspect("equal")
    axes[0].set_title(f"(a) tokens on the circle, $L={len(x)}$, $N={n}$")
    axes[0].legend(loc="lower left", fontsize=8)
    for ax, panel, (x, alpha, n) in zip(axes[1:], "bc", (small, large), strict=True):
        fraction = selection.distinguishable_fraction(alpha, x, n).item()
        plotting.draw_selection(ax, x, alpha, n, title=f"({panel}) $L={len(x)}$, $N={n}$: $N_s/N = {fraction:.2f}$")
    axes[1].legend(loc="lower left", fontsize=8)
    return fig


def corollary1_tightness_figure(tight: pd.DataFrame, worst_by_length: dict):
    """Chapter 12, Figure: measured / bound of Corollary 1 against L, rising towards 1 and never above it.

    ``tight``: :func:`attnlimits.theory.sweeps.corollary1_tightness` (one curve per Delta / T, the extremal keys);
    ``worst_by_length``: the worst ratio of the random trials per length (``details["worst_ratio_random_by_L"]`` of
    :func:`attnlimits.theory.checks.check_corollary1`).
    """
    fig, ax = plt.subplots(figsize=(7, 4))
    for rho, part in tight.groupby("rho"):
        ax.plot(part["L"], part["ratio_paper"], marker="o", ms=3, label=rf"extremal keys, $\Delta/T = {rho:g}$")
    ax.plot(list(worst_by_length), list(worst_by_length.values()), "k.", ms=8, label="random trials (worst per $L$)")
    ax.axhline(1, color="0.3", ls="--", lw=1, label="bound (ratio 1)")
    ax.set(
        xscale="log",
        xlabel="sequence length $L$",
        ylabel="measured / bound",
        title="Corollary 1: how close the weights get to the band",
    )
    ax.legend(fontsize=8, loc="lower right")
    return fig


def vanishing_normalizers_figure(sweep: pd.DataFrame, rho: float):
    """Chapter 12, Figure: who escapes Theta(1/L) and at what price, against L per normaliser, in three panels.

    ``sweep``: :func:`attnlimits.theory.sweeps.vanishing_sweep` at logit bound ``rho`` = Delta / T. Panels:
    (a) L max alpha (log-log) with Corollary 1's cap e^{2 rho}; (b) the fraction of weights exactly 0;
    (c) the sensitivity T ||J||_2 (log-log) with softmax's ceiling 1/2.
    """
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for name, part in sweep.groupby("normalizer", sort=False):
        color = NORMALIZER_COLORS[name]
        for ax, column in zip(axes, ("L_times_max_weight", "zero_fraction", "T_jacobian_norm"), strict=True):
            ax.plot(part["L"], part[column], marker="o", ms=3, color=color, label=name)
    axes[0].axhline(math.exp(2 * rho), color="0.3", ls="--", lw=1, label=r"Corollary 1 cap $e^{2\Delta/T}$")
    axes[0].set(
        xscale="log",
        yscale="log",
        xlabel="$L$",
        ylabel=r"$L \cdot \max_i \alpha_i$",
        title=r"(a) escape from $\Theta(1/L)$",
    )
    axes[1].set(xscale="log", xlabel="$L$", ylabel="fraction of weights exactly 0", title="(b) price: dropped tokens")
    axes[2].axhline(0.5, color="0.3", ls="--", lw=1, label="softmax ceiling 1/2")
    axes[2].set(
        xscale="log",
        yscale="log",
        xlabel="$L$",
        ylabel=r"$T\,\|\partial\alpha/\partial l\|_2$",
        title="(c) price: sensitivity",
    )
    axes[0].legend(fontsize=8)
    axes[2].legend(fontsize=8)
    return fig


def _only(table: pd.DataFrame, column: str):
    """The single value ``column`` takes in ``table`` (a figure titled with it draws one value only)."""
    values = pd.unique(table[column])
    if len(values) != 1:
        raise ValueError(f"{column}: the table must hold one value, got {list(values)}")
    return values[0]


def distance_vs_length_figure(sweep: pd.DataFrame):
    """Chapter 13, Figure: the distance d~ and its bounds against L at one N, log-log, one panel per regime.

    ``sweep``: :func:`attnlimits.theory.synthetic.distance_sweep` tables of one N, concatenated over regimes (in
    panel order). Each panel: d~, the proved band E_0 <= E <= E_0 + eps-bar, the Monte Carlo E, d_max (as
    reconstructed), the sharp d_max and (L - N) ||s||.
    """
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, (regime, df) in zip(axes, sweep.groupby("regime", sort=False), strict=True):
        ax.loglog(df.L, df.d_tilde, "o-", label=r"$\tilde d$ (top-$N$)")
        ax.fill_between(
            df.L, df.E, df.E_upper, alpha=0.3, label=r"$E_0 \leq E \leq E_0 + \bar{\varepsilon}$ (proved band)"
        )
        ax.loglog(df.L, df.E_mc, "s", label=r"$E$ (random $I_N$, Monte Carlo)")
        ax.loglog(df.L, df.d_max, "--", label=r"$d_{\max}$ (reconstructed)")
        ax.loglog(df.L, df.d_max_sharp, "-.", label=r"$d_{\max}^\star$ (sharp)")
        ax.loglog(df.L, (df.L - df.N) * df.s_norm, color="grey", lw=0.8, label=r"$(L - N)\,\Vert s \Vert$")
        ax.set(title=f"{regime} logits, N = {_only(df, 'N')}", xlabel="L")
    axes[0].set_ylabel("distance (mean over rows)")
    axes[1].legend(fontsize=8)
    return fig


def distance_vs_n_figure(sweep: pd.DataFrame):
    """Chapter 13, Figure: collapse as N -> L at one length, in two panels.

    ``sweep``: :func:`attnlimits.theory.synthetic.distance_sweep` at one L and one regime. Left: d~, the proved
    band of E, the Monte Carlo E and d_max against N < L (log-log); right: the tightness d~ / d_max of Theorem 1
    (mean and max over rows).
    """
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    part = sweep[sweep.N < sweep.L]
    ax.loglog(part.N, part.d_tilde, "o-", label=r"$\tilde d$")
    ax.fill_between(
        part.N, part.E, part.E_upper, alpha=0.3, label=r"$E_0 \leq E \leq E_0 + \bar{\varepsilon}$ (proved band)"
    )
    ax.loglog(part.N, part.E_mc, "s", label=r"$E$ (Monte Carlo)")
    ax.loglog(part.N, part.d_max, "--", label=r"$d_{\max}$")
    ax.set(xlabel="N", ylabel="distance", title=f"L = {_only(sweep, 'L')}, {_only(sweep, 'regime')} regime")
    ax.legend(fontsize=8)
    bx.semilogx(part.N, part.ratio, "o-", label="mean")
    bx.semilogx(part.N, part.ratio_max, "^-", label="max over rows")
    bx.axhline(1, color="grey", lw=0.8)
    bx.set(xlabel="N", ylabel=r"$\tilde d / d_{\max}$", title="tightness of Theorem 1", ylim=(0, 1.05))
    bx.legend(fontsize=8)
    return fig


def separability_vs_n_figure(by_dimension: dict[int, pd.DataFrame]):
    """Chapter 14, Figure: the simulated E[N_s]/N against N per weight concentration beta, with Theorem 2's
    reconstructed upper bound (dashed) and the book's lower bound (dotted), one panel per dimension d.

    ``by_dimension`` maps d to its :func:`attnlimits.theory.synthetic.separability_sweep` table.
    """
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), sharey=True)
    for ax, (d, df) in zip(axes, by_dimension.items(), strict=True):
        for k, (beta, part) in enumerate(df.groupby("beta")):
            color = f"C{k}"
            ax.semilogx(part.N, part.frac, "o-", color=color, label=rf"$E[N_s]/N$, $\beta = {beta:g}$")
            ax.semilogx(part.N, part.upper_rec, "--", color=color, lw=1)
            ax.semilogx(part.N, part.lower_sharp, ":", color=color, lw=1.5)
        ax.set(title=f"d = {d}, L = {_only(df, 'L')}", xlabel="N", ylim=(-0.05, 1.05))
    axes[0].set_ylabel(r"$N_s / N$")
    fig.suptitle(
        "solid: simulated $E[N_s]/N$; dashed: reconstructed upper bound; dotted: the book's lower bound", fontsize=10
    )
    axes[1].legend(fontsize=8)
    return fig


def multihead_coverage_figure(coverage: pd.DataFrame, *, L: int, N: int, d: int, beta: float):
    """Chapter 14, Figure: the coverage of the selected tokens against the number of heads H: simulated (with
    2 standard errors), the paper's 1 - (1 - p)^H and the exact per-token mean.

    ``coverage``: :func:`attnlimits.theory.synthetic.multihead_simulation`; ``L``, ``N``, ``d`` and ``beta``
    describe its setting, for the title.
    """
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.errorbar(coverage.H, coverage.simulated, yerr=2 * coverage.sd, fmt="o", label="simulated H heads (±2 s.e.)")
    ax.plot(coverage.H, coverage.paper, "--", label=r"$1 - (1 - p)^H$ (paper)")
    ax.plot(coverage.H, coverage.per_token, "-", label=r"mean$_i\ 1 - (1 - p_i)^H$ (exact)")
    ax.set(xlabel="heads H", ylabel="coverage of selected tokens", title=f"L = {L}, N = {N}, d = {d}, beta = {beta:g}")
    ax.legend(fontsize=8)
    return fig


def jacobian_scatter_figure(sample: pd.DataFrame):
    """Chapter 15, Figure: T ||J||_2 and T max_ij |J_ij| of random softmax rows against their largest weight,
    with the sharp bound 1/2 and the printed 1/4 (both times T).

    ``sample``: :func:`attnlimits.theory.sweeps.jacobian_sample`.
    """
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.scatter(sample["max_alpha"], sample["T_norm"], s=6, alpha=0.5, label=r"$T\,\|\partial\alpha/\partial l\|_2$")
    ax.scatter(
        sample["max_alpha"], sample["T_entry"], s=6, alpha=0.5, label=r"$T \max_{ij} |\partial\alpha_i/\partial l_j|$"
    )
    ax.axhline(0.5, color="k", lw=1.2, label="sharp bound $1/(2T)$ (times $T$)")
    ax.axhline(0.25, color="C3", ls="--", lw=1.2, label=r"printed $1/(4T)$ (times $T$)")
    ax.set(xlabel=r"largest weight $\max_i \alpha_i$", ylabel="times $T$", title="Softmax Jacobian: measured vs bounds")
    ax.legend(fontsize=8, loc="lower center")
    return fig


def g_vs_temperature_figure(g: pd.DataFrame):
    """Chapter 15, Figure: Algorithm 5's g(T, eps) against T per eps, log-log, with the corrected ceiling
    min{1/(2T), sqrt(2)/eps} per eps and the paper's dashed min{1/(4T), sqrt(2)}.

    ``g``: :func:`attnlimits.theory.sweeps.g_synthetic`.
    """
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for k, (eps, part) in enumerate(g.groupby("eps")):
        ax.plot(part["T"], part["g"], marker="o", ms=3, color=f"C{k}", label=rf"$g(T, \varepsilon = {eps:g})$")
        ax.plot(
            part["T"],
            part.corrected,  # the column of the corrected bound
            color=f"C{k}",
            lw=1,
            alpha=0.7,
            label=rf"corrected $\min\{{1/(2T), \sqrt{{2}}/\varepsilon\}}$, $\varepsilon = {eps:g}$",
        )
    paper = g.drop_duplicates("T")
    ax.plot(paper["T"], paper["paper"], "k--", lw=1.5, label=r"paper $\min\{1/(4T), \sqrt{2}\}$")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="temperature $T$",
        ylabel=r"$g(T, \varepsilon)$",
        title="Algorithm 5 on synthetic heads",
    )
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig
