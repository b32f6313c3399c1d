"""Chapter 33's tables and figures, built from the tables of :mod:`attnlimits.studies.alternatives`.

Every function takes the study's tidy tables (``weights``, ``distance``, ``critical``, ``jacobian``, ``g``: the
fields of :class:`attnlimits.studies.alternatives.AlternativesTables`), or that result whole, and draws or
summarises *every* normaliser they hold, in the order they hold them, with the colour and label of
:func:`attnlimits.infra.plotting.normalizer_colors` and :func:`attnlimits.infra.plotting.normalizer_labels`: a
normaliser added to :data:`attnlimits.core.normalizers.NORMALIZERS` appears in each of them without any other
change.

- :func:`max_weight_slopes`   log-log slope of the median head's largest weight against L, per normaliser.
- :func:`critical_table`      Algorithm 3's critical N / L, one row per length and one column per normaliser.
- :func:`vanishing_figure`    the largest weight and the share of non-zero weights against L.
- :func:`distance_figure`     d~ and E against L and N, and N_s / N against N.
- :func:`gradient_figure`     the Jacobian's spectral norm per head and g(T, eps) against T.
- :func:`model_figure`        the vanishing panels and g(T, eps) side by side (the model's logits).
- :func:`verdict_table`       one row per normaliser: which limitation it escapes, and at what cost.
- :func:`zero_weight_table`   N_s / N with and without the zero-weight tokens, per normaliser and N.
- :func:`one_logit_figure`    Scalable-Softmax's Figure 1, recomputed: the largest weight against the row's length.
- :func:`execution_times`     the wall time of each cached computation, and the full preset's extrapolated.

Chapter 36 (a model's tables over several windows, the units of its intervals):

- :func:`window_values`       each diagnostic per normaliser and window.
- :func:`interval_table`      each diagnostic's mean over windows with its Student-t interval, and the shown table.
- :func:`critical_gammas`     the critical scaling's gamma per window.
- :func:`gamma_figure`        the largest weight's slope against L per gamma, one line per window.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from attnlimits.experiments import paper_claims
from attnlimits.infra import plotting
from attnlimits.infra.statistics import t_interval
from attnlimits.studies import training
from attnlimits.studies.alternatives import study

__all__ = [
    "critical_gammas",
    "critical_table",
    "distance_figure",
    "execution_times",
    "gamma_figure",
    "gradient_figure",
    "interval_table",
    "max_weight_slopes",
    "model_figure",
    "plot_by_length",
    "plot_g",
    "one_logit_figure",
    "verdict_table",
    "window_values",
    "zero_weight_table",
]


def _names(table: pd.DataFrame) -> list[str]:
    """The normalisers of ``table`` in the order it holds them (the registry's, for the study's tables)."""
    return list(pd.unique(table.normalizer))


def _labelled(table: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """``table`` with each normaliser's name replaced by its label, and the palette keyed by label."""
    names = _names(table)
    labels = plotting.normalizer_labels(names)
    colors = plotting.normalizer_colors(names)
    palette = {labels[n]: colors[n] for n in names}
    return table.assign(normalizer=table.normalizer.map(labels)), palette


def _length_ticks(ax, values) -> None:
    ticks = sorted(pd.unique(values))
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()


def max_weight_slopes(weights: pd.DataFrame, column: str = "max_weight") -> pd.Series:
    """Per normaliser, the log-log slope against L of the median head's ``column`` (``weights`` from
    :func:`attnlimits.studies.alternatives.weight_table`): -1 is the 1/L of vanishing attention, 0 no vanishing."""
    slopes = {}
    for name in _names(weights):
        med = weights[weights.normalizer == name].groupby("L")[column].median()
        slopes[name] = paper_claims.loglog_slope(med.index, med.values)
    return pd.Series(slopes, name=f"slope of {column.replace('_', ' ')} vs L")


def critical_table(critical: pd.DataFrame, reading: str = "E") -> pd.DataFrame:
    """Algorithm 3's critical N / L under ``reading`` (``critical`` from
    :func:`attnlimits.studies.alternatives.critical_fraction`), one row per length and one column per normaliser."""
    part = critical[critical.reading == reading]
    return part.pivot(index="L", columns="normalizer", values="critical_fraction")


