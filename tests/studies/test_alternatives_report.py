"""attnlimits.studies.alternatives.report: chapter 33's tables and figures, and that a new normaliser reaches every one
of them through the registry alone."""

from __future__ import annotations

import dataclasses

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attnlimits.core import normalizers
from attnlimits.infra import plotting
from attnlimits.studies.alternatives import report as show
from attnlimits.studies.alternatives import study as alt

TOY = "toy-normalizer"
TOY_LABEL = "toy (half softmax, half uniform)"


def toy(logits, dim=-1, *, T=1.0):
    """A valid normaliser no study knows: the mean of softmax and the uniform distribution."""
    soft = normalizers.softmax(logits, dim, T=T)
    return 0.5 * soft + 0.5 / soft.shape[dim]


@pytest.fixture
def with_toy(monkeypatch):
    """The registry with the toy normaliser added, as a reader would add one: one entry, no colour."""
    monkeypatch.setitem(normalizers.NORMALIZERS, TOY, normalizers.Normalizer(toy, TOY_LABEL))
    return list(normalizers.NORMALIZERS)


def _seconds(**parts) -> pd.DataFrame:
    return pd.DataFrame({"part": list(parts), "seconds": list(parts.values())})


def _tables(lengths=(8, 16), heads=3) -> alt.AlternativesTables:
    """The study's tables on small synthetic heads, for every registered normaliser."""
    gen = torch.Generator().manual_seed(1)
    scales = torch.linspace(0.5, 4.0, heads, dtype=torch.float64)[:, None, None]
    logits = scales * torch.randn(heads, 2, max(lengths), generator=gen, dtype=torch.float64)
    x = torch.randn(heads, max(lengths), 4, generator=gen, dtype=torch.float64)
    inputs = {L: (logits[:, :, :L], x[:, :L]) for L in lengths}
    top = max(lengths)
    distance = alt.distance_table(inputs, {8: [3], 16: [1, 3, 6, 12]})
    return alt.AlternativesTables(
        weights=alt.weight_table(inputs),
        distance=distance,
        critical=alt.critical_fraction(distance[distance.L == top]),
        jacobian=alt.jacobian_table({top: inputs[top]}, iters=5),
        g=alt.g_table(inputs[top][0], [0.01, 0.1, 1.0], [1e-3], seed=0),
        seconds=_seconds(synthetic=1.0),
    )


def _training_final(names):
    """A training ``final`` table of the shape :func:`attnlimits.studies.training.results` returns."""
    rows = []
    for i, name in enumerate(names):
        for T in (0.01, 0.03, 1.0):
            rows.append(
                {
                    "experiment": "temperature",
                    "normalizer": name,
                    "T": T,
                    "N": 8,
                    "steps_to_target": 10.0 if T == 1 else np.nan,
                    "rel_error": 0.1,
                    "seconds": 1.0,
                    "L": 128,
                }
            )
        for N in (2, 64):
            rows.append({"experiment": "fraction", "normalizer": name, "T": 1.0, "N": N, "steps_to_target": 5.0,
                         "rel_error": 0.05 * (i + 1), "seconds": 1.0, "L": 128})  # fmt: skip
    return pd.DataFrame(rows)


def _legend_texts(fig) -> set[str]:
    return {t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()}


def test_max_weight_slopes_recovers_power_laws():
    lengths = [8, 16, 32, 64]
    rows = [{"normalizer": name, "L": L, "head": h, "max_weight": (1 + h) * L**exponent}
            for name, exponent in (("a", -1.0), ("b", -0.25)) for L in lengths for h in range(3)]  # fmt: skip
    slopes = show.max_weight_slopes(pd.DataFrame(rows))
    assert list(slopes.index) == ["a", "b"]  # the table's order
    assert slopes["a"] == pytest.approx(-1.0) and slopes["b"] == pytest.approx(-0.25)
    assert slopes.name == "slope of max weight vs L"


def test_critical_table_is_one_column_per_normaliser():
    critical = pd.DataFrame({"normalizer": ["x", "y", "x", "y"], "L": 64, "reading": ["E", "E", "E_full", "E_full"],
                             "critical_fraction": [0.5, 0.75, 0.25, 0.125]})  # fmt: skip
    table = show.critical_table(critical)
    assert table.loc[64, "x"] == 0.5 and table.loc[64, "y"] == 0.75
    assert show.critical_table(critical, "E_full").loc[64, "y"] == 0.125


