"""attnlimits.studies.training.report: chapter 32's tables and figures, on a sweep of seconds."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attnlimits.studies import training  # noqa: E402
from attnlimits.studies.training import report  # noqa: E402

#: Two temperatures, two fractions (one at N_fixed, so that L = 16 joins the length runs) and a second length.
PRESET = training.get_preset("quick").replace(
    name="tiny-report",
    steps=3,
    batch=4,
    pool=8,
    test=8,
    L=16,
    N_fixed=2,
    temperatures=(0.1, 1.0),
    fractions=(0.125, 0.25),
    lengths=(8,),
    length_fraction=0.125,
    normalizers=("softmax", "sparsemax"),
)


@pytest.fixture(scope="module")
def out():
    return training.sweep(PRESET)


def test_the_grids_runs(out):
    temp, temp_hist = report.temperature_runs(out)
    assert set(temp.experiment) == set(temp_hist.experiment) == {"temperature"}
    assert len(temp) == 2 * 2 and len(temp_hist) == len(temp) * PRESET.steps
    frac = report.fraction_runs(out.final)
    assert set(frac.experiment) == {"fraction"} and (frac.fraction == frac.N / frac.L).all()
    length = report.length_runs(out.final, PRESET)
    assert sorted(length.L) == [8, 8, 16, 16] and (length.N / length.L == 0.125).all()


def test_the_tables(out):
    temp, temp_hist = report.temperature_runs(out)
    reached = report.reached_table(temp)
    assert list(reached.index) == [0.1, 1.0] and list(reached.columns) == ["softmax", "sparsemax"]
    assert reached.dtypes.eq(int).all() and reached.le(len(PRESET.seeds)).all().all()
    stats = report.gradient_table(temp, temp_hist)
    assert list(stats.index.names) == ["normalizer", "T"] and len(stats) == 4
    assert stats["zero-gradient steps"].between(0, 1).all()
    rel = report.fraction_table(report.fraction_runs(out.final))
    assert list(rel.index) == [2, 4] and list(rel.columns) == ["softmax", "sparsemax"]
    summary = report.summarize(out.final, ["experiment", "normalizer"])
    assert summary.runs.sum() == len(out.final)


def test_the_figures(out):
    temp, temp_hist = report.temperature_runs(out)
    frac, length = report.fraction_runs(out.final), report.length_runs(out.final, PRESET)
    figures = {
        "loss curves": report.loss_curves_figure(temp, temp_hist),
        "error vs T": report.error_vs_temperature_figure(temp),
        "gradients by T": report.gradient_box_figure(temp_hist),
        "error vs N/L and L": report.error_vs_fraction_figure(frac, length, PRESET),
        "gradients at T = 1": report.gradient_violin_figure(temp, temp_hist),
    }
    panels = {name: len(fig.axes) for name, fig in figures.items()}
    assert panels == {
        "loss curves": 2,  # one per normaliser
        "error vs T": 1,
        "gradients by T": 1,
        "error vs N/L and L": 2,
        "gradients at T = 1": 1,
    }
    assert figures["error vs N/L and L"].axes[0].get_xlabel() == "N / L (L = 16, T = 1)"
    for fig in figures.values():
        plt.close(fig)
