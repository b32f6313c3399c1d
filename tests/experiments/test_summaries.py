"""attnlimits.experiments.summaries and .shipped: a window's heads summarised exactly as numpy computes them, a run
shipped window by window reads back as the same summaries as the run summarised in memory, and the design's shards
are named, keyed and checked as the book ships them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import tiny_models

from attnlimits import experiments, models
from attnlimits.experiments import shipped, summaries
from attnlimits.experiments.summaries import Summaries
from attnlimits.infra import shipping

TINY_PRESET = tiny_models.experiments_preset()


def test_over_heads_gives_each_windows_statistics_of_its_heads():
    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        {
            "window": np.repeat([3, 5], 40),
            "layer": np.tile(np.repeat([0, 1], 20), 2),
            "head": np.tile(np.arange(20), 4),
            "L": 16,
            "a": rng.lognormal(size=80),
            "b": rng.lognormal(size=80),
        }
    )
    table.loc[7, "a"] = np.nan  # a head without a value is left out of its window's statistics
    out = summaries.over_heads(table, ["L"], ["a", "a/b", "a-b", "a>1"]).set_index(["window", "quantity"])
    for window in (3, 5):
        t = table[table.window == window]
        a = t.a.dropna()
        row = out.loc[(window, "a")]
        assert row.heads == len(a) == (39 if window == 3 else 40)
        assert row.q50 == pytest.approx(np.quantile(a, 0.5), rel=1e-15)
        assert row.q95 == pytest.approx(np.quantile(a, 0.95), rel=1e-15)
        assert (row["min"], row["max"], row["mean"]) == pytest.approx((a.min(), a.max(), a.mean()), rel=1e-15)
        ratio = (t.a / t.b).dropna()
        assert out.loc[(window, "a/b")].q50 == pytest.approx(np.median(ratio), rel=1e-15)  # per head, not of medians
        assert out.loc[(window, "a-b")].q10 == pytest.approx(np.quantile((t.a - t.b).dropna(), 0.1), rel=1e-15)
        assert out.loc[(window, "a>1")]["mean"] == pytest.approx((t.a > 1).mean(), rel=1e-15)
    assert "c" not in summaries.over_heads(table, ["L"], ["a", "c"]).quantity.tolist()  # absent: left out


@pytest.fixture(scope="module")
def tiny_run(tiny_dir, text, tmp_path_factory):
    """The tiny Llama's two windows, each computed alone, in a cache of their own."""
    root = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        model = models.load(str(tiny_dir))
    parts = [experiments.window_results(model, text, TINY_PRESET, w, root=root) for w in range(TINY_PRESET.windows)]
    return model, root, parts


def test_a_window_computed_alone_has_its_own_critical_n_and_the_per_head_tables_of_a_joint_run(tiny_run, text):
    model, root, parts = tiny_run
    joint = experiments.run(model, text, TINY_PRESET)
    merged = experiments.merge(parts)
    for name in ("distance", "separability", "gradient", "sink"):
        pd.testing.assert_frame_equal(getattr(merged, name), getattr(joint, name), check_exact=True, obj=name)
    s = Summaries.of(merged)
    assert sorted(s.critical.window.unique()) == [0, 1] and s.provenance["critical"] == "each window's own search"
    for w, part in enumerate(parts):
        own = part.critical.set_index(["L", "reading", "ks_level"]).critical_N
        mine = s.critical[s.critical.window == w].set_index(["L", "reading", "ks_level"]).critical_N
        pd.testing.assert_series_equal(mine, own.astype("Int64"), check_names=False)
    with pytest.raises(ValueError, match="window"):
        experiments.window_results(model, text, TINY_PRESET, 2, root=root)


def test_a_run_shipped_window_by_window_reads_back_as_its_summaries(tiny_run, text, tmp_path):
    model, root, parts = tiny_run
    for w in range(TINY_PRESET.windows):
        for exclude_sink in (False, True):
            folder = tmp_path / ("no-sink" if exclude_sink else "sink") / f"window-{w}"
            folder.mkdir(parents=True)
            shipped.window_files(model, text, TINY_PRESET, w, folder, exclude_sink=exclude_sink, root=root)
    folders = sorted((tmp_path / "sink").iterdir())
    read = Summaries.read(folders)
    made = Summaries.of(experiments.merge(parts))
    for name in ("distance", "separability", "gradient", "sink", "critical"):
        pd.testing.assert_frame_equal(
            getattr(read, name).reset_index(drop=True), getattr(made, name).reset_index(drop=True), obj=name
        )
    assert read.windows == [0, 1] and read.provenance["shipped"] and read.heads() == made.heads()
    no_sink = Summaries.read(sorted((tmp_path / "no-sink").iterdir()), shared=folders)
    assert not (tmp_path / "no-sink" / "window-0" / "gradient.parquet").exists()  # shared with the sink run
    pd.testing.assert_frame_equal(no_sink.gradient, read.gradient)
    assert set(no_sink.distance.quantity) < set(read.distance.quantity)  # the sink-free run reads E alone
    one = read.without(1)
    assert one.windows == [0] and set(one.distance.window) == {0} and len(one.provenance["window_starts"]) == 1
    with pytest.raises(ValueError, match="window"):
        read.without(7)


def test_the_designs_shards_are_every_window_of_every_run_each_checked_on_its_own(tmp_path, monkeypatch):
    p = experiments.get_preset("paper")
    shards = shipped.shards(p)
    names = [s.name for s in shards]
    assert len(names) == len(set(names)) == len(shipped.RUNS) * p.windows == 3 * 32
    assert "experiments/pydoc-topics/paper-no-sink/window-07-of-32" in names
    assert "experiments/kjv/paper/window-31-of-32" in names
    one = next(s for s in shards if s.name.endswith("pydoc-topics/paper/window-07-of-32"))
    assert one.key["options"] == {"exclude_sink": False, "seed": 0, "window": 7}
    assert one.key["preset"]["windows"] == 32 and one.key["model"]["sha256"] == shipped._model_sha256()
    assert set(shipped.MODULES) <= set(one.wanted()["modules"])
    assert "attnlimits.infra.statistics" in one.wanted()["modules"]  # the summaries' sensitivity reads it
    assert "attnlimits.experiments.paper_claims" not in one.wanted()["modules"]  # the analysis is not computation
    assert shipping.check(shards[:2], tmp_path).status == 2  # nothing shipped there: no manifest
