"""attnlimits.experiments.figures on a small synthetic run: every figure draws what it says (its series, the spread
across
heads and the 95 % interval over windows, kept apart), the interval over windows is computed from the windows,
and bad arguments raise naming the argument."""

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

PRESET = PRESETS["quick"].as_dict()  # alg1_N 2, alg1_L 16-64, alg2_L 64, alg2_N 1-10, alg4 L 64, alg5_T 6 values
HEADS = [(layer, head) for layer in range(2) for head in range(3)]
READINGS = ("E", "E_mc", "E_full", "E_perm")


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _window_scale(windows, same):
    """Each window's factor on every value: 1 for all with ``same``, else 1, 2, 3, ..."""
    return {w: 1.0 if same else 1.0 + w for w in windows}


def _distance(windows, same):
    scale, rows = _window_scale(windows, same), []
    grid = [(L, PRESET["alg1_N"]) for L in PRESET["alg1_L"]]
    grid += [(PRESET["alg2_L"], n) for n in PRESET["alg2_N"] if (PRESET["alg2_L"], n) not in grid]
    for w in windows:
        for i, (layer, head) in enumerate(HEADS):
            for L, n in grid:
                for counting in ("visible", "row"):
                    d = scale[w] * (1 + i) * L / n
                    d_max = 3 * d if counting == "visible" else np.nan
                    rows.append((w, layer, head, L, n, L - n, counting, d, d_max, 2 * d, 1.5 * d, 0.01, 4 * d, 5 * d))
    columns = ["window", "layer", "head", "L", "N", "rows", "counting", "d_tilde", "d_max"]
    return pd.DataFrame(rows, columns=columns + ["E", "E_mc", "E_mc_se", "E_full", "E_perm"])


def _critical(windows):
    rows = []
    for reading, fraction in (("E", 0.06), ("E_full", 0.3), ("E_perm", None)):
        for L in PRESET["alg1_L"]:
            for level in (0.05, 0.01):
                n = pd.NA if fraction is None else round(fraction * L)
                lo, hi = (L, L) if fraction is None else (n - 1, n + 2)
                rows.append((L, reading, level, n, lo, hi, "all", f"0-{len(windows) - 1}"))
    columns = ["L", "reading", "ks_level", "critical_N", "critical_N_lo", "critical_N_hi", "window", "windows"]
    t = pd.DataFrame(rows, columns=columns)
    t.loc[(t.reading == "E_full") & (t.L == PRESET["alg1_L"][0]), ["critical_N_lo", "critical_N_hi"]] = pd.NA
    return t.astype({"critical_N": "Int64", "critical_N_lo": "Int64", "critical_N_hi": "Int64"})


def _separability(windows, same, tokens):
    scale, rows = _window_scale(windows, same), []
    for kind in tokens:
        for w in windows:
            for i, (layer, head) in enumerate(HEADS):
                for n in PRESET["alg4_N"]:
                    v = (0.9 if kind == "value" else 0.2) - 0.01 * i - 0.02 * (scale[w] - 1)
                    rows.append((w, layer, head, PRESET["alg4_L"], n, PRESET["alg4_L"] - n, v, v - 0.3, 1.0, 0.5, kind))
    columns = ["window", "layer", "head", "L", "N", "rows", "ns_frac", "lower", "upper", "delta", "tokens"]
    t = pd.DataFrame(rows, columns=columns)
    return t if len(tokens) > 1 else t.drop(columns="tokens")


def _gradient(windows, same):
    scale, rows = _window_scale(windows, same), []
    for w in windows:
        for i, (layer, head) in enumerate(HEADS):
            for T in PRESET["alg5_T"]:
                for eps in PRESET["alg5_eps"]:
                    for scaling in ("model", "none"):
                        rows.append((w, layer, head, T, eps, scale[w] * (1 + i) * 1e-3 / T, scaling))
    return pd.DataFrame(rows, columns=["window", "layer", "head", "T", "eps", "g", "logit_scaling"])


def _results(windows=(0, 1, 2, 3), same=False, tokens=("value",)) -> Results:
    """A run on ``windows`` whose windows differ by a factor (1, 2, 3, ...) on every value, or are identical."""
    return Results(
        distance=_distance(windows, same),
        critical_scan=pd.DataFrame(),
        critical=_critical(windows),
        critical_heads=pd.DataFrame(),
        separability=_separability(windows, same, tokens),
        gradient=_gradient(windows, same),
        sink=pd.DataFrame(),
        provenance={"preset": PRESET, "exclude_sink": False, "windows": list(windows)},
    )


