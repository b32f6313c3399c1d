"""attnlimits.studies.long_context.report.cost_table: what each long-context run cost (chapter 35)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from attnlimits.studies.long_context import report


def _run(label, layers, heads, capture, total, peak, scope=None):
    prov = {"seconds": {"capture": capture, "total": total}, "peak_memory_gb": peak, "heads": layers * heads}
    if scope is not None:
        prov["peak_memory_scope"] = scope
    return SimpleNamespace(label=label, provenance=prov)


def test_one_row_per_model_with_its_eager_memory_times_and_peak():
    runs = [_run("small", 2, 3, 10.0, 40.0, 1.5, "block"), _run("large", 4, 4, 25.0, 90.0, 3.0)]
    table = report.cost_table(runs, length=1024)
    assert list(table.index) == ["small", "large"]
    columns = ["eager, L = 1024 (GB)", "capture (s)", "study (s)", "peak memory (GB)", "peak of"]
    assert list(table.columns) == columns
    # the run's own peak where it measured one; a cached run from before, or a machine without /proc, the process's
    assert table["peak of"].tolist() == ["the run", "the process"]
    # 6 heads, (1024 x 1024) float32 weights and logits each
    assert table.loc["small", "eager, L = 1024 (GB)"] == pytest.approx(6 * 1024**2 * 4 * 2 / 1e9)
    assert table.loc["large"].iloc[1:4].tolist() == [25.0, 90.0, 3.0]
