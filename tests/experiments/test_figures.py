"""attnlimits.experiments.figures on a small synthetic run: every figure draws what it says from the per-window
summaries (per window a statistic over its heads, then the median over windows), keeps the spread across a window's
heads apart from the 95 % interval over windows, computes that interval from the windows (the order statistics: the
k-th smallest to the k-th largest window, none below 6 windows), accepts a per-head run as well, and raises naming a
bad argument. The hand computations start from the per-head tables."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.container import ErrorbarContainer

from attnlimits.experiments import PRESETS, Results, figures
from attnlimits.experiments.summaries import Summaries
from attnlimits.infra import medians

PRESET = PRESETS["quick"].as_dict()  # alg1_N 2, alg1_L 16-64, alg2_L 64, alg2_N 1-10, alg4 L 64, alg5_T 6 values
HEADS = [(layer, head) for layer in range(2) for head in range(3)]
WINDOWS = tuple(range(9))  # 9 windows: the interval runs from the 2nd smallest to the 2nd largest


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _window_scale(windows, same):
    """Each window's factor on every value: 1 for all with ``same``, else 1 + w^2 / 8 (1, 1.125, 1.5, ..., 9 on
    windows 0-8: skewed, so the median over windows, window 4's 3, is not the mean, 3.83)."""
    return {w: 1.0 if same else 1.0 + w**2 / 8 for w in windows}


def _distance(windows, same):
    scale, rows = _window_scale(windows, same), []
    grid = [(L, PRESET["alg1_N"]) for L in PRESET["alg1_L"]]
    grid += [(PRESET["alg2_L"], n) for n in PRESET["alg2_N"] if (PRESET["alg2_L"], n) not in grid]
    for w in windows:
        for i, (layer, head) in enumerate(HEADS):
            for L, n in grid:
                for counting in ("visible", "row"):
                    d = scale[w] * (1 + i) ** 2 * L / n  # heads spread unevenly: median and mean differ
                    d_max = 3 * d if counting == "visible" else np.nan
                    rows.append((w, layer, head, L, n, L - n, counting, d, d_max, 2 * d, 1.5 * d, 0.01, 4 * d, 5 * d))
    columns = ["window", "layer", "head", "L", "N", "rows", "counting", "d_tilde", "d_max"]
    return pd.DataFrame(rows, columns=columns + ["E", "E_mc", "E_mc_se", "E_full", "E_perm"])