def plot_by_length(ax, table: pd.DataFrame, y: str, title: str, *, logy: bool = True) -> None:
    """Draw the median head's ``y`` against L on ``ax``, one line per normaliser, on log axes ticked at the
    table's lengths."""
    data, palette = _labelled(table)
    sns.lineplot(data=data, x="L", y=y, hue="normalizer", palette=palette, marker="o", errorbar=None,
                 estimator="median", ax=ax)  # fmt: skip
    ax.set(xscale="log", yscale="log" if logy else "linear", title=title)
    _length_ticks(ax, table.L)
    ax.legend(fontsize=7)


def plot_g(ax, g: pd.DataFrame, eps: float) -> None:
    """Draw Algorithm 5's g(T, ``eps``) against T on ``ax``, one line per normaliser (``g`` from
    :func:`attnlimits.studies.alternatives.g_table`)."""
    data, palette = _labelled(g[g.eps == eps])
    sns.lineplot(data=data, x="T", y="g", hue="normalizer", palette=palette, marker="o", seed=0, ax=ax)
    ax.set(xscale="log", yscale="log", title=f"g(T, ε = {eps:g}), max over heads")
    ax.legend(fontsize=7)


def vanishing_figure(weights: pd.DataFrame):
    """The median head's largest weight (left) and share of non-zero weights (right) against L."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    plot_by_length(axes[0], weights, "max_weight", "largest weight (median head)")
    plot_by_length(axes[1], weights, "support_fraction", "non-zero weights / L")
    return fig


def distance_figure(distance: pd.DataFrame, fixed_N: int):
    """Mean over heads of d~ (solid) and E (dotted) against L at ``fixed_N`` (left) and against N at the largest L
    (middle); the mean separable fraction N_s / N against N (right). ``distance`` from
    :func:`attnlimits.studies.alternatives.distance_table`."""
    top_L = distance.L.max()
    names = _names(distance)
    colors, labels = plotting.normalizer_colors(names), plotting.normalizer_labels(names)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for name in names:
        color, label = colors[name], labels[name]
        part = distance[(distance.normalizer == name) & (distance.N == fixed_N)].groupby("L")
        axes[0].plot(part.d_tilde.mean(), "-o", color=color, label=f"{label} d~")
        axes[0].plot(part.E.mean(), ":", color=color)
        part = distance[(distance.normalizer == name) & (distance.L == top_L)].groupby("N")
        axes[1].plot(part.d_tilde.mean(), "-o", color=color, label=label)
        axes[1].plot(part.E.mean(), ":", color=color)
        axes[2].plot(part.ns_frac.mean(), "-o", color=color, label=label)
    axes[0].set(xscale="log", yscale="log", xlabel="L", title=f"d~ (solid), E (dotted); N = {fixed_N}")
    _length_ticks(axes[0], distance.L)
    axes[1].set(xscale="log", yscale="log", xlabel="N", title=f"d~ (solid), E (dotted); L = {top_L}")
    axes[2].set(xscale="log", xlabel="N", ylabel="N_s / N", title=f"separable fraction; L = {top_L}")
    axes[1].legend(fontsize=7)
    return fig


def gradient_figure(jacobian: pd.DataFrame, g: pd.DataFrame):
    """One box per normaliser of each head's largest Jacobian spectral norm (``jacobian`` from
    :func:`attnlimits.studies.alternatives.jacobian_table`), and g(T, eps) against T at the smallest eps."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    data, palette = _labelled(jacobian)
    sns.boxplot(data=data, x="normalizer", y="jacobian_max", hue="normalizer", palette=palette, ax=axes[0],
                log_scale=True)  # fmt: skip
    T = jacobian["T"].iloc[0]
    axes[0].set(xlabel="", ylabel=f"max over rows of ‖J‖₂ (T = {T:g})", title=f"per head, L = {jacobian.L.max()}")
    axes[0].tick_params(axis="x", labelsize=7, rotation=20)
    plot_g(axes[1], g, g.eps.min())
    return fig


