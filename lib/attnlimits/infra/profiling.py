"""Small helpers for measuring and running the library: the memory sampler of a capture and a one-thread scope.

- :func:`one_thread`       run many tiny tensor operations (Adam ascents, power iterations) on one thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["one_thread"]


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