def test_verdict_table_rows_match_the_tables():
    tables = _tables()
    names = list(normalizers.NORMALIZERS)
    cost = pd.DataFrame({"normalizer": names, "L": 64, "us_per_row": np.arange(len(names), dtype=float)})
    verdict = show.verdict_table(tables, _training_final(names), cost, fixed_N=3, eps=1e-3)
    assert list(verdict.index) == names
    soft = verdict.loc["softmax"]
    g = tables.g
    assert soft["g(0.01)"] == g[(g.normalizer == "softmax") & (g["T"] == 0.01)].g.iloc[0]
    d = tables.distance
    assert soft["N_s/N"] == d[(d.normalizer == "softmax") & (d.L == 16) & (d.N == 3)].ns_frac.mean()
    assert soft["trained at T ≤ 0.03"] == "0/2" and soft["trained at T = 1"] == "1/1"
    assert soft["error at N/L = 1/2"] == pytest.approx(0.05)
    assert soft["max-weight slope"] == show.max_weight_slopes(tables.weights)["softmax"]
    assert verdict.loc["sparsemax", "support"] < soft["support"] == 1.0


def test_a_new_normaliser_reaches_every_table_and_figure(with_toy):
    """Adding one registry entry (no colour) is enough: chapter 33's library calls all show it."""
    tables = _tables()
    names = with_toy
    assert TOY in show.max_weight_slopes(tables.weights).index
    assert TOY in show.critical_table(tables.critical).columns
    cost = alt.row_cost(32, rows=4, repeats=1)
    verdict = show.verdict_table(tables, _training_final(names), cost, fixed_N=3, eps=1e-3)
    assert TOY in verdict.index and verdict.loc[TOY].notna().all()

    figures = {
        "vanishing": show.vanishing_figure(tables.weights),
        "distance": show.distance_figure(tables.distance, 3),
        "gradient": show.gradient_figure(tables.jacobian, tables.g),
        "model": show.model_figure(tables.weights, tables.g, 1e-3),
    }
    try:
        for name, fig in figures.items():
            assert TOY_LABEL in _legend_texts(fig) or f"{TOY_LABEL} d~" in _legend_texts(fig), name
        ticks = [t.get_text() for t in figures["gradient"].axes[0].get_xticklabels()]
        assert TOY_LABEL in ticks  # one box per normaliser
    finally:
        for fig in figures.values():
            plt.close(fig)

    colors = plotting.normalizer_colors(names)
    assert len(set(colors.values())) == len(names)  # the toy gets a colour of its own
    assert {n: colors[n] for n in plotting.NORMALIZER_COLORS} == plotting.NORMALIZER_COLORS


def test_figures_draw_each_normaliser_in_its_registered_colour():
    tables = _tables()
    fig = show.distance_figure(tables.distance, 3)
    try:
        drawn = {line.get_label(): line.get_color() for line in fig.axes[1].get_lines()}
        labels = plotting.normalizer_labels()  # a line is labelled with its entry's label
        for name, color in plotting.NORMALIZER_COLORS.items():
            assert matplotlib.colors.to_rgb(drawn[labels[name]]) == color
    finally:
        plt.close(fig)


def test_execution_times_extrapolate_by_the_work(monkeypatch):
    monkeypatch.setattr(alt, "work", lambda preset: {"synthetic": 10, "model": 20} if preset == "full" else
                        {"synthetic": 1, "model": 2})  # fmt: skip
    monkeypatch.setattr(show.training, "work", lambda preset: 6 if preset == "full" else 2)
    train = _training_final(["softmax"])
    tables = _tables()
    synthetic = dataclasses.replace(tables, seconds=_seconds(synthetic=30.0))
    model = dataclasses.replace(tables, seconds=_seconds(capture=5.0, model=60.0))
    times = show.execution_times(train, synthetic, model, "reduced")
    assert times["computed in (s)"].tolist() == [2.0, 30.0, 60.0]  # training: one time per group, summed
    assert times["full preset, extrapolated (min)"].tolist() == pytest.approx([6 / 60, 300 / 60, 600 / 60])