def model_figure(weights: pd.DataFrame, g: pd.DataFrame, eps: float):
    """The two panels of :func:`vanishing_figure` and g(T, ``eps``) against T, side by side."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    plot_by_length(axes[0], weights, "max_weight", "largest weight (median head)")
    plot_by_length(axes[1], weights, "support_fraction", "non-zero weights / L")
    plot_g(axes[2], g, eps)
    return fig


def _trained(runs: pd.DataFrame) -> str:
    """``reached/runs``: how many training runs reached the target loss."""
    return f"{runs.steps_to_target.notna().sum()}/{len(runs)}"


def verdict_table(
    model: study.AlternativesTables, train: pd.DataFrame, cost: pd.DataFrame, fixed_N: int, eps: float
) -> pd.DataFrame:
    """One row per normaliser of ``model``, the diagnostics on a model's heads
    (:func:`attnlimits.studies.alternatives.results` of a model and a text): which limitation it escapes, and at
    what cost.

    Columns: the max-weight slope (:func:`max_weight_slopes`); Algorithm 3's critical N / L at the largest length;
    the mean N_s / N at the largest N of the grid up to ``fixed_N`` and the largest length; the mean over heads of
    the mean Jacobian norm; g at T = 0.01 and ``eps``; the median share of non-zero weights at the largest length;
    from ``train`` (the ``final`` table of :func:`attnlimits.studies.training.results`) the runs reaching the
    target loss at T <= 0.03 and at T = 1 and the median relative error at the largest marked fraction; from
    ``cost`` (:func:`attnlimits.studies.alternatives.row_cost`) the microseconds per row.
    """
    weights, distance, jacobian, g = model.weights, model.distance, model.jacobian, model.g
    slopes = max_weight_slopes(weights)
    critical = critical_table(model.critical)
    top_L = distance.L.max()
    temperature = train[train.experiment == "temperature"]
    fraction = train[train.experiment == "fraction"]
    us_per_row = cost.set_index("normalizer").us_per_row
    rows = []
    for name in _names(weights):
        w = weights[weights.normalizer == name]
        d = distance[(distance.normalizer == name) & (distance.L == top_L)]
        t = temperature[temperature.normalizer == name]
        f = fraction[(fraction.normalizer == name) & (fraction.N == fraction.N.max())]
        rows.append({
            "normalizer": name,
            "max-weight slope": slopes[name],
            "critical N / L": critical.loc[top_L, name],
            "N_s/N": d[d.N == d.N[d.N <= fixed_N].max()].ns_frac.mean(),
            "‖J‖ mean": jacobian[jacobian.normalizer == name].jacobian_mean.mean(),
            "g(0.01)": g[(g.normalizer == name) & (g["T"] == 0.01) & (g.eps == eps)].g.iloc[0],
            "support": w[w.L == w.L.max()].support_fraction.median(),
            "trained at T ≤ 0.03": _trained(t[t["T"] <= 0.03]),
            "trained at T = 1": _trained(t[t["T"] == 1]),
            "error at N/L = 1/2": f.rel_error.median(),
            "µs per row": us_per_row[name],
        })  # fmt: skip
    return pd.DataFrame(rows).set_index("normalizer")


def zero_weight_table(distance: pd.DataFrame) -> pd.DataFrame:
    """Per normaliser and N at the largest length: the mean over heads of N_s / N as Algorithm 4 counts it
    (``N_s/N``), with the zero-weight tokens left out (``N_s/N, weight > 0``: the mean over the heads that have a
    row dropping a token of positive weight, :func:`attnlimits.studies.alternatives.nonzero_separability`), and
    the share of rows that do (``rows compared``). The difference is what a sparse normaliser's exact zeros add
    mechanically: each sits at distance ||s|| from the context vector, selected or dropped."""
    d = distance[distance.L == distance.L.max()]
    table = d.groupby(["normalizer", "N"], sort=False).agg(
        **{"N_s/N": ("ns_frac", "mean"), "N_s/N, weight > 0": ("ns_frac_nonzero", "mean"),
           "rows compared": ("compared", "mean")}
    )  # fmt: skip
    return table.reindex(_names(d), level="normalizer")


def one_logit_figure(table: pd.DataFrame):
    """The largest weight against the row's length n under softmax and Scalable-Softmax, from
    :func:`attnlimits.studies.alternatives.one_logit_apart` (log n axis), in the registry's colours."""
    names = [c for c in table.columns if c != "n"]
    colors, labels = plotting.normalizer_colors(names), plotting.normalizer_labels(names)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name in names:
        ax.plot(table.n, table[name], color=colors[name], label=labels[name], lw=2)
    ax.set(xscale="log", xlabel="n (one logit +3, the others -2)", ylabel="largest weight", ylim=(0, 1.05))
    ax.legend()
    return fig


