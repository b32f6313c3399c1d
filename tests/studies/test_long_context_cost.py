"""attnlimits.studies.long_context.report.cost_table: what each long-context run cost (chapter 35)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from attnlimits.studies.long_context import report


def _run(label, layers, heads, capture, total, peak):
    stats = pd.DataFrame([(layer, head) for layer in range(layers) for head in range(heads)], columns=["layer", "head"])
    seconds = {"capture": capture, "total": total}
    return SimpleNamespace(label=label, stats=stats, provenance={"seconds": seconds, "peak_memory_gb": peak})


def test_one_row_per_model_with_its_eager_memory_times_and_peak():
    runs = [_run("small", 2, 3, 10.0, 40.0, 1.5), _run("large", 4, 4, 25.0, 90.0, 3.0)]
    table = report.cost_table(runs, length=1024)
    assert list(table.index) == ["small", "large"]
    assert list(table.columns) == ["eager, L = 1024 (GB)", "capture (s)", "study (s)", "peak memory (GB)"]
    # 6 heads, (1024 x 1024) float32 weights and logits each
    assert table.loc["small", "eager, L = 1024 (GB)"] == pytest.approx(6 * 1024**2 * 4 * 2 / 1e9)
    assert table.loc["large"].iloc[1:].tolist() == [25.0, 90.0, 3.0]
