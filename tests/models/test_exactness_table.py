"""attnlimits.models.exactness_table: the exactness report as the table chapter 21 shows and asserts."""

from __future__ import annotations

import pytest
import tiny_models
import torch

from attnlimits import models

#: A report shaped like exactness_report's, with a longer capture compared on its first 128 rows.
REPORT = {
    "weights vs eager output_attentions": 3e-8,
    "softmax(logits) vs weights": 6e-8,
    "float64 weights vs weights": 2e-7,
    "masked entries = each layer's causal mask, all -inf": True,
    "rows 0..127 of L=1024 vs L=128 (weights)": 4e-6,
    "rows 0..127 of L=1024 vs L=128 (logits, relative)": 8e-6,
}


def test_each_check_gets_its_tolerance_and_the_float64_row_none():
    table = models.exactness_table(REPORT)
    assert list(table.index) == list(REPORT)
    assert list(table.columns) == ["max abs difference", "tolerance", "holds"]
    assert table.loc["weights vs eager output_attentions"].tolist() == ["3.00e-08", "1e-06", True]
    assert table.loc["float64 weights vs weights"].tolist() == ["2.00e-07", "—", "—"]
    assert table.loc["masked entries = each layer's causal mask, all -inf"].tolist() == [True, "exact", True]
    # two passes of different lengths: float32 rounding through every layer, held to 1e-5, not 1e-6
    assert table.loc["rows 0..127 of L=1024 vs L=128 (weights)"].tolist() == ["4.00e-06", "1e-05", True]
    assert (table.holds != "—").sum() == len(table) - 1


def test_a_difference_beyond_its_tolerance_or_a_wrong_mask_does_not_hold():
    report = {
        **REPORT,
        "softmax(logits) vs weights": 2e-6,
        "masked entries = each layer's causal mask, all -inf": False,
    }
    holds = models.exactness_table(report).holds
    assert holds.eq(False).sum() == 2
    assert not holds["softmax(logits) vs weights"]
    assert holds["rows 0..127 of L=1024 vs L=128 (weights)"] is True


def test_the_table_of_a_real_report():
    model = tiny_models.gpt2(heads=2, width=16, vocab=100)
    ids = torch.randint(0, 100, (1, 32), generator=torch.Generator().manual_seed(0))
    table = models.exactness_table(models.exactness_report(model, ids, prefix=16))
    assert table.holds.eq(False).sum() == 0 and (table.holds != "—").sum() == len(table) - 1


def test_an_empty_report_is_named():
    with pytest.raises(ValueError, match="report"):
        models.exactness_table({})