def execution_times(
    train: pd.DataFrame, synthetic: study.AlternativesTables, model: study.AlternativesTables, preset
) -> pd.DataFrame:
    """The wall time each cached computation of chapters 32 and 33 took for ``preset`` (``train``: the ``final``
    table of :func:`attnlimits.studies.training.results`; ``synthetic`` and ``model``: the study's results on
    the synthetic heads and on the model's heads, :func:`attnlimits.studies.alternatives.results`), and the
    ``full`` preset's time extrapolated from it by the ratio of the work (token-steps of training, weight entries of
    the diagnostics): an estimate, not a measurement."""
    seconds = {
        "chapter 32: training sweep": train.groupby(["experiment", "normalizer", "L"]).seconds.first().sum(),
        "chapter 33: synthetic heads": synthetic.seconds.seconds.sum(),
        "chapter 33: model (capture included)": model.seconds.set_index("part").seconds["model"],
    }
    work, work_full = study.work(preset), study.work("full")
    ratio = [
        training.work("full") / training.work(preset),
        work_full["synthetic"] / work["synthetic"],
        work_full["model"] / work["model"],
    ]
    times = pd.DataFrame({"computed in (s)": seconds})
    times["full preset, extrapolated (min)"] = times["computed in (s)"] * ratio / 60
    return times


# ----------------------------------------------------------------------------------------------------------------
# chapter 36: the diagnostics per window, and their intervals over windows
# ----------------------------------------------------------------------------------------------------------------
#: Chapter 36's diagnostics, in the order its table shows them.
DIAGNOSTICS = ("max-weight slope", "row sum", "critical N/L (E)", "critical N/L (E_full)", "N_s/N",
               "N_s/N, weight > 0", "‖J‖ mean", "sink rate")  # fmt: skip


def window_values(model: study.AlternativesTables, fixed_N: int) -> pd.DataFrame:
    """Each of :data:`DIAGNOSTICS` per normaliser and window of a model's tables (``window`` column): the log-log
    slope of the median head's largest weight against L; the mean row sum, Algorithm 3's critical N / L under E
    and E_full, the mean N_s / N at the largest N of the grid up to ``fixed_N`` (as Algorithm 4 counts it, and
    with the zero-weight tokens left out: the mean over the heads that have a row to compare) and the mean
    Jacobian norm, each at the largest length; the sink rate. Columns ``normalizer, window`` and one per diagnostic."""
    top = model.distance.L.max()
    rows = []
    for (name, window), w in model.weights.groupby(["normalizer", "window"], sort=False):
        at = {"normalizer": name, "window": window}

        def part(table, at=at):
            return table[(table.normalizer == at["normalizer"]) & (table.window == at["window"])]

        med = w.groupby("L").max_weight.median()
        d = part(model.distance).query("L == @top")
        crit = part(model.critical).query("L == @top").set_index("reading").critical_fraction
        rows.append({**at,
                     "max-weight slope": paper_claims.loglog_slope(med.index, med.values),
                     "row sum": w[w.L == top].row_sum.mean(),
                     "critical N/L (E)": crit["E"], "critical N/L (E_full)": crit["E_full"],
                     "N_s/N": d[d.N == d.N[d.N <= fixed_N].max()].ns_frac.mean(),
                     "N_s/N, weight > 0": d[d.N == d.N[d.N <= fixed_N].max()].ns_frac_nonzero.mean(),
                     "‖J‖ mean": part(model.jacobian).jacobian_mean.mean(),
                     "sink rate": part(model.sink).sink_rate.iloc[0]})  # fmt: skip
    return pd.DataFrame(rows)


