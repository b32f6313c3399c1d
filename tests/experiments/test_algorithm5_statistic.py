"""Algorithm 5 (Figure 4) as the paper computes it: g(T, eps) is the maximum over heads of each head's mean over
its rows, pooled over every window (never a maximum over (head, window) pairs); Figure 4's rules are decided on a
high quantile over heads, whose interval (cluster bootstrap over windows) contains its value and names the windows
it rests on."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from attnlimits.experiments import Results, figures
from attnlimits.experiments import paper_claims as pc
from attnlimits.experiments.paper_claims import figure4

TEMPS = tuple(float(v) for v in 10 ** np.linspace(-3, 2, 11))  # 1e-3 ... 100, T = 1 included
EPS = (1e-3, 0.1)


def _results(gradient: pd.DataFrame) -> Results:
    empty = pd.DataFrame()
    windows = sorted(pd.unique(gradient.window).tolist())
    return Results(
        distance=empty,
        critical_scan=empty,
        critical=empty,
        critical_heads=empty,
        separability=empty,
        gradient=gradient,
        sink=empty,
        provenance={"preset": {}, "exclude_sink": False, "windows": windows},
    )


def _table(g: dict) -> pd.DataFrame:
    """A gradient table from ``{(window, layer, head, T): g}``, the same g at every eps and logit scaling."""
    rows = [
        (w, layer, head, T, eps, value, scaling)
        for (w, layer, head, T), value in g.items()
        for eps in EPS
        for scaling in ("model", "none")
    ]
    return pd.DataFrame(rows, columns=["window", "layer", "head", "T", "eps", "g", "logit_scaling"])


def _two_heads() -> pd.DataFrame:
    """Head (0, 0) responds on window 0 only (1.0, then 0.0); head (0, 1) responds evenly (0.6 on both): the
    largest (head, window) mean is head (0, 0)'s 1.0, the largest head pooled over its windows is head (0, 1)'s."""
    g = {}
    for T in (0.01, 1.0):
        g |= {("0", 0, 0, T): 1.0 / T, ("1", 0, 0, T): 0.0, ("0", 0, 1, T): 0.6 / T, ("1", 0, 1, T): 0.6 / T}
    return _table(g)


def test_g_max_is_the_max_over_heads_of_each_heads_mean_over_its_windows():
    res = _results(_two_heads())
    by_hand = pd.Series({0.01: max((1.0 + 0.0) / 2, (0.6 + 0.6) / 2) / 0.01, 1.0: 0.6}, name="g").rename_axis("T")
    pd.testing.assert_series_equal(res.g_max(), by_hand)
    assert res.g_max().loc[0.01] == pytest.approx(60.0)  # head (0, 1), pooled: not head (0, 0)'s one window
    assert res.g_max_per_window().loc[0.01] == pytest.approx(100.0)  # the labelled alternative differs
    heads = res.g_heads()
    assert heads.loc[0.01, (0, 0)] == pytest.approx(50.0) and heads.loc[0.01, (0, 1)] == pytest.approx(60.0)


def test_g_max_weighs_each_window_by_its_rows_where_the_table_has_them():
    t = _two_heads()
    t["rows"] = np.where((t.window == "0") & (t["head"] == 0), 3, 1)  # head (0, 0): 3 rows in window 0, 1 in 1
    res = _results(t)
    assert res.g_max().loc[0.01] == pytest.approx((3 * 100.0 + 1 * 0.0) / 4)  # 75 > head (0, 1)'s 60
    pooled = figure4._PooledG(res.g())  # the claims' pooling agrees with g_heads, rows and all
    np.testing.assert_allclose(pooled.heads(), res.g_heads().to_numpy())


def _many_heads(windows: int = 6, heads: int = 40, spike: float = 0.0, seed: int = 1) -> pd.DataFrame:
    """Heads whose g grows as T^-0.3 below T = 1 and falls as 1/T above, by ~x50, with noise per (window, head);
    ``spike``: head (0, 0) on window 0 alone responds as ``spike`` T^-0.6 at every T < 1 (a single passage)."""
    rng = np.random.default_rng(seed)
    g = {}
    for w in range(windows):
        for h in range(heads):
            a = (1 + h) / heads * np.exp(0.2 * rng.standard_normal())
            for T in TEMPS:
                value = a * T**-0.3 if T < 1 else a * 0.02 / T
                if spike and w == 0 and h == 0 and T < 1:
                    value = spike * T**-0.6
                g[(str(w), h // 8, h % 8, T)] = value * np.exp(0.05 * rng.standard_normal())
    return _table(g)


def _claims(res) -> pd.DataFrame:
    return pc.claims(res, "4").set_index("key")


def test_fig4_claims_decide_on_the_quantiles_interval_which_contains_its_value_and_names_its_windows():
    res = _results(_many_heads())
    table = _claims(res)
    for key in ("fig4-slope", "fig4-drop"):
        row = table.loc[key]
        assert row.value_lo <= row.value <= row.value_hi, key
        assert row.value_lo < row.value_hi, key  # six windows that differ: a real interval
        assert row.units == 6 and "jackknife t over 6 windows" in row.measured, key
        assert row.verdict == pc.decide(row.value_lo, row.value_hi, pc.INVERSE_T if "slope" in key else pc.DROP)
        assert "95th percentile over heads" in row.rule and "no valid interval" in row.measured
    assert table.loc["fig4-printed-bound", "units"] == 6
    curve = pc.g_quantile(res)
    assert (curve.lo <= curve.value).all() and (curve.value <= curve.hi).all()
    assert curve.attrs["units"] == 6 and curve.attrs["stated"] == "jackknife t over 6 windows"
    np.testing.assert_allclose(curve.value, res.g_heads().quantile(pc.G_QUANTILE, axis=1))


def test_fig4_claims_read_heads_pooled_over_windows_not_per_window_maxima():
    res = _results(_many_heads(windows=8, spike=0.6))  # one head on one window grows as T^-0.6: so does the
    # largest (head, window) mean, while every head pooled over its 8 windows grows as about T^-0.3
    table = _claims(res)
    heads = res.g_heads()
    low = heads.index < 0.1

    def slope(curve: pd.Series) -> float:
        return pc.loglog_slope(curve.index[low], curve.to_numpy()[low])

    quantile = heads.quantile(pc.G_QUANTILE, axis=1)
    assert table.loc["fig4-slope", "value"] == pytest.approx(slope(quantile))
    paper, per_window = slope(res.g_max()), slope(res.g_max_per_window())
    assert per_window < -0.5 and -0.4 < paper < -0.2  # the spike decides the per-window max, not the pooled
    measured = table.loc["fig4-slope", "measured"]
    assert f"no valid interval) {paper:.2f};" in measured and f"{per_window:.2f}" not in measured
    top = res.g_max()
    drop = top.max() / top.loc[1.0]
    assert f"×{drop:.3g};" in table.loc["fig4-drop", "measured"]
    printed = (heads / np.minimum(1 / (4 * heads.index.to_numpy()), np.sqrt(2))[:, None]).max().max()
    assert table.loc["fig4-printed-bound", "value"] == pytest.approx(printed)  # pooled heads, not one window's


def test_gradient_figure_draws_the_papers_max_and_the_quantile_with_its_interval():
    res = _results(_many_heads(windows=8, spike=0.6))
    ax = figures.gradient_figure(res).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    top = lines[f"paper's g: max over heads, eps = {min(EPS):g} (no valid interval)"]
    np.testing.assert_allclose(top.get_ydata(), res.g_max().to_numpy())
    assert not np.allclose(top.get_ydata(), res.g_max_per_window().to_numpy())
    curve = pc.g_quantile(res)
    np.testing.assert_allclose(lines[f"95th percentile over heads, eps = {min(EPS):g}"].get_ydata(), curve.value)
    (band,) = [c for c in ax.collections if c.get_label().startswith("its 95 % interval")]
    assert band.get_label() == "its 95 % interval (jackknife t over 8 windows)"
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(curve.lo.min()) and ys.max() == pytest.approx(curve.hi.max())
    assert lines["paper: min{1/(4T), $\\sqrt{2}$} (printed)"].get_linestyle() == "--"
    assert "book: 1/(2T) (sharp, every eps)" in lines
    plt.close("all")
