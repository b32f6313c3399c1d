"""One preset system: every study's presets in a Registry of StudyPreset dataclasses, the names meaning the same
everywhere, the grids built by the preset, and the Results accessors that replace hand-written filters."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from attnlimits import experiments
from attnlimits.experiments import Preset, Results
from attnlimits.infra import presets
from attnlimits.studies import alternatives, training

STUDIES = {"experiments": experiments.PRESETS, "alternatives": alternatives.PRESETS, "training": training.PRESETS}


@pytest.mark.parametrize("study", STUDIES)
def test_every_study_keeps_dataclass_presets_under_the_shared_names(study):
    registry = STUDIES[study]
    assert isinstance(registry, presets.Registry)
    assert set(registry) <= set(presets.NAMES)
    for name, preset in registry.items():
        assert isinstance(preset, presets.StudyPreset) and dataclasses.is_dataclass(preset)
        assert preset.name == name
        assert registry.get(name) is preset and registry.get(preset) is preset
        assert preset.as_dict()["name"] == name
    with pytest.raises(ValueError, match="preset: must be one of"):
        registry.get("no-such-preset")


def test_the_book_build_presets_exist_where_they_apply():
    assert {"paper", "reduced", "quick"} <= set(experiments.PRESETS)
    assert {"reduced", "full"} <= set(alternatives.PRESETS)
    assert {"reduced", "full"} <= set(training.PRESETS)


def test_a_registry_refuses_unknown_names_and_foreign_presets():
    paper = experiments.PRESETS["paper"]
    with pytest.raises(ValueError, match="preset names must be among"):
        presets.Registry("x", Preset, dataclasses.replace(paper, name="huge"))
    with pytest.raises(TypeError, match="must be a Preset"):
        presets.Registry("x", Preset, presets.StudyPreset(name="paper"))


def test_distance_grid_is_algorithms_1_and_2_without_repeats():
    p = experiments.PRESETS["paper"]
    grid = p.distance_grid()
    assert grid[p.alg1_N] == list(p.alg1_L)  # 1024 once, though Algorithm 2 asks for it too
    assert set(grid) == {p.alg1_N, *p.alg2_N}
    for n in p.alg2_N:
        assert p.alg2_L in grid[n]
    for lengths in grid.values():
        assert len(lengths) == len(set(lengths))
    q = dataclasses.replace(p, alg1_N=7, alg2_N=(1, 3))
    assert q.distance_grid() == {7: list(p.alg1_L), 1: [p.alg2_L], 3: [p.alg2_L]}


def _fake_results(p: Preset) -> Results:
    """A Results whose tables hold every (L, N) and (T, eps, scaling) combination, more than the preset asks."""
    rng = np.random.default_rng(0)
    lengths, ns = sorted({*p.alg1_L, p.alg2_L, 8}), sorted({p.alg1_N, *p.alg2_N, 3})
    rows = [("0", 0, h, L, n) for h in range(3) for L in lengths for n in ns if n < L]
    distance = pd.DataFrame(rows, columns=["window", "layer", "head", "L", "N"]).assign(
        d_tilde=lambda t: rng.random(len(t)), d_max=1.0, E=0.5, counting="visible"
    )
    grad = [("0", 0, h, T, e, s) for h in range(3) for T in p.alg5_T for e in p.alg5_eps for s in ("model", "none")]
    gradient = pd.DataFrame(grad, columns=["window", "layer", "head", "T", "eps", "logit_scaling"])
    gradient["g"] = rng.random(len(gradient))
    empty = pd.DataFrame()
    return Results(
        distance=distance,
        critical_scan=empty,
        critical=empty,
        critical_heads=empty,
        separability=empty,
        gradient=gradient,
        sink=empty,
        provenance={"preset": p.as_dict()},
    )


def test_results_accessors_select_what_each_algorithm_computed():
    p = experiments.PRESETS["quick"]
    res = _fake_results(p)
    assert res.preset == p
    a1, a2, t = res.alg1(), res.alg2(), res.distance
    assert set(a1.N) == {p.alg1_N} and set(a1.L) == set(p.alg1_L)
    assert len(a1) == len(t[(t.N == p.alg1_N) & t.L.isin(p.alg1_L)]) < len(t)
    assert set(a2.L) == {p.alg2_L} and set(a2.N) == set(p.alg2_N)
    with pytest.raises(ValueError, match="counting: must be one of"):
        res.alg1(counting="all")
    g = res.gradient
    smallest = g[(g.logit_scaling == "model") & (g.eps == min(p.alg5_eps))]
    pd.testing.assert_series_equal(res.g_max(), smallest.groupby("T").g.max())
    raw = g[(g.logit_scaling == "none") & (g.eps == max(p.alg5_eps))]
    pd.testing.assert_series_equal(res.g_max(max(p.alg5_eps), "none"), raw.groupby("T").g.max())
    with pytest.raises(ValueError, match="eps: must be one of"):
        res.g(eps=0.5)
    with pytest.raises(ValueError, match="scaling: must be one of"):
        res.g(scaling="softmax")


def test_the_experiments_chapters_preset_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(experiments.PRESET_VARIABLE, raising=False)
    assert experiments.book_preset() is experiments.PRESETS["paper"]
    monkeypatch.setenv(experiments.PRESET_VARIABLE, "")
    assert experiments.book_preset() is experiments.PRESETS["paper"]
    monkeypatch.setenv(experiments.PRESET_VARIABLE, "quick")
    assert experiments.book_preset() is experiments.PRESETS["quick"]
    monkeypatch.setenv(experiments.PRESET_VARIABLE, "huge")
    with pytest.raises(ValueError, match="ATTNLIMITS_EXPERIMENTS_PRESET: must be one of"):
        experiments.book_preset()
