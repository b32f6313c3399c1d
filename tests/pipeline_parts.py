"""Parts of a stand-in results pipeline for the tests of :func:`attnlimits.reporting.book_results.run`: module-level
functions, so that a worker process can import them."""

from __future__ import annotations

import os

import torch

#: The tags of the parts run in this process, in the order they started.
STARTED: list[str] = []


def record(preset: str, tag: str, *, inputs, n_jobs: int, progress) -> dict:
    """What a part sees where it runs: its process, its jobs and threads, the results cache's variable."""
    STARTED.append(tag)
    return {
        "tag": tag,
        "preset": preset,
        "pid": os.getpid(),
        "n_jobs": n_jobs,
        "threads": torch.get_num_threads(),
        "results": os.environ.get("ATTNLIMITS_RESULTS"),
    }


def fail(preset: str, *, inputs, n_jobs: int, progress) -> None:
    raise ValueError("no such thing")