def interval_table(values: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per normaliser and diagnostic of :func:`window_values`: the mean over windows with its 95 % Student-t
    interval (:func:`attnlimits.infra.statistics.t_interval`: the windows are the independent units) and how many
    windows it rests on (a window where the value is NaN, a critical N that no N of the grid reached, is left out
    and not counted). Returns the tidy table (``normalizer, diagnostic, value, lo, hi, windows``) and the one the
    chapter shows: one row per diagnostic, one column per normaliser label, ``value ± half-width`` (the t
    interval is symmetric)."""
    rows = []
    for name, part in values.groupby("normalizer", sort=False):
        for diagnostic in DIAGNOSTICS:
            x = part[diagnostic].to_numpy(float)
            if np.isnan(x).all():
                rows.append({"normalizer": name, "diagnostic": diagnostic, "value": np.nan, "lo": np.nan,
                             "hi": np.nan, "windows": 0})  # fmt: skip
                continue
            iv = t_interval(x[~np.isnan(x)])
            rows.append({"normalizer": name, "diagnostic": diagnostic, "value": iv.value, "lo": iv.lo, "hi": iv.hi,
                         "windows": iv.units})  # fmt: skip
    tidy = pd.DataFrame(rows)
    cell = tidy.apply(lambda r: f"{r.value:.2g} ± {(r.hi - r.lo) / 2:.1g}" if r.windows else "none reached", axis=1)
    labels = plotting.normalizer_labels(_names(tidy))
    shown = tidy.assign(cell=cell, normalizer=tidy.normalizer.map(labels))
    shown = shown.pivot(index="diagnostic", columns="normalizer", values="cell")
    return tidy, shown.reindex(index=list(DIAGNOSTICS), columns=list(labels.values()))


def critical_gammas(gamma: pd.DataFrame, threshold: float = study.HOLDS) -> pd.Series:
    """The critical scaling's gamma (:func:`attnlimits.studies.alternatives.critical_gamma`) per window of a model's
    ``gamma`` table."""
    return gamma.groupby("window").apply(lambda g: study.critical_gamma(study.gamma_slopes(g), threshold))


def gamma_figure(gamma: pd.DataFrame, threshold: float = study.HOLDS):
    """Left: the slope against L of the median head's largest weight under softmax(gamma log L l), against gamma,
    one thin line per window, with ``threshold`` dotted and each window's critical gamma marked. Right: the median
    head's largest weight at the largest L against gamma (the mean over windows)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    crit = critical_gammas(gamma, threshold)
    for _, part in gamma.groupby("window"):
        slopes = study.gamma_slopes(part)
        axes[0].plot(slopes.index, slopes.values, color="0.4", lw=0.8, alpha=0.7)
    axes[0].axhline(threshold, color="0.2", ls=":", lw=1)
    axes[0].plot(crit.values, np.full(len(crit), threshold), "o", color=plotting.NORMALIZER_COLORS["scalable-softmax"],
                 label="critical gamma of each window")  # fmt: skip
    axes[0].set(xscale="log", xlabel="gamma", ylabel="slope of the largest weight vs L",
                title="does the largest weight vanish?")  # fmt: skip
    axes[0].legend(fontsize=7)
    top = gamma[gamma.L == gamma.L.max()].groupby(["window", "gamma"]).max_weight.median().groupby("gamma").mean()
    axes[1].plot(top.index, top.values, marker="o", color=plotting.NORMALIZER_COLORS["scalable-softmax"])
    axes[1].set(xscale="log", xlabel="gamma", ylabel=f"largest weight at L = {gamma.L.max()}",
                title="median head, mean over windows", ylim=(0, 1.02))  # fmt: skip
    return fig
