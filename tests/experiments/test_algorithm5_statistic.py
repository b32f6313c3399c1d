"""Algorithm 5 (Figure 4) read per window: per T, a statistic over each window's heads of g, then the median over
windows. Figure 4's rules are decided on the 95th percentile over a window's heads: each window's own slope or drop
of that curve, their median over windows, whose order-statistic interval over windows (the k-th smallest to the k-th
largest window) contains its value and names the windows it rests on; the paper's g (a maximum over heads) is read
as the median over windows of each window's maximum, and the printed bound is checked against the largest g of any
head in any window. The hand computations start from the per-head table. (The per-head run's own ``g_max``, each
head pooled over its windows, is checked here too.)"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from attnlimits.experiments import Results, figures
from attnlimits.experiments import paper_claims as pc
from attnlimits.experiments.summaries import SUMMARIZED, Summaries, over_heads
from attnlimits.infra import medians

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


def _summaries(gradient: pd.DataFrame) -> Summaries:
    """The run's per-window summaries (a run of Algorithm 5 alone: the gradient table summarised over heads)."""
    by, quantities = SUMMARIZED["gradient"]
    windows = sorted(int(w) for w in pd.unique(gradient.window))
    return Summaries(
        {"gradient": over_heads(gradient, by, quantities)},
        {"preset": {}, "exclude_sink": False, "windows": windows},
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


def test_per_head_g_max_is_the_max_over_heads_of_each_heads_mean_over_its_windows():
    res = _results(_two_heads())
    by_hand = pd.Series({0.01: max((1.0 + 0.0) / 2, (0.6 + 0.6) / 2) / 0.01, 1.0: 0.6}, name="g").rename_axis("T")
    pd.testing.assert_series_equal(res.g_max(), by_hand)
    assert res.g_max().loc[0.01] == pytest.approx(60.0)  # head (0, 1), pooled: not head (0, 0)'s one window
    assert res.g_max_per_window().loc[0.01] == pytest.approx(100.0)  # the labelled alternative differs
    heads = res.g_heads()
    assert heads.loc[0.01, (0, 0)] == pytest.approx(50.0) and heads.loc[0.01, (0, 1)] == pytest.approx(60.0)
    t = _two_heads()
    t["rows"] = np.where((t.window == "0") & (t["head"] == 0), 3, 1)  # head (0, 0): 3 rows in window 0, 1 in 1
    assert _results(t).g_max().loc[0.01] == pytest.approx((3 * 100.0 + 1 * 0.0) / 4)  # 75 > head (0, 1)'s 60


def test_the_papers_g_read_per_window_is_the_median_of_each_windows_max():
    t = _two_heads().assign(window=lambda d: d.window.astype(int))
    top = pc.g_quantile(_summaries(t), q=None)
    assert top.loc[0.01, "value"] == pytest.approx((100.0 + 60.0) / 2)  # window 0: head (0, 0); window 1: (0, 1)
    assert top.loc[1.0, "value"] == pytest.approx((1.0 + 0.6) / 2)  # the median of two windows: their midpoint
    assert top[["lo", "hi"]].isna().all().all()  # fewer than 6 windows: no order-statistic interval
    third = _table({(2, 0, 0, T): 10.0 / T for T in (0.01, 1.0)} | {(2, 0, 1, T): 0.1 / T for T in (0.01, 1.0)})
    top = pc.g_quantile(_summaries(pd.concat([t, third], ignore_index=True)), q=None)
    assert top.loc[0.01, "value"] == pytest.approx(100.0)  # maxima 100, 60, 1000: the middle, not their mean 387
    assert top.loc[1.0, "value"] == pytest.approx(1.0)
    assert top.attrs["units"] == 3 and top.attrs["stated"] == "median and order-statistic interval over 3 windows"


def _many_heads(windows: int = 6, heads: int = 40, spike: float = 0.0, seed: int = 1, spiked=(0,)) -> pd.DataFrame:
    """Heads whose g grows as T^-0.3 below T = 1 and falls as 1/T above, by ~x50, with noise per (window, head);
    ``spike``: head (0, 0) on the windows ``spiked`` (window 0 alone by default: a single passage) responds as
    ``spike`` T^-0.6 at every T < 1."""
    rng = np.random.default_rng(seed)
    g = {}
    for w in range(windows):
        for h in range(heads):
            a = (1 + h) / heads * np.exp(0.2 * rng.standard_normal())
            for T in TEMPS:
                value = a * T**-0.3 if T < 1 else a * 0.02 / T
                if spike and w in spiked and h == 0 and T < 1:
                    value = spike * T**-0.6
                g[(w, h // 8, h % 8, T)] = value * np.exp(0.05 * rng.standard_normal())
    return _table(g)


def _per_window(t: pd.DataFrame, stat, eps: float = min(EPS), scaling: str = "model") -> pd.DataFrame:
    """By hand: each window's ``stat`` over its heads of g, per T (rows) and window (columns)."""
    t = t[(t.eps == eps) & (t.logit_scaling == scaling)]
    return t.groupby(["T", "window"]).g.agg(stat).unstack("window")


def _q95(values: pd.Series) -> float:
    return values.quantile(pc.G_QUANTILE)


def _order_interval(values) -> tuple[float, float, float]:
    """By hand: the median of per-window values and its 95 % interval, the k-th smallest to the k-th largest value
    (k from medians.order_ranks; NaN with fewer than 6 windows)."""
    x = np.sort(np.asarray(values, float))
    ranks = medians.order_ranks(len(x))
    if ranks is None:
        return float(np.median(x)), np.nan, np.nan
    k = ranks[0]
    return float(np.median(x)), float(x[k - 1]), float(x[len(x) - k])


def _each_windows(number, per_window: pd.DataFrame) -> np.ndarray:
    """``number(T, curve)`` on each window's own curve (a column of ``per_window``, indexed by T)."""
    T = per_window.index.to_numpy(float)
    return np.array([number(T, per_window[w].to_numpy(float)) for w in per_window.columns])


def _slope(T, curve) -> float:
    low = T < 0.1
    return pc.loglog_slope(T[low], curve[low])


def _drop(T, curve) -> float:
    return curve.max() / curve[np.flatnonzero(T >= 1)[0]]


def test_g_quantile_is_the_median_over_windows_of_each_windows_quantile_with_its_order_statistic_interval():
    t = _many_heads(windows=12)
    curve = pc.g_quantile(_summaries(t))
    by_hand = _per_window(t, _q95)
    expected = np.array([_order_interval(row) for row in by_hand.to_numpy()])  # k = 3 of 12 windows
    np.testing.assert_allclose(curve[["value", "lo", "hi"]], expected, rtol=1e-12)
    assert not np.allclose(curve.value, by_hand.mean(axis=1), rtol=1e-6)  # the median over windows, not the mean
    for T, row in curve.iterrows():  # the ends are two windows' own values
        assert row.lo in by_hand.loc[T].to_numpy() and row.hi in by_hand.loc[T].to_numpy()
    assert (curve.lo < curve.value).all() and (curve.value < curve.hi).all()
    assert curve.attrs["units"] == 12 and curve.attrs["method"] == "median"
    assert curve.attrs["stated"] == "median and order-statistic interval over 12 windows"
    median = pc.g_quantile(_summaries(t), eps=0.1, scaling="none", q=0.5)
    np.testing.assert_allclose(median.value, _per_window(t, "median", 0.1, "none").median(axis=1), rtol=1e-12)
    few = pc.g_quantile(_summaries(_many_heads(windows=5)))  # fewer than 6 windows: no interval
    assert few[["lo", "hi"]].isna().all().all() and few.value.notna().all()
    with pytest.raises(ValueError, match="q"):
        pc.g_quantile(_summaries(t), q=0.33)  # a window's summary holds no 33rd percentile


def _claims(res) -> pd.DataFrame:
    return pc.claims(res, "4").set_index("key")


def test_fig4_claims_decide_on_the_median_of_each_windows_own_number_with_its_interval_naming_its_windows():
    t = _many_heads()
    table = _claims(_summaries(t))
    slopes = _each_windows(_slope, _per_window(t, _q95))
    drops = _each_windows(_drop, _per_window(t, _q95))
    row = table.loc["fig4-slope"]
    want = (np.median(slopes), slopes.min(), slopes.max())  # 6 windows: k = 1
    assert (row.value, row.value_lo, row.value_hi) == pytest.approx(want, rel=1e-12)
    row = table.loc["fig4-drop"]  # a ratio: the median of the logs (two windows' geometric mean), mapped back
    middle = np.sort(drops)[2:4]
    assert row.value == pytest.approx(np.sqrt(middle.prod()), rel=1e-12) and row.value != pytest.approx(
        middle.mean(), rel=1e-9
    )
    assert (row.value_lo, row.value_hi) == pytest.approx((drops.min(), drops.max()), rel=1e-12)  # 6 windows: k = 1
    for key in ("fig4-slope", "fig4-drop"):
        row = table.loc[key]
        assert row.value_lo <= row.value <= row.value_hi, key
        assert row.value_lo < row.value_hi, key  # six windows that differ: a real interval
        assert row.units == 6 and "median and order-statistic interval over 6 windows" in row.measured, key
        assert row.verdict == pc.decide(row.value_lo, row.value_hi, pc.INVERSE_T if "slope" in key else pc.DROP)
        assert "95th percentile over a window's heads of g, each window's own curve" in row.rule, key
        assert "of the median over windows of its" in row.rule, key
        assert "(each window's own, their median over the windows)" in row.measured, key
        assert "read per window: each window's maximum over its heads; 6 windows)" in row.measured, key
    assert table.loc["fig4-printed-bound", "units"] == 6


def test_fig4_trends_read_the_quantile_curve_and_show_the_median_of_window_maxima_beside_it():
    t = _many_heads(windows=8, spike=2.0, spiked=range(8))  # one head per window grows as T^-0.6: it tops its heads
    table = _claims(_summaries(t))
    quantile, top = _per_window(t, _q95), _per_window(t, "max")
    slope = np.median(_each_windows(_slope, quantile))
    assert table.loc["fig4-slope", "value"] == pytest.approx(slope, rel=1e-12)
    paper = np.median(_each_windows(_slope, top))
    assert paper < -0.4 and -0.35 < slope < -0.25  # one head of each window moves its max, not its q95
    assert f"8 windows) {paper:.2f};" in table.loc["fig4-slope", "measured"]
    drop = np.median(_each_windows(_drop, top))
    assert f"×{drop:.3g};" in table.loc["fig4-drop", "measured"]
    own = _each_windows(_drop, quantile)
    assert table.loc["fig4-drop", "value"] == pytest.approx(np.exp(np.median(np.log(own))), rel=1e-12)
    curve_drop = _drop(quantile.index.to_numpy(float), quantile.median(axis=1).to_numpy())
    assert table.loc["fig4-drop", "value"] != pytest.approx(curve_drop, rel=1e-9)  # not the drop of the median curve


def test_fig4_printed_bound_reads_the_largest_g_of_any_head_in_any_window():
    t = _many_heads(windows=8, spike=0.6)
    row = _claims(_summaries(t)).loc["fig4-printed-bound"]
    printed = np.minimum(1 / (4 * t["T"]), np.sqrt(2))
    assert row.value == pytest.approx((t.g / printed).max(), rel=1e-12)  # every eps, scaling, window and head
    assert row.verdict == (pc.REPRODUCED if row.value <= 1 else pc.NOT)
    assert "each window's maximum over its heads, the largest over the 8 windows" in row.measured
    assert f"= {(t.g * 2 * t['T']).max():.3f} (the book's sharp bound" in row.measured
    calm = _many_heads(windows=2).assign(g=lambda d: d.g * 1e-3)  # every head far under the printed curve
    assert _claims(_summaries(calm)).loc["fig4-printed-bound", "verdict"] == pc.REPRODUCED


def test_gradient_figure_draws_the_median_of_window_maxima_and_the_quantile_with_its_interval():
    t = _many_heads(windows=8, spike=0.6)
    ax = figures.gradient_figure(_summaries(t)).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    top = lines[f"paper's g: max over a window's heads, eps = {min(EPS):g}"]
    maxima = _per_window(t, "max")
    np.testing.assert_allclose(top.get_ydata(), maxima.median(axis=1), rtol=1e-12)
    assert not np.allclose(top.get_ydata(), maxima.mean(axis=1), rtol=1e-3)  # window 0's spike moves only the mean
    curve = pc.g_quantile(_summaries(t))
    quantile = lines[f"95th percentile over a window's heads, eps = {min(EPS):g}"]
    np.testing.assert_allclose(quantile.get_ydata(), _per_window(t, _q95).median(axis=1), rtol=1e-12)
    np.testing.assert_allclose(curve.value, quantile.get_ydata(), rtol=1e-12)
    (band,) = [c for c in ax.collections if c.get_label().startswith("its 95 % interval")]
    assert band.get_label() == "its 95 % interval (median and order-statistic interval over 8 windows)"
    ys = band.get_paths()[0].vertices[:, 1]
    q95 = _per_window(t, _q95)  # 8 windows: the interval runs from the smallest window to the largest
    np.testing.assert_allclose(curve[["lo", "hi"]], np.column_stack([q95.min(axis=1), q95.max(axis=1)]), rtol=1e-12)
    assert ys.min() == pytest.approx(curve.lo.min()) and ys.max() == pytest.approx(curve.hi.max())
    assert lines["paper: min{1/(4T), $\\sqrt{2}$} (printed)"].get_linestyle() == "--"
    assert "book: 1/(2T) (sharp, every eps)" in lines
    assert "median over windows" in ax.get_ylabel()
    plt.close("all")
