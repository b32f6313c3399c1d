"""Shared test helpers."""

from __future__ import annotations

import sys

import pytest


def clear_memoised_studies() -> list[str]:
    """Empty every ``functools.lru_cache`` of the loaded ``attnlimits`` modules; returns the cleared names.

    The checks memoise their studies (one study serves several checks), so calling a check twice with the same seed
    compares an object with itself unless the caches are emptied in between.
    """
    cleared = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("attnlimits"):
            continue
        for attr, value in list(vars(module).items()):
            if callable(getattr(value, "cache_clear", None)) and hasattr(value, "__wrapped__"):
                if getattr(value, "__module__", None) == name:
                    value.cache_clear()
                    cleared.append(f"{name}.{attr}")
    return cleared


@pytest.fixture
def uncached():
    """A function that empties the checks' memoised studies, so that a second call recomputes from scratch."""
    return clear_memoised_studies
