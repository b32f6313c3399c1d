"""attnlimits.infra.profiling: the peak memory of a block, apart from what the process held before; a page's
execution times as one table (Steps)."""

from __future__ import annotations

import pytest

from attnlimits.infra.profiling import Steps


def test_peak_memory_counts_the_block_not_what_ran_before():
    import numpy as np

    from attnlimits.infra.profiling import peak_memory

    big = np.ones(250_000_000)  # 2 GB held, then freed, before the block
    del big
    with peak_memory() as before_only:
        pass
    with peak_memory() as block:
        small = np.ones(50_000_000)  # 0.4 GB inside the block
        small[::4096] = 2.0
        del small
    if block["scope"] == "block":  # Linux: the high-water mark resets on entry
        assert before_only["gb"] < 1.5 and block["gb"] >= 0.4 and block["gb"] < 1.8
    else:
        assert block["scope"] == "process" and block["gb"] >= 2.0


def test_steps_are_one_table_in_the_order_first_recorded():
    steps = Steps()
    with steps.step("read the results"):
        pass
    steps.add("computed by make results", 12.34)
    steps.add("read the results", 1.0)
    table = steps.table()
    assert table.columns.tolist() == ["seconds"] and table.index.name == "step"
    assert table.index.tolist() == ["read the results", "computed by make results"]
    assert 1.0 <= table.seconds.iloc[0] < 2.0 and table.seconds.iloc[1] == 12.3


def test_a_step_is_recorded_when_its_block_fails():
    steps = Steps()
    with pytest.raises(KeyError), steps.step("lookup"):
        raise KeyError("x")
    assert steps.table().index.tolist() == ["lookup"]


def test_a_step_needs_a_name_and_a_time():
    with pytest.raises(ValueError, match="name"):
        Steps().add("", 1.0)
    with pytest.raises(ValueError, match="seconds"):
        Steps().add("x", float("nan"))
