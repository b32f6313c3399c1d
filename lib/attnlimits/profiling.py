"""Small helpers for measuring and running the library: the memory sampler of a capture and a one-thread scope.

- :func:`measure_capture`  time one capture and sample this process's RSS while it runs (chapter 21, benchmarks).
- :func:`one_thread`       run many tiny tensor operations (Adam ascents, power iterations) on one thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["measure_capture", "one_thread"]


@contextmanager
def one_thread() -> Iterator[None]:
    """Run many tiny tensor ops (Adam ascents) on one thread: thread hand-offs cost more than they save there,
    and far more on a busy machine. The previous setting is restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def measure_capture(model, input_ids, interval: float = 0.005) -> dict:
    """Time one :func:`attnlimits.models.capture` and sample this process's RSS while it runs.

    Returns seconds, peak RSS, RSS before, the bytes the capture holds, and the capture itself.
    """
    import psutil

    from attnlimits.models import capture

    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = [baseline]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            stop.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        cap = capture(model, input_ids)
        seconds = time.perf_counter() - started
        peak[0] = max(peak[0], process.memory_info().rss)
    finally:
        stop.set()
        sampler.join()
    stored = sum(c.nbytes for c in cap)
    return {
        "seq_len": cap.seq_len,
        "seconds": seconds,
        "peak_rss_gb": peak[0] / 1e9,
        "rss_before_gb": baseline / 1e9,
        "captured_gb": stored / 1e9,
        "capture": cap,
    }