def _bars(ax) -> list[ErrorbarContainer]:
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def _bar_ends(container: ErrorbarContainer) -> np.ndarray:
    """(x, lo, hi) of each bar of an error bar container."""
    segments = container.lines[2][0].get_segments()
    return np.array([(s[0, 0], s[0, 1], s[1, 1]) for s in segments])


def _bands(ax) -> list[PolyCollection]:
    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def _labels(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_window_interval_is_the_bootstrap_over_windows():
    t = _results().alg1()
    s = figures.window_interval(t, "L", "d_tilde")
    assert list(s.index) == list(PRESET["alg1_L"])
    assert np.allclose(s.value, t.groupby("L").d_tilde.median())
    assert (s.lo < s.value).all() and (s.value < s.hi).all()  # windows 1x..4x: the median moves
    assert np.allclose(s.value - s.lo, s.hi - s.value)  # the jackknife t, symmetric (a BCa interval is not)
    for res in (_results(windows=(0,)), _results(same=True)):  # one window, identical windows: nothing to move
        s = figures.window_interval(res.alg1(), "L", "d_tilde")
        assert np.allclose(s.lo, s.value) and np.allclose(s.hi, s.value)
    with pytest.raises(ValueError, match="column"):
        figures.window_interval(t, "L", "nope")


@pytest.mark.parametrize("draw, by", [(figures.distance_vs_length, "L"), (figures.distance_vs_n, "N")])
def test_distance_figures_show_the_heads_band_and_the_windows_bars(draw, by):
    res = _results()
    ax = draw(res).axes[0]
    assert len(_bands(ax)) == 3 and len(_bars(ax)) == 3  # d~, E, d_max: a band and bars each
    assert {"heads 10-90 % (band)", "median, 95 % over windows (bars)"} <= set(_labels(ax))
    table = res.alg1() if by == "L" else res.alg2()
    expected = figures.window_interval(table, by, "d_tilde")
    assert np.allclose(_bar_ends(_bars(ax)[0]), np.column_stack([expected.index, expected.lo, expected.hi]))
    row = draw(res, counting="row").axes[0]  # the row counting has no d_max
    assert len(_bands(row)) == 2 and len(_bars(row)) == 2
    with pytest.raises(ValueError, match="counting"):
        draw(res, counting="all")


@pytest.mark.parametrize("draw, by", [(figures.readings_vs_length, "L"), (figures.readings_vs_n, "N")])
def test_readings_figures_draw_every_reading_with_its_window_band(draw, by):
    res = _results()
    ax = draw(res).axes[0]
    assert len(ax.lines) == 5 and len(_bands(ax)) == 5  # d~ and the four readings
    table = res.alg1() if by == "L" else res.alg2()
    e_perm = figures.window_interval(table, by, "E_perm")
    assert np.allclose(ax.lines[4].get_ydata(), e_perm.value)
    assert "median, 95 % over windows (band)" in _labels(ax)
    one = draw(_results(windows=(0,)), counting="row").axes[0]
    for band, line in zip(_bands(one), one.lines, strict=True):  # one window: each band has zero width
        ys = band.get_paths()[0].vertices[:, 1]
        assert np.allclose(np.sort(np.unique(np.round(ys, 9))), np.sort(np.unique(np.round(line.get_ydata(), 9))))
    with pytest.raises(ValueError, match="counting"):
        draw(res, counting="all")


def test_critical_figure_reads_one_reading_with_its_interval():
    res = _results()
    ax = figures.critical_figure(res).axes[0]
    assert len(_bars(ax)) == 2  # one per KS level
    e = res.critical[(res.critical.reading == "E") & (res.critical.ks_level == 0.05)].sort_values("L")
    line = next(li for li in ax.lines if li.get_label().startswith("critical N, KS level 0.05"))
    assert np.allclose(line.get_ydata(), e.critical_N.astype(float))
    full = figures.critical_figure(res, "E_full").axes[0]
    ends = _bar_ends(_bars(full)[0])
    assert len(ends) == len(PRESET["alg1_L"]) - 1  # the L without an interval is skipped
    f = res.critical[(res.critical.reading == "E_full") & (res.critical.ks_level == 0.01)].dropna()
    assert np.allclose(ends, f.sort_values("L")[["L", "critical_N_lo", "critical_N_hi"]].to_numpy(float))
    assert any(li.get_label() == "paper: 0.06 L" for li in full.lines)
    assert not _bars(figures.critical_figure(res, "E_perm").axes[0])  # no N reached: nothing drawn
    with pytest.raises(ValueError, match="reading"):
        figures.critical_figure(res, "E_typo")


def test_critical_readings_figure_shows_each_reading_against_the_verdict_band():
    res = _results()
    ax = figures.critical_readings_figure(res).axes[0]
    lines = {li.get_label(): li for li in ax.lines}
    assert {"E", "E_full", "paper: 0.06"} <= set(lines) and "E_perm" not in lines  # E_perm reached no N
    e = res.critical[(res.critical.reading == "E") & (res.critical.ks_level == 0.05)].sort_values("L")
    assert np.allclose(lines["E"].get_ydata(), e.critical_N.astype(float) / e.L)
    assert np.allclose(_bar_ends(_bars(ax)[0])[:, 1:], (e[["critical_N_lo", "critical_N_hi"]].T / e.L).T.astype(float))
    band = [p for p in ax.patches if p.get_label() == "verdict band [0.03, 0.12]"]
    extent = band[0].get_window_extent().transformed(ax.transData.inverted())
    assert len(band) == 1 and np.allclose([extent.y0, extent.y1], [0.03, 0.12])
    with pytest.raises(ValueError, match="level"):
        figures.critical_readings_figure(res, level=0.2)


def test_separability_figure_reads_the_value_tokens_and_their_window_interval():
    res = _results(tokens=("value", "key"))
    ax = figures.separability_figure(res).axes[0]
    (bars,) = _bars(ax)
    value = res.separability[res.separability.tokens == "value"]
    expected = figures.window_interval(value, "N", "ns_frac")
    assert np.allclose(_bar_ends(bars)[:, 1:], expected[["lo", "hi"]].to_numpy())
    assert (_bar_ends(bars)[:, 1] > 0.5).all()  # the key rows (N_s/N = 0.2) are left out
    key = figures.separability_figure(res, tokens="key").axes[0]
    assert (_bar_ends(_bars(key)[0])[:, 2] < 0.5).all()
    figures.separability_figure(_results())  # a table without a tokens column is drawn whole
    with pytest.raises(ValueError, match="tokens"):
        figures.separability_figure(res, tokens="query")


def test_gradient_figure_shades_the_window_interval_of_the_quantile_not_of_the_max():
    res = _results()
    ax = figures.gradient_figure(res).axes[0]
    (band,) = _bands(ax)  # the paper's maximum over heads has no valid interval: no band of its own
    eps = min(PRESET["alg5_eps"])
    assert band.get_label() == "its 95 % interval (jackknife t over 4 windows)"
    curve = figures.g_quantile(res, eps)
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(curve.lo.min()) and ys.max() == pytest.approx(curve.hi.max())
    assert ys.max() > curve.value.max() and ys.min() < curve.value.min()  # the windows differ: a real interval
    assert any("no valid interval" in label for label in _labels(ax))
    same = _results(same=True)
    ys = _bands(figures.gradient_figure(same, "none").axes[0])[0].get_paths()[0].vertices[:, 1]
    value = figures.g_quantile(same, eps, "none").value
    assert np.allclose(np.unique(ys.round(12)), np.unique(value.to_numpy().round(12)))  # lo = hi
    with pytest.raises(ValueError, match="scaling"):
        figures.gradient_figure(res, "raw")


def test_every_registered_figure_draws_and_save_all_writes_each(tmp_path, monkeypatch):
    res = _results()
    assert {"fig2a_readings", "fig2b_readings", "fig2c_readings"} <= set(figures.FIGURES)
    for name, draw in figures.FIGURES.items():
        assert draw(res).axes[0].has_data(), name
        plt.close("all")
    two = dict(list(figures.FIGURES.items())[:2])  # writing is slow: two figures show the naming
    monkeypatch.setattr(figures, "FIGURES", two)
    paths = figures.save_all(res, tmp_path)
    assert sorted(p.name for p in paths) == sorted(f"{n}.{e}" for n in two for e in ("png", "svg"))
    assert all(p.stat().st_size > 1000 for p in paths)
