"""attnlimits.experiments.paper_claims.critical_sensitivity: Figure 2c's critical N on fewer heads (chapter 23), each
window's own search averaged over the windows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from critical_heads import rows_of

from attnlimits.experiments import PRESETS, Results, paper_claims
from attnlimits.experiments.critical_reading import critical_from_heads, critical_head_subsets, one_head_per_group
from attnlimits.experiments.summaries import Summaries, sensitivity
from attnlimits.infra import statistics

PRESET = PRESETS["quick"].as_dict()
TOP = max(PRESET["alg1_L"])
LAYERS, N_HEADS, N_KV_HEADS, WINDOWS = 3, 6, 2, 3
READINGS = {"E": 8.0, "E_full": 2.0}  # how far each reading sits above d~ (times 1 / N): E's critical N is larger
EVERY = LAYERS * N_HEADS


def _heads(window: int) -> pd.DataFrame:
    """One window's critical_heads at the longest L: each reading above d~ by a shift ~ 1 / N (stronger in later
    windows, so that the windows' critical N differ), plus noise per head."""
    rng = np.random.default_rng(window)
    d = rng.gamma(2.0, 1.0, size=EVERY)
    parts = []
    for n in range(1, TOP):
        for reading, shift in READINGS.items():
            expected = d + (1 + window / 2) * shift / n + rng.normal(0, 0.05, size=d.shape)
            parts.append(rows_of(window, LAYERS, N_HEADS, TOP, n, reading, TOP - n, d, expected))
    return pd.concat(parts, ignore_index=True)


def _window(heads: pd.DataFrame, level: float = 0.05, none=()) -> Results:
    """A run of one window whose critical table holds its own critical N at the longest L (NA for the readings in
    ``none``)."""
    found = {r: pd.NA if r in none else critical_from_heads(heads, TOP, r, level) for r in READINGS}
    critical = pd.DataFrame(
        [(TOP, reading, level, found[reading]) for reading in READINGS],
        columns=["L", "reading", "ks_level", "critical_N"],
    ).astype({"critical_N": "Int64"})
    empty = pd.DataFrame()
    window = int(heads.window.iloc[0])
    provenance = {"preset": PRESET, "model": {"n_heads": N_HEADS, "n_kv_heads": N_KV_HEADS}, "windows": [window]}
    return Results(
        distance=empty,
        critical_scan=empty,
        critical=critical,
        critical_heads=heads,
        separability=empty,
        gradient=empty,
        sink=empty,
        provenance=provenance,
    )


def _run(windows, size=EVERY, none=()) -> Summaries:
    """The summaries of ``windows`` (each window's heads searched alone), as the book ships them: each window's
    sensitivity table (:func:`attnlimits.experiments.summaries.sensitivity`)."""
    table = pd.concat(
        [
            sensitivity(_window(h, none=none if i == 0 else ()), size=size).assign(window=i)
            for i, h in enumerate(windows)
        ]
    )
    return Summaries({"sensitivity": table}, {"preset": PRESET, "windows": list(range(len(windows)))})


@pytest.fixture(scope="module")
def windows() -> list[pd.DataFrame]:
    return [_heads(w) for w in range(WINDOWS)]


def test_every_column_averages_each_windows_own_search(windows):
    table = paper_claims.critical_sensitivity(_run(windows), tuple(READINGS))
    assert list(table.index) == list(READINGS) and table.attrs == {"L": TOP, "heads": EVERY}
    for reading, row in table.iterrows():
        own = [critical_from_heads(h, TOP, reading, 0.05) for h in windows]
        assert len(set(own)) > 1  # the windows differ, so a mean over them is not any one window's
        assert row["windows"] == WINDOWS and row["windows without a critical N"] == 0
        assert row["critical N, every head"] == pytest.approx(np.mean(own))
        # a subset of every head is the whole window: median and range collapse onto its critical N
        for end in ("median", "2.5 %", "97.5 %"):
            assert row[f"critical N, {EVERY} heads: {end}"] == pytest.approx(np.mean(own))
        groups = [one_head_per_group(h, N_HEADS, N_KV_HEADS) for h in windows]
        one = [critical_from_heads(h, TOP, reading, 0.05, head_index=g) for h, g in zip(windows, groups, strict=True)]
        assert row["critical N, one head per key/value group"] == pytest.approx(np.mean(one))
        p = [
            statistics.wilcoxon_heads(h[(h.N == n) & (h.reading == reading)], "d_tilde", "expected")[1]
            for h, n in zip(windows, own, strict=True)
        ]
        assert row["share of windows with Wilcoxon p < 0.05"] == pytest.approx(np.mean(np.array(p) < 0.05))
        assert row["heads per Wilcoxon test"] == EVERY


def test_fewer_heads_give_a_range_and_a_window_without_critical_n_counts_as_l(windows):
    table = paper_claims.critical_sensitivity(_run(windows, size=4, none=("E",)), ("E", "E_full"))
    assert {"critical N, 4 heads: median", "critical N, 4 heads: 2.5 %", "critical N, 4 heads: 97.5 %"} <= set(
        table.columns
    )
    e = table.loc["E"]
    assert e["critical N, 4 heads: 2.5 %"] <= e["critical N, 4 heads: median"] <= e["critical N, 4 heads: 97.5 %"]
    subsets = [critical_head_subsets(h, TOP, "E", 0.05, size=4) for h in windows]
    assert e["critical N, 4 heads: median"] == pytest.approx(np.mean([s[0] for s in subsets]))
    # window 0 reached no N: it counts as N = L in the mean, and has no paired test
    own = [TOP] + [critical_from_heads(h, TOP, "E", 0.05) for h in windows[1:]]
    assert e["windows without a critical N"] == 1 and e["critical N, every head"] == pytest.approx(np.mean(own))
    assert e["heads per Wilcoxon test"] == EVERY  # over the windows with a test
    assert table.loc["E_full", "windows without a critical N"] == 0


def test_a_reading_or_a_table_the_run_lacks_is_named(windows):
    with pytest.raises(ValueError, match="E_perm"):
        paper_claims.critical_sensitivity(_run(windows), ("E_perm",))
    alone = Summaries({}, {"preset": PRESET, "windows": [0, 1]})  # a run of several windows read at once
    with pytest.raises(ValueError, match="no per-window sensitivity table"):
        paper_claims.critical_sensitivity(alone)
