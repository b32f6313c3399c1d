"""attnlimits.experiments.paper_claims.critical_sensitivity: Figure 2c's critical N on fewer heads (chapter 23)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from critical_heads import rows_of

from attnlimits.experiments import PRESETS, Results, paper_claims
from attnlimits.experiments.critical_reading import critical_from_heads, one_head_per_group
from attnlimits.infra import statistics

PRESET = PRESETS["quick"].as_dict()
TOP = max(PRESET["alg1_L"])
LAYERS, N_HEADS, N_KV_HEADS, WINDOWS = 3, 6, 2, 2
READINGS = {"E": 8.0, "E_full": 2.0}  # how far each reading sits above d~ (times 1 / N): E's critical N is larger


def _heads() -> pd.DataFrame:
    """critical_heads at the longest L: each reading above d~ by a shift ~ 1 / N, plus noise per head."""
    rng = np.random.default_rng(0)
    base = rng.gamma(2.0, 1.0, size=LAYERS * N_HEADS)
    parts = []
    for w in range(WINDOWS):
        d = base + rng.normal(0, 0.3, size=base.shape)
        for n in range(1, TOP):
            for reading, shift in READINGS.items():
                expected = d + shift / n + rng.normal(0, 0.05, size=base.shape)
                parts.append(rows_of(w, LAYERS, N_HEADS, TOP, n, reading, TOP - n, d, expected))
    return pd.concat(parts, ignore_index=True)


def _results(heads: pd.DataFrame, found: dict) -> Results:
    """A Results whose critical table holds ``found`` (reading -> critical N or NA) at the longest L."""
    critical = pd.DataFrame(
        [(TOP, reading, level, found[reading]) for reading in READINGS for level in (0.05, 0.01)],
        columns=["L", "reading", "ks_level", "critical_N"],
    ).astype({"critical_N": "Int64"})
    empty = pd.DataFrame()
    provenance = {"preset": PRESET, "model": {"n_heads": N_HEADS, "n_kv_heads": N_KV_HEADS}}
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


@pytest.fixture(scope="module")
def heads() -> pd.DataFrame:
    return _heads()


def _run_critical(heads, reading):
    return critical_from_heads(heads, TOP, reading, 0.05)


def test_every_column_reads_its_reading_at_the_longest_length(heads):
    found = {reading: _run_critical(heads, reading) for reading in READINGS}
    assert found["E"] > found["E_full"]  # the readings differ, so a row that read the other one shows
    table = paper_claims.critical_sensitivity(_results(heads, found), tuple(READINGS), size=LAYERS * N_HEADS)
    assert list(table.index) == list(READINGS)
    group = one_head_per_group(heads, N_HEADS, N_KV_HEADS)
    for reading, row in table.iterrows():
        assert row[f"critical N at L = {TOP}"] == found[reading]
        # a subset of every head is the whole run: median and range collapse onto its critical N
        every = LAYERS * N_HEADS
        assert row[f"{every} heads: median"] == row[f"{every} heads: 2.5 %"] == row[f"{every} heads: 97.5 %"]
        assert row[f"{every} heads: median"] == found[reading]
        assert row["one head per key/value group"] == critical_from_heads(heads, TOP, reading, 0.05, head_index=group)
        pick = heads[(heads.N == found[reading]) & (heads.reading == reading)]
        assert row["Wilcoxon p at that N"] == statistics.wilcoxon_heads(pick, "d_tilde", "expected")[1]
        assert row["heads"] == LAYERS * N_HEADS


def test_fewer_heads_give_a_range_and_no_critical_n_gives_no_paired_test(heads):
    found = {"E": pd.NA, "E_full": _run_critical(heads, "E_full")}
    table = paper_claims.critical_sensitivity(_results(heads, found), ("E", "E_full"), size=4)
    assert {"4 heads: median", "4 heads: 2.5 %", "4 heads: 97.5 %"} <= set(table.columns)
    assert table.loc["E", "4 heads: 2.5 %"] <= table.loc["E", "4 heads: median"] <= table.loc["E", "4 heads: 97.5 %"]
    assert np.isnan(table.loc["E", "Wilcoxon p at that N"]) and table.loc["E", "heads"] == 0
    assert table.loc["E_full", "heads"] == LAYERS * N_HEADS


def test_a_level_the_run_lacks_is_named(heads):
    res = _results(heads, {reading: _run_critical(heads, reading) for reading in READINGS})
    with pytest.raises(ValueError, match="level"):
        paper_claims.critical_sensitivity(res, ("E",), level=0.1)
    with pytest.raises(ValueError, match="E_perm"):
        paper_claims.critical_sensitivity(res, ("E_perm",))