def _critical(windows):
    """Each window's own critical N (one-window runs merged: ``windows`` "i-i"): E at 6 % of L plus w^2 // 8 (0, 0,
    0, 1, 2, 3, 4, 6, 8 on windows 0-8: skewed, the median is not the mean); E_full at 30 % of L, except window 0 at
    the smallest L, where no N reached the level; E_perm reached no N anywhere."""
    rows = []
    for w in windows:
        for L in PRESET["alg1_L"]:
            for level in (0.05, 0.01):
                full = pd.NA if w == 0 and L == PRESET["alg1_L"][0] else round(0.3 * L)
                rows += [(w, L, "E", level, round(0.06 * L) + w**2 // 8), (w, L, "E_full", level, full)]
                rows.append((w, L, "E_perm", level, pd.NA))
    t = pd.DataFrame(rows, columns=["window", "L", "reading", "ks_level", "critical_N"])
    return t.assign(windows=[f"{w}-{w}" for w in t.window]).astype({"critical_N": "Int64"})


def _separability(windows, same, tokens):
    scale, rows = _window_scale(windows, same), []
    for kind in tokens:
        for w in windows:
            for i, (layer, head) in enumerate(HEADS):
                for n in PRESET["alg4_N"]:
                    v = (0.9 if kind == "value" else 0.2) - 0.01 * i**2 - 0.02 * (scale[w] - 1) - 0.001 * n
                    rows.append((w, layer, head, PRESET["alg4_L"], n, PRESET["alg4_L"] - n, v, v - 0.3, 1.0, 0.5, kind))
    columns = ["window", "layer", "head", "L", "N", "rows", "ns_frac", "lower", "upper", "delta", "tokens"]
    return pd.DataFrame(rows, columns=columns)


def _gradient(windows, same):
    scale, rows = _window_scale(windows, same), []
    for w in windows:
        for i, (layer, head) in enumerate(HEADS):
            for T in PRESET["alg5_T"]:
                for eps in PRESET["alg5_eps"]:
                    for scaling in ("model", "none"):
                        rows.append((w, layer, head, T, eps, scale[w] * (1 + i) ** 2 * 1e-3 / T, scaling))
    return pd.DataFrame(rows, columns=["window", "layer", "head", "T", "eps", "g", "logit_scaling"])


def _sink(windows):
    rows = [(w, layer, head, 0.1 * (1 + i)) for w in windows for i, (layer, head) in enumerate(HEADS)]
    return pd.DataFrame(rows, columns=["window", "layer", "head", "sink_weight"])


def _results(windows=WINDOWS, same=False, tokens=("value",)) -> Results:
    """A per-head run on ``windows`` (each window's own Algorithm 3 search) whose windows differ by a factor (1, 2,
    3, ...) on every value, or are identical."""
    return Results(
        distance=_distance(windows, same),
        critical_scan=pd.DataFrame(columns=["window", "L", "N", "reading", "ks_stat", "p_value"]),
        critical=_critical(windows),
        critical_heads=pd.DataFrame(),
        separability=_separability(windows, same, tokens),
        gradient=_gradient(windows, same),
        sink=_sink(windows),
        provenance={
            "preset": PRESET,
            "exclude_sink": False,
            "windows": list(windows),
            "window_starts": [1000 * w for w in windows],
        },
    )


def _summaries(windows=WINDOWS, **kwargs) -> Summaries:
    """The per-window summaries of :func:`_results`; a single window is the first one's summaries of a run of two
    (a one-window run's summaries need per-head critical tables the synthetic run lacks)."""
    if len(windows) > 1:
        return Summaries.of(_results(windows, **kwargs))
    two = Summaries.of(_results((windows[0], windows[0] + 1), **kwargs))
    return two.without(windows[0] + 1)


def _per_window(table: pd.DataFrame, by: str, column: str, stat) -> pd.DataFrame:
    """By hand from a per-head table: each window's ``stat`` over its heads of ``column`` (rows: ``by``, columns:
    windows)."""
    return table.groupby([by, "window"])[column].agg(stat).unstack("window")


def _by_hand(per_window: pd.DataFrame) -> pd.DataFrame:
    """The median over windows of per-window values (a row per level, a column per window), and its 95 % interval
    over windows: the k-th smallest and the k-th largest window's value (k from medians.order_ranks; NaN with
    fewer than 6 windows)."""
    rows = []
    for row in per_window.to_numpy(float):
        x = np.sort(row)
        ranks = medians.order_ranks(len(x))
        k = ranks[0] if ranks else None
        rows.append((np.median(x), x[k - 1] if k else np.nan, x[len(x) - k] if k else np.nan))
    return pd.DataFrame(rows, index=per_window.index, columns=["value", "lo", "hi"])


def _bars(ax) -> list[ErrorbarContainer]:
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def _bar_ends(container: ErrorbarContainer) -> np.ndarray:
    """(x, lo, hi) of each bar of an error bar container."""
    segments = container.lines[2][0].get_segments()
    return np.array([(s[0, 0], s[0, 1], s[1, 1]) for s in segments])


def _bands(ax) -> list[PolyCollection]:
    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def _band_ys(band: PolyCollection) -> np.ndarray:
    return np.unique(band.get_paths()[0].vertices[:, 1].round(9))


def _labels(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_window_interval_is_the_median_of_window_medians_with_its_order_statistic_interval_over_windows():
    res = _results()
    s = figures.window_interval(Summaries.of(res).alg1(), "L", "d_tilde")
    per_window = _per_window(res.alg1(), "L", "d_tilde", "median")
    expected = _by_hand(per_window)
    assert list(s.index) == list(PRESET["alg1_L"])
    np.testing.assert_allclose(s.to_numpy(), expected.to_numpy(), rtol=1e-12)
    # the windows scale every value by 1 + w^2 / 8: the median is window 4's, the ends windows 1 and 7 (k = 2 of 9)
    np.testing.assert_allclose(s.to_numpy(), per_window[[4, 1, 7]].to_numpy(), rtol=1e-12)
    assert not np.allclose(s.value, per_window.mean(axis=1), rtol=1e-3)  # not the mean over windows
    assert (s.lo < s.value).all() and (s.value < s.hi).all()  # windows that differ: the median moves
    five = figures.window_interval(_summaries(windows=tuple(range(5))).alg1(), "L", "d_tilde")
    np.testing.assert_allclose(five.value, per_window[[0, 1, 2, 3, 4]].median(axis=1), rtol=1e-12)
    assert five[["lo", "hi"]].isna().all().all()  # fewer than 6 windows: no order-statistic interval
    for one in (_summaries(windows=(0,)), _summaries(same=True)):  # one window, identical windows: nothing to move
        s = figures.window_interval(one.alg1(), "L", "d_tilde")
        assert np.allclose(s.lo, s.value) and np.allclose(s.hi, s.value)
    with pytest.raises(ValueError, match="quantity"):
        figures.window_interval(Summaries.of(res).alg1(), "L", "nope")


def test_spread_takes_the_median_over_windows_of_each_windows_quantiles_over_its_heads():
    res = _results()
    s = figures.spread(Summaries.of(res).alg2(), "N", "E")
    t = res.alg2()
    for column, stat in (("median", "median"), ("lo", lambda v: v.quantile(0.1)), ("hi", lambda v: v.quantile(0.9))):
        per_window = _per_window(t, "N", "E", stat)
        np.testing.assert_allclose(s[column], per_window.median(axis=1), rtol=1e-12)
        assert not np.allclose(s[column], per_window.mean(axis=1), rtol=1e-3)  # the windows are skewed
    np.testing.assert_allclose(s["mean"], _per_window(t, "N", "E", "mean").median(axis=1), rtol=1e-12)
    assert (s["median"] < s["mean"]).all()  # heads spread as (1 + i)^2: the two statistics differ


@pytest.mark.parametrize("draw, by", [(figures.distance_vs_length, "L"), (figures.distance_vs_n, "N")])
def test_distance_figures_show_the_heads_band_and_the_windows_bars(draw, by):
    res = _summaries()
    ax = draw(res).axes[0]
    assert len(_bands(ax)) == 3 and len(_bars(ax)) == 3  # d~, E, d_max: a band and bars each
    labels = set(_labels(ax))
    assert {"10-90 % of a window's heads, median over windows (band)", "median, 95 % over windows (bars)"} <= labels
    table = res.alg1() if by == "L" else res.alg2()
    expected = figures.window_interval(table, by, "d_tilde")
    assert np.allclose(_bar_ends(_bars(ax)[0]), np.column_stack([expected.index, expected.lo, expected.hi]))
    assert np.allclose(ax.lines[0].get_ydata(), expected.value)
    band = figures.spread(table, by, "d_tilde")
    assert np.allclose(_band_ys(_bands(ax)[0]), np.unique(np.r_[band.lo, band.hi].round(9)))
    row = draw(res, counting="row").axes[0]  # the row counting has no d_max
    assert len(_bands(row)) == 2 and len(_bars(row)) == 2
    with pytest.raises(ValueError, match="counting"):
        draw(res, counting="all")


@pytest.mark.parametrize("draw, by", [(figures.readings_vs_length, "L"), (figures.readings_vs_n, "N")])
def test_readings_figures_draw_every_reading_with_its_window_band(draw, by):
    res = _summaries()
    ax = draw(res).axes[0]
    assert len(ax.lines) == 5 and len(_bands(ax)) == 5  # d~ and the four readings
    table = res.alg1() if by == "L" else res.alg2()
    e_perm = figures.window_interval(table, by, "E_perm")
    assert np.allclose(ax.lines[4].get_ydata(), e_perm.value)
    assert np.allclose(_band_ys(_bands(ax)[4]), np.unique(np.r_[e_perm.lo, e_perm.hi].round(9)))
    assert "median over windows, 95 % over windows (band)" in _labels(ax)
    one = draw(_summaries(windows=(0,)), counting="row").axes[0]
    for band, line in zip(_bands(one), one.lines, strict=True):  # one window: each band has zero width
        assert np.allclose(_band_ys(band), np.unique(np.round(line.get_ydata(), 9)))
    with pytest.raises(ValueError, match="counting"):
        draw(res, counting="all")


def _critical_by_hand(reading: str, level: float) -> pd.DataFrame:
    """Each window's own critical N (none found: N = L), its median over windows and order-statistic interval,
    per L."""
    c = _critical(WINDOWS)
    c = c[(c.reading == reading) & (c.ks_level == level)]
    n = c.critical_N.astype("Float64").fillna(c.L.astype(float)).astype(float)
    return _by_hand(c.assign(n=n).pivot(index="L", columns="window", values="n"))


def test_critical_over_windows_takes_the_median_of_each_windows_own_critical_n():
    res = _summaries()
    c = res.critical
    full = figures.critical_over_windows(c[(c.reading == "E_full") & (c.ks_level == 0.05)])
    expected = _critical_by_hand("E_full", 0.05)
    np.testing.assert_allclose(full[["value", "lo", "hi"]].to_numpy(), expected.to_numpy(), rtol=1e-12)
    smallest = PRESET["alg1_L"][0]
    assert tuple(full.loc[smallest, ["value", "lo", "hi"]]) == (round(0.3 * smallest),) * 3  # window 0's L: an end
    assert full.reached.tolist() == [8] + [9] * (len(PRESET["alg1_L"]) - 1) and (full.windows == 9).all()
    e = figures.critical_over_windows(c[(c.reading == "E") & (c.ks_level == 0.05)])
    own = {L: round(0.06 * L) + np.array([w**2 // 8 for w in WINDOWS]) for L in PRESET["alg1_L"]}
    np.testing.assert_allclose(e.value, [np.median(own[L]) for L in e.index], rtol=1e-12)  # + 2, not + 24 / 9
    assert figures.critical_over_windows(c[c.reading == "E_perm"]).empty  # no window reached it: no length
    # windows that reached no N count as N = L: they are values of the median and its interval like any other
    found = {100: [10, 20, 30, 40, 50, 60, None, None, None], 200: [10, 20, 30, 40] + [None] * 5, 300: [None] * 9}
    crit = pd.DataFrame(
        [(w, L, n) for L, ns in found.items() for w, n in enumerate(ns)], columns=["window", "L", "critical_N"]
    ).astype({"critical_N": "Int64"})
    got = figures.critical_over_windows(crit.sample(frac=1, random_state=0))  # rows in any order
    assert got.index.tolist() == [100, 200]  # no window reached any N at L = 300: left out
    assert got.loc[100].tolist() == [50, 20, 100, 6, 9]  # sorted 10 ... 60, 100, 100, 100: k = 2
    assert got.loc[200].tolist() == [200, 20, 200, 4, 9]  # five of nine at N = L: the median is L


def test_critical_figure_reads_each_windows_own_critical_n_with_its_interval():
    res = _summaries()
    ax = figures.critical_figure(res).axes[0]
    assert len(_bars(ax)) == 2  # one per KS level
    line = next(li for li in ax.lines if li.get_label().startswith("critical N, KS level 0.05"))
    assert line.get_label() == "critical N, KS level 0.05: a window's own, median over 9 windows"
    e = _critical_by_hand("E", 0.05)
    assert np.allclose(line.get_ydata(), e.value)
    assert np.allclose(_bar_ends(_bars(ax)[1]), np.column_stack([e.index, e.lo, e.hi]))
    full = figures.critical_figure(res, "E_full").axes[0]
    assert any("the rest count as N = L" in label for label in _labels(full))  # window 0 found none at one L
    assert any(li.get_label() == "paper: 0.06 L" for li in full.lines)
    assert not _bars(figures.critical_figure(res, "E_perm").axes[0])  # no window reached it: nothing drawn
    with pytest.raises(ValueError, match="reading"):
        figures.critical_figure(res, "E_typo")


def test_critical_readings_figure_shows_each_reading_against_the_verdict_band():
    res = _summaries()
    ax = figures.critical_readings_figure(res).axes[0]
    lines = {li.get_label(): li for li in ax.lines}
    assert {"E", "paper: 0.06"} <= set(lines) and not any(label.startswith("E_perm") for label in lines)
    e = _critical_by_hand("E", 0.05)
    L = e.index.to_numpy(float)
    assert np.allclose(lines["E"].get_ydata(), e.value / L)
    assert np.allclose(_bar_ends(_bars(ax)[0])[:, 1:], np.column_stack([e.lo / L, e.hi / L]))
    band = [p for p in ax.patches if p.get_label() == "verdict band [0.03, 0.12]"]
    extent = band[0].get_window_extent().transformed(ax.transData.inverted())
    assert len(band) == 1 and np.allclose([extent.y0, extent.y1], [0.03, 0.12])
    with pytest.raises(ValueError, match="level"):
        figures.critical_readings_figure(res, level=0.2)


def _box(ax, x: float) -> dict:
    """The y values a box plot drew at position ``x``: the box's edges, the median and the whiskers' caps."""

    def centre(li):
        return (np.min(li.get_xdata()) + np.max(li.get_xdata())) / 2

    drawn = [li for li in ax.lines if np.ptp(li.get_xdata()) <= 0.5 and np.isclose(centre(li), x)]  # not the bounds
    box = next(li for li in drawn if len(li.get_xdata()) == 5)
    flat = sorted({round(float(li.get_ydata()[0]), 9) for li in drawn if len(set(li.get_ydata())) == 1})
    return {"box": sorted(set(np.round(box.get_ydata(), 9))), "flat": flat}


def test_separability_figure_takes_the_median_over_windows_of_each_windows_quartiles_and_reads_the_value_tokens():
    per_head = _results(tokens=("value", "key"))
    res = Summaries.of(per_head)
    ax = figures.separability_figure(res).axes[0]
    value = per_head.separability[per_head.separability.tokens == "value"]
    quantile = {q: _per_window(value, "N", "ns_frac", lambda v, q=q: v.quantile(q)).median(axis=1) for q in
                (0.05, 0.25, 0.5, 0.75, 0.95)}  # fmt: skip
    for x, n in enumerate(PRESET["alg4_N"]):
        drawn = _box(ax, x)
        assert np.allclose(drawn["box"], [quantile[0.25][n], quantile[0.75][n]])
        assert np.allclose(drawn["flat"], sorted([quantile[0.05][n], quantile[0.5][n], quantile[0.95][n]]))
    (bars,) = _bars(ax)
    expected = _by_hand(_per_window(value, "N", "ns_frac", "median"))
    assert np.allclose(_bar_ends(bars)[:, 1:], expected[["lo", "hi"]].to_numpy())
    assert (_bar_ends(bars)[:, 1] > 0.5).all()  # the key rows (N_s/N about 0.2) are left out
    upper = next(li for li in ax.lines if li.get_label().startswith("upper bound"))
    assert np.allclose(upper.get_ydata(), 1.0)
    assert "a window's heads: quartiles (box), 5-95 % (whiskers)" in _labels(ax)
    assert "median over windows" in ax.get_ylabel()
    key = figures.separability_figure(res, tokens="key").axes[0]
    assert (_bar_ends(_bars(key)[0])[:, 2] < 0.5).all()
    with pytest.raises(ValueError, match="tokens"):
        figures.separability_figure(res, tokens="query")


def test_gradient_figure_draws_the_median_of_window_maxima_and_shades_the_quantiles_interval():
    per_head = _results()
    res = Summaries.of(per_head)
    ax = figures.gradient_figure(res).axes[0]
    (band,) = _bands(ax)  # the maxima's lines have no band of their own
    eps = min(PRESET["alg5_eps"])
    assert band.get_label() == "its 95 % interval (median and order-statistic interval over 9 windows)"
    curve = figures.g_quantile(res, eps)
    pd.testing.assert_frame_equal(figures.g_quantile(per_head, eps), curve)  # a per-head run is summarised first
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(curve.lo.min()) and ys.max() == pytest.approx(curve.hi.max())
    assert ys.max() > curve.value.max() and ys.min() < curve.value.min()  # the windows differ: a real interval
    lines = {li.get_label(): li for li in ax.lines}
    top = lines[f"paper's g: max over a window's heads, eps = {eps:g}"]
    g = per_head.gradient
    g = g[(g.eps == eps) & (g.logit_scaling == "model")]
    assert np.allclose(top.get_ydata(), _per_window(g, "T", "g", "max").median(axis=1), rtol=1e-12, atol=0)
    q95 = lines[f"95th percentile over a window's heads, eps = {eps:g}"]
    per_window = _per_window(g, "T", "g", lambda v: v.quantile(0.95))
    assert np.allclose(q95.get_ydata(), per_window.median(axis=1), rtol=1e-12, atol=0)
    np.testing.assert_allclose(curve.to_numpy(), _by_hand(per_window).to_numpy(), rtol=1e-12)
    same = _summaries(same=True)
    ys = _band_ys(_bands(figures.gradient_figure(same, "none").axes[0])[0])
    value = figures.g_quantile(same, eps, "none").value
    assert np.allclose(ys, np.unique(value.to_numpy().round(9)))  # lo = hi
    with pytest.raises(ValueError, match="scaling"):
        figures.gradient_figure(res, "raw")


def test_every_registered_figure_draws_from_summaries_or_a_per_head_run_and_save_all_writes_each(tmp_path, monkeypatch):
    per_head = _results()
    res = Summaries.of(per_head)
    assert {"fig2a_readings", "fig2b_readings", "fig2c_readings"} <= set(figures.FIGURES)
    for name, draw in figures.FIGURES.items():
        assert draw(res).axes[0].has_data(), name
        plt.close("all")
    for draw in (figures.distance_vs_n, figures.critical_figure):  # a per-head run is summarised first
        assert np.allclose(draw(per_head).axes[0].lines[0].get_ydata(), draw(res).axes[0].lines[0].get_ydata())
    assert figures.drawable(per_head) == figures.drawable(res) == list(figures.FIGURES)
    two = dict(list(figures.FIGURES.items())[:2])  # writing is slow: two figures show the naming
    monkeypatch.setattr(figures, "FIGURES", two)
    paths = figures.save_all(per_head, tmp_path)
    assert sorted(p.name for p in paths) == sorted(f"{n}.{e}" for n in two for e in ("png", "svg"))
    assert all(p.stat().st_size > 1000 for p in paths)
