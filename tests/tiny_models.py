"""Tiny random-init Hugging Face models, built the same way wherever a test needs one (seconds, no download).

``import tiny_models`` from any test (tests/ is on the path: its conftest.py sits there). Each builder seeds torch
first, so a given call gives the same weights in every test file.
"""

from __future__ import annotations

import pytest
import torch


def llama(*, seed=1, vocab=300, positions=64, layers=2, heads=4, kv_heads=2, hidden=64, intermediate=96):
    """A Llama (rotary positions, grouped key/value heads: ``heads`` query heads share ``kv_heads``)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        hidden_size=hidden,
        intermediate_size=intermediate,
        vocab_size=vocab,
        max_position_embeddings=positions,
    )
    return LlamaForCausalLM(config).eval()


def gpt2(*, seed=0, vocab=300, positions=64, layers=2, heads=3, width=48, bos=None, **config):
    """A GPT-2 (learned positions, one key/value head per query head); ``bos``: its BOS and EOS token id;
    ``config``: any other ``GPT2Config`` field."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    if bos is not None:
        config |= {"bos_token_id": bos, "eos_token_id": bos}
    config = GPT2Config(n_layer=layers, n_head=heads, n_embd=width, n_positions=positions, vocab_size=vocab, **config)
    return GPT2LMHeadModel(config).eval()


def fallback_tokenizer():
    """The offline fallback model's tokenizer, loaded offline (its vocabulary sizes the saved tiny models)."""
    from attnlimits import models

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return models.load("fallback").tokenizer


def saved(model, folder, tokenizer=None):
    """``model`` saved in ``folder`` with ``tokenizer`` (default: the fallback's), so that
    ``attnlimits.models.load(str(folder))`` loads it as it would a user's own model; returns ``folder``."""
    model.save_pretrained(folder)
    (tokenizer or fallback_tokenizer()).save_pretrained(folder)
    return folder


def saved_llama(folder, **sizes):
    """A tiny :func:`llama` (``sizes``: its arguments; the vocabulary is the fallback tokenizer's) in ``folder``."""
    tokenizer = fallback_tokenizer()
    return saved(llama(vocab=len(tokenizer), **sizes), folder, tokenizer)


def experiments_preset():
    """The smallest preset the experiments' tests run: two windows of 16 tokens, every algorithm (seconds)."""
    from attnlimits import experiments

    return experiments.Preset(
        name="tiny",
        windows=2,
        alg1_N=2,
        alg1_L=(8, 16),
        alg2_L=16,
        alg2_N=(1, 2, 4),
        alg4_L=16,
        alg4_N=(1, 2, 4),
        alg5_L=16,
        alg5_T=(0.01, 1.0),
        alg5_eps=(0.1,),
    )
