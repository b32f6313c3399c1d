"""Fixtures the experiments' tests share: a tiny random Llama on disk and the offline text."""

from __future__ import annotations

import pytest
import tiny_models

from attnlimits.models import texts


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """A tiny random Llama saved with the offline fallback's tokenizer, loadable by attnlimits.models.load."""
    return tiny_models.saved_llama(tmp_path_factory.mktemp("tiny-llama"), seed=2, positions=128)


@pytest.fixture(scope="module")
def text():
    """The offline text (pydoc-topics), loaded without the network."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return texts.load()
