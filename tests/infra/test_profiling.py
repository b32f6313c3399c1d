"""attnlimits.infra.profiling: the peak memory of a block, apart from what the process held before."""

from __future__ import annotations


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