def test_one_logit_figure_and_zero_weight_table():
    fig = show.one_logit_figure(alt.one_logit_apart([2, 10, 1000]))
    try:
        lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
        assert list(lines) == ["softmax", "scalable-softmax"]
        assert matplotlib.colors.to_rgb(lines["softmax"].get_color()) == plotting.NORMALIZER_COLORS["softmax"]
    finally:
        plt.close(fig)
    tables = _tables()
    zeros = show.zero_weight_table(tables.distance)
    assert list(zeros.columns) == ["N_s/N", "N_s/N, weight > 0", "rows compared"]
    assert list(pd.unique(zeros.index.get_level_values("normalizer"))) == list(pd.unique(tables.distance.normalizer))


def _windows(count=4) -> alt.AlternativesTables:
    """A model's tables on ``count`` windows (each window other synthetic heads), with the sink rates and the
    gamma sweep, as chapter 36 reads them."""
    p = alt.RECENT_PRESETS["quick"].replace(n_points=4, T_grid=(1.0,), gammas=(0.1, 0.3, 1.0, 3.0))
    names = p.normalizer_names()
    parts = []
    for window in range(count):
        gen = torch.Generator().manual_seed(10 + window)
        logits = 2 * torch.randn(3, 2, 16, generator=gen, dtype=torch.float64)
        x = torch.randn(3, 16, 4, generator=gen, dtype=torch.float64)
        inputs = {L: (logits[:, :, :L], x[:, :L]) for L in (8, 16)}
        tables = alt.all_tables(inputs, p, names)
        tables["sink"] = pd.DataFrame({"normalizer": names, "sink_rate": np.linspace(0, 1, len(names))})
        tables["gamma"] = alt.gamma_table(inputs, p.gammas)
        parts.append({k: v.assign(window=window) for k, v in tables.items()})
    merged = {k: pd.concat([part[k] for part in parts], ignore_index=True) for k in parts[0]}
    return alt.AlternativesTables(**merged, seconds=_seconds(model=1.0))


def test_chapter_36_intervals_are_t_intervals_over_the_windows():
    tables = _windows()
    values = show.window_values(tables, fixed_N=3)
    assert len(values) == 4 * len(pd.unique(tables.weights.normalizer))
    tidy, shown = show.interval_table(values)
    # one value per window, by hand: softmax's mean N_s/N at the grid's largest N up to 3, at L = 16
    d = tables.distance[tables.distance.L == 16]
    n = d.N[d.N <= 3].max()
    per_window = d[(d.normalizer == "softmax") & (d.N == n)].groupby("window").ns_frac.mean()
    row = tidy.set_index(["normalizer", "diagnostic"]).loc[("softmax", "N_s/N")]
    half = 3.182446305284263 * per_window.std(ddof=1) / 2  # t(0.975, 3) s / sqrt(4)
    assert row.value == pytest.approx(per_window.mean()) and row.windows == 4
    assert (row.hi - row.lo) / 2 == pytest.approx(half)
    assert list(shown.index) == list(show.DIAGNOSTICS)
    assert list(shown.columns) == list(plotting.normalizer_labels(pd.unique(tidy.normalizer)).values())
    assert shown.loc["N_s/N", "softmax"] == f"{row.value:.2g} ± {half:.1g}"
    # the sink rates were set 0 ... 1 by normaliser: the same in every window, an interval of width 0
    sink = tidy[tidy.diagnostic == "sink rate"]
    assert np.allclose(sink.value, np.linspace(0, 1, len(sink))) and np.allclose(sink.hi - sink.lo, 0)


def test_chapter_36_gamma_figure_marks_each_windows_critical_gamma():
    tables = _windows()
    crit = show.critical_gammas(tables.gamma)
    for window, value in crit.items():
        part = tables.gamma[tables.gamma.window == window]
        assert value == alt.critical_gamma(alt.gamma_slopes(part)) or (np.isnan(value))
    fig = show.gamma_figure(tables.gamma)
    try:
        assert len(fig.axes[0].get_lines()) == 4 + 2  # a line per window, the threshold, the marks
    finally:
        plt.close(fig)


def test_the_model_figure_draws_the_same_pixels_each_time():
    """g's band (seaborn's bootstrap interval over the heads) is seeded: a page drawn twice shows the same figure."""
    import io

    tables = _tables()
    g = pd.concat([tables.g.assign(g=tables.g.g * k) for k in (1.0, 2.0, 5.0)])  # three values per line: a band
    drawn = []
    for _ in range(2):
        fig = show.model_figure(tables.weights, g, 1e-3)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        plt.close(fig)
        drawn.append(buffer.getvalue())
    assert drawn[0] == drawn[1]
