"""Fixtures the experiments' tests share: tiny random GPT-2 and Llama models captured on random tokens, a tiny random
Llama on disk and the offline text."""

from __future__ import annotations

import pytest
import tiny_models
import torch

from attnlimits import models
from attnlimits.models import texts


def _windows(model, count=2, length=24, seed=0):
    ids = torch.randint(0, 300, (count, length), generator=torch.Generator().manual_seed(seed))
    out = []
    for i, row in enumerate(ids):
        out.append(models.capture(model, row, index=i))
    return out


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def tiny(request):
    """A tiny random GPT-2 or Llama and two windows of 24 random tokens captured on it."""
    model = tiny_models.gpt2(bos=0) if request.param == "gpt2" else tiny_models.llama()
    return model, _windows(model)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def windows(request):
    """Two windows of 200 random tokens of a tiny model."""
    model = tiny_models.gpt2(bos=0, positions=256) if request.param == "gpt2" else tiny_models.llama(positions=256)
    ids = torch.randint(0, 300, (2, 200), generator=torch.Generator().manual_seed(0))
    return [models.capture(model, row, index=i) for i, row in enumerate(ids)]


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
