"""Shared test helpers."""

from __future__ import annotations

import sys

import pytest
import torch

#: The sliding window of the :func:`tiny_gemma` fixture's local layers.
TINY_GEMMA_WINDOW = 4


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


@pytest.fixture(scope="session")
def tiny_gemma():
    """A tiny random-init Gemma 3 (layers: sliding window of 4, full attention, sliding window): the sliding path
    in well under a second, no download."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=TINY_GEMMA_WINDOW,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        max_position_embeddings=256,
    )
    return Gemma3ForCausalLM(config).eval()
