"""Small helpers for measuring and running the library: the peak memory of a block, a page's execution times and
a one-thread scope.

- :func:`peak_memory`      the peak resident memory of a block of code, not of everything the process ran before.
- :class:`Steps`           named steps of a page and the seconds each took, shown as one table at the page's end.
- :func:`one_thread`       run many tiny tensor operations (Adam ascents, power iterations) on one thread.
"""

from __future__ import annotations

import re
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import torch

__all__ = ["Steps", "one_thread", "peak_memory"]

_STATUS, _CLEAR_REFS = Path("/proc/self/status"), Path("/proc/self/clear_refs")


def _high_water_gb() -> float | None:
    """Linux's peak resident set size of this process since it was last reset (VmHWM), in GB; None elsewhere."""
    try:
        found = re.search(r"VmHWM:\s+(\d+)\s+kB", _STATUS.read_text())
    except OSError:
        return None
    return int(found.group(1)) / 1e6 if found else None


@contextmanager
def peak_memory() -> Iterator[dict]:
    """The peak resident memory of the block inside, in GB: yields a dict that holds, on exit, ``gb`` and
    ``scope``. On Linux the peak (VmHWM) is reset on entry (writing 5 to /proc/self/clear_refs), so that what the
    process held before, another study of the same ``attnlimits results`` run say, does not count: ``scope`` is
    "block". Where that cannot be done ``gb`` is the process's peak so far (getrusage) and ``scope`` is
    "process"."""
    out: dict = {}
    try:
        _CLEAR_REFS.write_text("5")
        scoped = _high_water_gb() is not None
    except OSError:
        scoped = False
    try:
        yield out
    finally:
        if scoped:
            out.update(gb=_high_water_gb(), scope="block")
        else:
            out.update(gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, scope="process")


class Steps:
    """The execution times of a page: named steps and the seconds each took, in the order first recorded, so that a
    page shows them once, in one table at its end (:meth:`table`), instead of a timing line after each step.

    ``with steps.step(name):`` times a block; :meth:`add` records a time measured elsewhere (a study's stored compute
    time, say). A name recorded twice adds up."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the block inside (wall clock) and record it under ``name``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        """Record ``seconds`` (a number >= 0) under ``name``."""
        if not name:
            raise ValueError("name: a step needs a name")
        if not seconds >= 0:
            raise ValueError(f"seconds: must be a number >= 0, got {seconds!r}")
        self._seconds[name] = self._seconds.get(name, 0.0) + float(seconds)

    def table(self) -> pd.DataFrame:
        """One row per step, indexed by its name (what a page shows, with no row numbers), its seconds to 0.1 s,
        in the order first recorded."""
        seconds = [round(s, 1) for s in self._seconds.values()]
        return pd.DataFrame({"seconds": seconds}, index=pd.Index(list(self._seconds), name="step"))


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
