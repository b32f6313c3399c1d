"""Chapter 32's tables and figures, built from the tables of a training sweep
(:class:`~attnlimits.studies.training.Training`'s ``final`` and ``history``, or the rows of one grid).

- :func:`summarize`                     per group of runs: errors, runs reaching the target, gradient statistics.
- :func:`temperature_runs`              the temperature grid's final rows and step rows.
- :func:`fraction_runs`, :func:`length_runs`  the runs of the N/L grid and those at a fixed N/L across lengths.
- :func:`loss_curves_figure`            the training loss per temperature, one panel per normaliser.
- :func:`error_vs_temperature_figure`   the relative test error against T.
- :func:`reached_table`                 the runs reaching the target loss, per T and normaliser.
- :func:`gradient_box_figure`           the per-step gradient norms per T and normaliser.
- :func:`gradient_table`                gradient statistics and the share of zero-gradient steps per T.
- :func:`error_vs_fraction_figure`      the relative test error against N/L and against L.
- :func:`gradient_violin_figure`        the per-step gradient norms at T = 1, per normaliser.
- :func:`fraction_table`                the median relative error per N and normaliser.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from attnlimits.infra import plotting
from attnlimits.studies.training.study import Training, TrainingPreset, get_preset

__all__ = [
    "ZERO_GRADIENT",
    "error_vs_fraction_figure",
    "error_vs_temperature_figure",
    "fraction_runs",
    "fraction_table",
    "gradient_box_figure",
    "gradient_table",
    "gradient_violin_figure",
    "length_runs",
    "loss_curves_figure",
    "reached_table",
    "summarize",
    "temperature_runs",
]

#: A gradient norm at or below this counts as zero (and is drawn there on a log scale).
ZERO_GRADIENT = 1e-8


def summarize(final: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per group of ``by``: runs, diverged runs, median and worst relative error, median mass on the marked tokens,
    runs reaching the target loss, median steps to it, mean gradient norm and the largest spike."""
    g = final.groupby(list(by), sort=True)
    return pd.DataFrame(
        {
            "runs": g.size(),
            "diverged": g.diverged.sum(),
            "rel_error": g.rel_error.median(),
            "rel_error_worst": g.rel_error.max(),
            "mass_on_marked": g.mass_on_marked.median(),
            "reached": g.steps_to_target.count(),
            "steps_to_target": g.steps_to_target.median(),
            "grad_mean": g.grad_mean.mean(),
            "grad_spike": g.grad_spike.max(),
        }
    ).reset_index()


# ----------------------------------------------------------------------------------------------------------------
# the grids' runs
# ----------------------------------------------------------------------------------------------------------------
def temperature_runs(out: Training) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The temperature grid's rows of ``final`` (one per run) and of ``history`` (one per run and step)."""
    return out.final[out.final.experiment == "temperature"], out.history[out.history.experiment == "temperature"]


def fraction_runs(final: pd.DataFrame) -> pd.DataFrame:
    """The N/L grid's runs (T = 1), with their ``fraction`` N/L."""
    return final[final.experiment.isin(["fraction"])].assign(fraction=lambda d: d.N / d.L)


def length_runs(final: pd.DataFrame, preset: str | TrainingPreset) -> pd.DataFrame:
    """The runs at the preset's ``length_fraction`` N/L (T = 1) at every length: the length grid's, and the N/L
    grid's run at ``N_fixed`` when its N/L is that fraction (within 10 %)."""
    p = get_preset(preset)
    length = final[final.experiment.isin(["length"]) | ((final.experiment == "fraction") & (final.N == p.N_fixed))]
    return length[np.isclose(length.N / length.L, p.length_fraction, rtol=0.1)]


def _step_gradients(history: pd.DataFrame) -> pd.DataFrame:
    """The steps with a gradient norm (a diverged run's later steps have none), the norm clipped below at
    :data:`ZERO_GRADIENT` so that a zero gradient shows on a log scale."""
    g = history.dropna(subset=["grad_norm"]).copy()
    g["grad_norm"] = g.grad_norm.clip(lower=ZERO_GRADIENT)
    return g


def _relative_error_plot(ax, data: pd.DataFrame, x: str, *, legend: bool | str = "auto") -> None:
    """The relative test error of ``data`` against ``x`` per normaliser (median over seeds, their range shaded) on a
    log ``x`` axis and a relative-error axis linear near 0 (the oracle), with the all-token mean at 1."""
    sns.lineplot(
        data=data,
        x=x,
        y="rel_error",
        hue="normalizer",
        marker="o",
        estimator="median",
        errorbar=("pi", 100),
        palette=plotting.NORMALIZER_COLORS,
        ax=ax,
        legend=legend,
    )
    ax.set(xscale="log", ylabel="test error / all-token-mean error")
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_ylim(bottom=0)
    ax.axhline(1, color="grey", ls="--", lw=1)


