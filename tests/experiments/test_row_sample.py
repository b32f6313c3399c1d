"""A preset's ``row_stride``: every algorithm reads a stratified sample of each window's rows (every row below
SAMPLE_FROM, then one seeded row per block of ``row_stride``). On a window short enough to be read whole the tables
are the unsampled ones; on a longer one the sampled means are unbiased (their average over seeds is the mean over
every row) and the standard errors in the distance table match the spread of the means over seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import tiny_models
import torch

from attnlimits import experiments, models
from attnlimits.experiments import row_sample

GRID = {5: [32, 100], 1: [100], 20: [100]}
#: The value columns of the distance table without a row sample.
DISTANCE = ["d_tilde", "d_max", "E", "E_mc", "E_mc_se", "E_full", "E_perm"]


def _same(sampled: pd.DataFrame, full: pd.DataFrame, values) -> None:
    keys = [c for c in full.columns if c not in values]
    pd.testing.assert_frame_equal(sampled[keys], full[keys])
    for column in values:
        np.testing.assert_allclose(sampled[column], full[column], rtol=1e-12, atol=1e-15, err_msg=column)


@pytest.mark.parametrize("exclude_sink", [False, True])
def test_a_window_read_whole_by_the_sample_gives_the_unsampled_tables(windows, exclude_sink):
    """L <= SAMPLE_FROM: the sample holds every row (each standing for itself), so every table is the unsampled
    one (to rounding) and the standard errors are 0."""
    full = experiments.distance_table(windows, GRID, exclude_sink=exclude_sink, seed=3)
    sampled = experiments.distance_table(windows, GRID, exclude_sink=exclude_sink, seed=3, row_stride=16)
    assert list(sampled.columns) == [*full.columns, "d_tilde_se", "E_se"]
    _same(sampled[full.columns], full, DISTANCE)
    assert (sampled.d_tilde_se == 0).all() and (sampled.E_se == 0).all()
    scan, critical, heads = experiments.critical_n(windows, [64, 100], seed=3, exclude_sink=exclude_sink)
    s_scan, s_critical, s_heads = experiments.critical_n(
        windows, [64, 100], seed=3, exclude_sink=exclude_sink, row_stride=16
    )
    pd.testing.assert_frame_equal(s_critical, critical)
    pd.testing.assert_frame_equal(s_scan[["L", "N", "reading"]], scan[["L", "N", "reading"]])
    _same(s_heads, heads, ["rows", "d_tilde", "expected"])
    sep = experiments.separability_table(windows, 100, [1, 4, 16], exclude_sink=exclude_sink)
    for bins in (False, True):
        sampled = experiments.separability_table(
            windows, 100, [1, 4, 16], exclude_sink=exclude_sink, stride=16, bins=bins
        )
        _same(sampled, sep, ["ns_frac", "lower", "upper"])
    _same(experiments.sink_table(windows, 100, stride=16), experiments.sink_table(windows, 100), ["sink_weight"])
    T, eps = (0.01, 1.0), (1e-3, 0.1)
    g = experiments.gradient_table(windows, row_sample.GRADIENT_FROM, T, eps, seed=2)
    _same(experiments.gradient_table(windows, row_sample.GRADIENT_FROM, T, eps, seed=2, stride=8), g, ["g"])


def test_algorithm_3_reads_the_rows_of_the_distance_table(windows):
    """With a row stride, Algorithm 3's per-head means of d~ and E at (N, L) are the distance table's at the same
    seed (the same sample of rows, weighted the same way)."""
    _, _, heads = experiments.critical_n(windows, [200], levels=(0.05,), seed=4, readings=("E",), row_stride=8)
    some = sorted(set(heads.N))[:3]
    kw = {"seed": 4, "readings": ("E",), "countings": ("visible",), "row_stride": 8}
    table = experiments.distance_table(windows, {n: [200] for n in some}, **kw)
    merged = heads[heads.N.isin(some)].merge(table, on=["window", "layer", "head", "L", "N"], suffixes=("", "_d"))
    assert len(merged) == len(table) > 0
    np.testing.assert_allclose(merged.d_tilde, merged.d_tilde_d, rtol=1e-6)
    np.testing.assert_allclose(merged.expected, merged.E, rtol=1e-6)
    np.testing.assert_allclose(merged.rows, merged.rows_d)


def test_gradient_and_sink_on_a_sample_are_weighted_means_of_the_sampled_rows(windows):
    """stride=1 samples every row (the unsampled numbers); a coarser stride weighs each sampled row by its block."""
    T, eps = (0.01, 1.0), (1e-3,)
    full = experiments.gradient_table(windows, 200, T, eps, seed=2)
    _same(experiments.gradient_table(windows, 200, T, eps, seed=2, stride=1), full, ["g"])
    sampled = experiments.sink_table(windows, 200, stride=8, seed=5)
    w = windows[1]
    at, weight = row_sample.sample_rows(200, 5 + 1_000_003 * w.index + 7919 * 1, 8)
    alpha, _ = w.inputs(1, 200)
    keep = at >= 1
    expected = (alpha[:, at[keep], 0] * weight[keep]).sum(-1) / weight[keep].sum()
    got = sampled[(sampled.window == "1") & (sampled.layer == 1)].sink_weight.to_numpy()
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="stride: must be None"):
        experiments.sink_table(windows, 200, stride=0)
    with pytest.raises(ValueError, match="row_stride: must be None"):
        experiments.distance_table(windows, {2: [8]}, row_stride=1.5)


@pytest.fixture(scope="module")
def seeds(windows):
    """The distance table on one window with a fine sample (rows below 8 whole, then one row in 8) at many seeds,
    and on every row."""
    one = windows[:1]
    kw = {"readings": ("E",), "countings": ("visible",)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(row_sample, "SAMPLE_FROM", 8)
        runs = [experiments.distance_table(one, {3: [200]}, seed=s, row_stride=8, **kw) for s in range(40)]
    return experiments.distance_table(one, {3: [200]}, **kw), runs


def test_sampled_means_are_unbiased(seeds):
    """The average over 40 seeds of each head's sampled mean lies within 4 standard errors (of that average) of the
    mean over every row, for d~ and E; a single seed differs from it (a sample, not every row)."""
    full, runs = seeds
    assert all((r.rows == full.rows).all() for r in runs)  # the sample stands for every row
    for column in ("d_tilde", "E"):
        values = np.stack([r[column].to_numpy() for r in runs])
        error = values.std(0, ddof=1) / np.sqrt(len(runs))
        z = (values.mean(0) - full[column].to_numpy()) / error
        assert np.all(np.abs(z) < 4), (column, z)
        assert not np.allclose(values[0], full[column])


def test_standard_errors_match_the_spread_over_seeds(seeds):
    """Each head's d_tilde_se and E_se (averaged over seeds) is its means' standard deviation over seeds, within
    the precision 40 seeds give (the median ratio over heads between 0.6 and 1.4, every head's within 0.35-2)."""
    _, runs = seeds
    for column in ("d_tilde", "E"):
        spread = np.stack([r[column].to_numpy() for r in runs]).std(0, ddof=1)
        se = np.stack([r[f"{column}_se"].to_numpy() for r in runs]).mean(0)
        ratio = spread / se
        assert 0.6 < np.median(ratio) < 1.4 and np.all((ratio > 0.35) & (ratio < 2)), (column, ratio)


def test_row_stride_is_validated_and_recorded():
    bad = [0, -4, 1.5, True, "8"]
    for stride in bad:
        with pytest.raises(ValueError, match="row_stride: must be None"):
            experiments.validate_grid(experiments.get_preset("quick").replace(row_stride=stride))
    for name in ("paper", "reduced"):  # the jackknife t covers from 8 windows on
        assert experiments.get_preset(name).windows >= 8 and experiments.get_preset(name).row_stride is not None
    assert experiments.get_preset("quick").row_stride is None
    paper = experiments.get_preset("paper")
    assert paper.as_dict()["row_stride"] == paper.row_stride


def test_row_samples_name_the_blocks_each_reading_reads():
    """Every row with no stride (the exact readings; the costly ones on their own fixed samples), else the
    preset's stride and, for the costly readings, a coarser one; Algorithm 5 always reads every row."""
    exact = row_sample.row_samples(None)
    assert exact == {"rows": None, "critical": row_sample.CRITICAL_STRIDE, "embedding": 4, "gradient": None}
    strided = row_sample.row_samples(64)
    assert strided == {
        "rows": 64,
        "critical": 64 * row_sample.COARSER,
        "embedding": 64 * row_sample.COARSER,
        "gradient": None,
    }
    with pytest.raises(ValueError, match="row_stride"):
        row_sample.row_samples(0)


TINY = tiny_models.experiments_preset()


def test_a_run_reads_windows_spread_over_the_text_and_its_row_sample(tiny_dir, text, monkeypatch):
    """A run's windows are spread over the whole text and its provenance lists their offsets; one window lies at
    the start; a preset with a row stride on windows read whole gives the tables of every row (and the standard
    errors, 0)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = models.load(str(tiny_dir))
    full = experiments.run(model, text, TINY, seed=1)
    starts = models.windows.windows(model, text, 16, 2, total=2, return_starts=True)[1]
    assert full.provenance["window_starts"] == starts and starts[0] == 0 and starts[1] > 1000
    part = experiments.run(model, text, TINY, windows=1, first_window=1, seed=1)
    assert part.provenance["windows"] == [1] and part.provenance["window_starts"] == starts[1:]
    assert experiments.run(model, text, TINY, windows=1, seed=1).provenance["window_starts"] == [0]
    sampled = experiments.run(model, text, TINY.replace(row_stride=4), seed=1)
    assert sampled.provenance["preset"]["row_stride"] == 4
    _same(sampled.distance[full.distance.columns], full.distance, DISTANCE)
    assert (sampled.distance.d_tilde_se == 0).all()
    pd.testing.assert_frame_equal(sampled.critical, full.critical)
    for name in ("separability", "sink", "gradient"):
        table = getattr(full, name)
        _same(
            getattr(sampled, name), table, [c for c in ("ns_frac", "lower", "upper", "sink_weight", "g") if c in table]
        )


def test_kernels_computed_bin_by_bin_equal_one_call(windows):
    """by_bins (each bin of sampled positions on the columns its rows see) gives what one call on every sampled row
    gives, for the kernels the row-sampled algorithms read."""
    from attnlimits.core import rowstats

    w = windows[0]
    alpha, x = w.inputs(0, 200)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(row_sample, "SAMPLE_FROM", 16)
        at, _ = row_sample.sample_rows(200, 3, 8)
        assert len(row_sample.position_bins(at)) == 5  # rows below 16, then [16, 32), ..., [128, 256)
        a = alpha[:, at]
        for fn, kw, dims in (
            (rowstats.distances, {"ns": [1, 5], "bound": True, "kept": True}, None),
            (rowstats.expectation, {"ns": [1, 5], "full": True}, None),
            (rowstats.separability, {"ns": [1, 4]}, (-1, -2, -1)),
        ):
            one = fn(a, x, positions=at, first=1, **kw)
            binned = row_sample.by_bins(fn, a, x, at, first=1, row_dims=dims, **kw)
            parts = zip(*(r if isinstance(r, tuple) else (r,) for r in (one, binned)), strict=True)
            for (whole, by_bin), dim in zip(parts, dims or (-1, -1, -1), strict=False):
                counted = (at >= 6).nonzero().squeeze(-1)  # rows with more tokens than any N (the others are not read)
                torch.testing.assert_close(by_bin.index_select(dim, counted), whole.index_select(dim, counted))
