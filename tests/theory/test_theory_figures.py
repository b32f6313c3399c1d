"""attnlimits.theory.figures on small inputs: every figure draws one series per row group of its table, on the
scales and with the titles its chapter describes, and a table with more than one value where a title names one
raises."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.container import ErrorbarContainer

import attnlimits as al
from attnlimits.theory import figures, sweeps, synthetic

NAMES = al.normalizers.names("paper")  # the theory chapters show the paper's family


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _scatters(ax) -> list[PathCollection]:
    return [c for c in ax.collections if isinstance(c, PathCollection)]


def test_normalizer_weights_figure_draws_each_normalizers_sorted_weights():
    logits = torch.tensor([0.5, 2.0, -1.0, 1.0, -3.0, 0.0], dtype=torch.float64)
    weights = {name: fn(logits) for name, fn in al.normalizers.NORMALIZERS.items()}
    fig = figures.normalizer_weights_figure(logits, weights)
    assert len(fig.axes) == len(weights)
    order = torch.argsort(logits, descending=True)
    for ax, (name, w) in zip(fig.axes, weights.items(), strict=True):
        heights = [bar.get_height() for bar in ax.patches]
        np.testing.assert_allclose(heights, w[order].numpy())
        assert ax.get_title().startswith(f"{name}\nzeros: {(w == 0).sum().item()}, max:")


def test_max_weight_figure_one_log_log_panel_per_gap_with_the_1_over_L_line():
    lengths = [2, 8, 32]
    by_gap = {gap: sweeps.max_weight_sweep(lengths, gap=gap, draws=2, seed=0) for gap in (0.0, 1.5)}
    fig = figures.max_weight_figure(by_gap)
    assert len(fig.axes) == 2
    for ax, (gap, sweep) in zip(fig.axes, by_gap.items(), strict=True):
        assert ax.get_title() == f"logit gap of the top token: {gap}"
        assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
        lines = ax.get_lines()
        assert [line.get_label() for line in lines] == [*NAMES, "$1/L$"]
        softmax = sweep[sweep.normalizer == "softmax"]
        np.testing.assert_allclose(lines[0].get_ydata(), softmax.max_weight)
        np.testing.assert_allclose(lines[-1].get_ydata(), 1 / np.array(lengths))


def test_selection_geometry_figure_titles_carry_each_panels_fraction():
    small = (synthetic.circle_tokens(8, seed=1), synthetic.gaussian_softmax(8, scale=1.5, seed=2), 3)
    large = (synthetic.circle_tokens(12, seed=3), synthetic.gaussian_softmax(12, scale=1.5, seed=4), 5)
    fig = figures.selection_geometry_figure(small, large)
    a, b, c = fig.axes
    assert a.get_title() == "(a) tokens on the circle, $L=8$, $N=3$"
    rest, chosen = _scatters(a)
    assert (len(rest.get_offsets()), len(chosen.get_offsets())) == (5, 3)
    for ax, panel, (x, alpha, n) in ((b, "b", small), (c, "c", large)):
        fraction = al.selection.distinguishable_fraction(alpha, x, n).item()
        assert ax.get_title() == f"({panel}) $L={len(x)}$, $N={n}$: $N_s/N = {fraction:.2f}$"
        assert sum(len(s.get_offsets()) for s in _scatters(ax)) == len(x) + 1  # weighted tokens and s


def test_corollary1_tightness_figure_one_curve_per_rho_and_the_random_trials():
    tight = sweeps.corollary1_tightness([2, 10, 100], rhos=[0.1, 1.0])
    worst = {2: 0.5, 10: 0.7, 100: 0.9}
    fig = figures.corollary1_tightness_figure(tight, worst)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    extremal, trials, bound = ax.get_lines()[:2], ax.get_lines()[2], ax.get_lines()[3]
    for line, (_, part) in zip(extremal, tight.groupby("rho"), strict=True):
        np.testing.assert_allclose(line.get_ydata(), part.ratio_paper)
    assert list(trials.get_xdata()) == [2, 10, 100] and list(trials.get_ydata()) == [0.5, 0.7, 0.9]
    assert list(bound.get_ydata()) == [1, 1]


def test_vanishing_normalizers_figure_three_panels_on_their_scales():
    sweep = sweeps.vanishing_sweep([2, 8], rho=1.0, rows=2, seed=0)
    fig = figures.vanishing_normalizers_figure(sweep, rho=1.0)
    assert len(fig.axes) == 3
    assert [ax.get_xscale() for ax in fig.axes] == ["log"] * 3
    assert [ax.get_yscale() for ax in fig.axes] == ["log", "linear", "log"]
    columns = ("L_times_max_weight", "zero_fraction", "T_jacobian_norm")
    for ax, column in zip(fig.axes, columns, strict=True):
        for line, name in zip(ax.get_lines(), NAMES, strict=False):
            np.testing.assert_allclose(line.get_ydata(), sweep[sweep.normalizer == name][column])
    assert len(fig.axes[1].get_lines()) == len(NAMES)
    assert fig.axes[0].get_lines()[-1].get_ydata()[0] == pytest.approx(math.exp(2.0))
    assert fig.axes[2].get_lines()[-1].get_ydata()[0] == 0.5


def test_distance_vs_length_figure_one_panel_per_regime():
    sweep = pd.concat(
        synthetic.distance_sweep([8, 16], [2], d=4, rows=2, regime=regime, mc_samples=4)
        for regime in ("bounded", "sink")
    )
    fig = figures.distance_vs_length_figure(sweep)
    assert [ax.get_title() for ax in fig.axes] == ["bounded logits, N = 2", "sink logits, N = 2"]
    for ax, (_, df) in zip(fig.axes, sweep.groupby("regime", sort=False), strict=True):
        assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
        assert len(ax.get_lines()) == 5
        assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 1  # the proved band of E
        np.testing.assert_allclose(ax.get_lines()[-1].get_ydata(), (df.L - 2) * df.s_norm)


def test_distance_vs_length_figure_refuses_several_n():
    sweep = synthetic.distance_sweep([8, 16], [2, 3], d=4, rows=2, mc_samples=4)
    with pytest.raises(ValueError, match="N"):
        figures.distance_vs_length_figure(sweep)


def test_distance_vs_n_figure_leaves_out_n_equal_l():
    sweep = synthetic.distance_sweep([16], [1, 2, 8, 16], d=4, rows=2, regime="sink", mc_samples=4)
    fig = figures.distance_vs_n_figure(sweep)
    ax, bx = fig.axes
    assert ax.get_title() == "L = 16, sink regime"
    assert (ax.get_xscale(), ax.get_yscale(), bx.get_xscale()) == ("log", "log", "log")
    assert list(ax.get_lines()[0].get_xdata()) == [1, 2, 8]
    assert bx.get_ylim() == (0, 1.05)
    np.testing.assert_allclose(bx.get_lines()[0].get_ydata(), sweep.ratio[:3])


def test_separability_vs_n_figure_three_curves_per_beta():
    by_dimension = {
        d: synthetic.separability_sweep([1, 2, 4], L=8, d=d, betas=(0.0, 2.0), samples=4, seed=0) for d in (4, 8)
    }
    fig = figures.separability_vs_n_figure(by_dimension)
    assert [ax.get_title() for ax in fig.axes] == ["d = 4, L = 8", "d = 8, L = 8"]
    for ax, df in zip(fig.axes, by_dimension.values(), strict=True):
        assert ax.get_xscale() == "log"
        lines = ax.get_lines()
        assert len(lines) == 3 * 2
        np.testing.assert_allclose(lines[0].get_ydata(), df[df.beta == 0.0].frac)
        assert [line.get_linestyle() for line in lines[:3]] == ["-", "--", ":"]
    assert fig._suptitle.get_text().startswith("solid: simulated")


def test_multihead_coverage_figure_simulation_with_error_bars_and_both_formulas():
    mh = pd.DataFrame(
        {"H": [1, 2, 3], "simulated": [0.5, 0.7, 0.8], "sd": [0.01] * 3, "paper": [0.5, 0.75, 0.875]}
    ).assign(per_token=[0.5, 0.7, 0.8])
    fig = figures.multihead_coverage_figure(mh, L=32, N=8, d=8, beta=1.0)
    (ax,) = fig.axes
    assert ax.get_title() == "L = 32, N = 8, d = 8, beta = 1"
    assert len([c for c in ax.containers if isinstance(c, ErrorbarContainer)]) == 1
    paper, per_token = ax.get_lines()[-2:]
    assert list(paper.get_ydata()) == [0.5, 0.75, 0.875] and list(per_token.get_ydata()) == [0.5, 0.7, 0.8]


def test_jacobian_scatter_figure_both_readings_and_both_bounds():
    sample = sweeps.jacobian_sample(trials=20, seed=0)
    fig = figures.jacobian_scatter_figure(sample)
    (ax,) = fig.axes
    norm, entry = _scatters(ax)
    np.testing.assert_allclose(norm.get_offsets()[:, 1], sample.T_norm)
    np.testing.assert_allclose(entry.get_offsets()[:, 1], sample.T_entry)
    assert [line.get_ydata()[0] for line in ax.get_lines()] == [0.5, 0.25]


def test_g_vs_temperature_figure_g_and_its_ceiling_per_eps_and_the_paper_curve():
    g = sweeps.g_synthetic([0.1, 1.0, 10.0], eps_grid=(1e-3, 1.0), L=8, seed=0)
    fig = figures.g_vs_temperature_figure(g)
    (ax,) = fig.axes
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    lines = ax.get_lines()
    assert len(lines) == 2 * 2 + 1
    np.testing.assert_allclose(lines[0].get_ydata(), g[g.eps == 1e-3].g)
    np.testing.assert_allclose(lines[1].get_ydata(), g[g.eps == 1e-3].corrected)
    np.testing.assert_allclose(lines[-1].get_ydata(), [math.sqrt(2), 0.25, 0.025])