# ----------------------------------------------------------------------------------------------------------------
# temperature
# ----------------------------------------------------------------------------------------------------------------
def loss_curves_figure(temp: pd.DataFrame, temp_hist: pd.DataFrame):
    """The temperature grid's training loss against step (median over seeds), one line per T and one panel per
    normaliser, relative to the error of predicting the mean of all tokens, so that every panel reads alike."""
    curves = temp_hist.groupby(["normalizer", "T", "step"]).loss.median().reset_index()
    base = temp.groupby("normalizer").mean_mse.mean()
    curves["relative loss"] = curves.loss / curves.normalizer.map(base)
    grid = sns.relplot(
        data=curves,
        x="step",
        y="relative loss",
        hue="T",
        col="normalizer",
        kind="line",
        col_wrap=3,
        height=2.6,
        aspect=1.2,
        palette="viridis",
        hue_norm=plt.matplotlib.colors.LogNorm(),
        legend="full",
    )
    grid.set(yscale="log")
    sns.move_legend(grid, "center", bbox_to_anchor=(0.83, 0.27), ncol=2, title="T")
    grid.figure.suptitle("Training loss / all-token-mean error (median over seeds)", y=1.02)
    return grid.figure


def error_vs_temperature_figure(temp: pd.DataFrame):
    """The final relative test error against T per normaliser: median over seeds, their range shaded."""
    fig, ax = plt.subplots(figsize=(7, 4))
    _relative_error_plot(ax, temp, "T")
    ax.set(xlabel="temperature T")
    return fig


def reached_table(temp: pd.DataFrame) -> pd.DataFrame:
    """How many seeds reach the target loss, one row per T and one column per normaliser."""
    table = summarize(temp, ["normalizer", "T"])
    return table.pivot(index="T", columns="normalizer", values="reached").astype(int)


def gradient_box_figure(temp_hist: pd.DataFrame):
    """The gradient norm of the attention parameters (q and W_k) over every step and seed, per T and normaliser
    (log scale; a zero gradient drawn at :data:`ZERO_GRADIENT`)."""
    g = _step_gradients(temp_hist)
    fig, ax = plt.subplots(figsize=(8, 4))
    sns.boxplot(
        data=g,
        x="T",
        y="grad_norm",
        hue="normalizer",
        palette=plotting.NORMALIZER_COLORS,
        log_scale=True,
        fliersize=1,
        linewidth=0.8,
        ax=ax,
    )
    ax.set(xlabel="temperature T", ylabel="‖∇(q, W_k)‖ per step")
    ax.legend(fontsize=8, ncol=2)
    return fig


def gradient_table(temp: pd.DataFrame, temp_hist: pd.DataFrame) -> pd.DataFrame:
    """Per (normaliser, T): the mean gradient norm, the largest spike, the median relative error, the seeds
    reaching the target and their median steps to it (:func:`summarize`), and the share of steps whose gradient
    is zero (``zero-gradient steps``: a sparse normaliser's runs stall there)."""
    columns = ["grad_mean", "grad_spike", "rel_error", "reached", "steps_to_target"]
    stats = summarize(temp, ["normalizer", "T"]).set_index(["normalizer", "T"])[columns]
    g = _step_gradients(temp_hist)
    stats["zero-gradient steps"] = g.assign(zero=g.grad_norm <= ZERO_GRADIENT).groupby(["normalizer", "T"]).zero.mean()
    return stats


# ----------------------------------------------------------------------------------------------------------------
# N / L and L
# ----------------------------------------------------------------------------------------------------------------
def error_vs_fraction_figure(frac: pd.DataFrame, length: pd.DataFrame, preset: str | TrainingPreset):
    """The relative test error per normaliser against N/L (left, :func:`fraction_runs`; a dotted line at the
    paper's 6 %) and against L at a fixed N/L (right, :func:`length_runs`): median over seeds, range shaded."""
    p = get_preset(preset)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, data, x in ((axes[0], frac, "fraction"), (axes[1], length, "L")):
        _relative_error_plot(ax, data, x, legend=ax is axes[0])
    axes[0].axvline(0.06, color="black", ls=":", lw=1)
    axes[0].set(xlabel=f"N / L (L = {p.L}, T = 1)")
    axes[1].set(xlabel=f"L (N / L = {p.length_fraction:.4g}, T = 1)")
    axes[0].legend(fontsize=8)
    return fig


def gradient_violin_figure(temp: pd.DataFrame, temp_hist: pd.DataFrame):
    """The per-step gradient norms of the attention parameters at T = 1, every seed, one violin per normaliser."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    t1 = temp[temp["T"] == 1.0][["normalizer", "run"]]
    h1 = temp_hist.merge(t1, on=["normalizer", "run"]).dropna(subset=["grad_norm"])
    sns.violinplot(
        data=h1,
        x="normalizer",
        y="grad_norm",
        hue="normalizer",
        cut=0,
        palette=plotting.NORMALIZER_COLORS,
        log_scale=True,
        ax=ax,
    )
    ax.set(xlabel="", ylabel="‖∇(q, W_k)‖ per step (T = 1)")
    ax.tick_params(axis="x", labelsize=8)
    return fig


def fraction_table(frac: pd.DataFrame) -> pd.DataFrame:
    """The median relative test error over seeds, one row per N (of the N/L grid) and one column per normaliser."""
    return summarize(frac, ["normalizer", "N"]).pivot(index="N", columns="normalizer", values="rel_error")
