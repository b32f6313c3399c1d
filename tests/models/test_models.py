"""attnlimits.models: resolution and loading errors, the fallback cache, and exact attention capture.

Offline and fast: HF_HUB_OFFLINE is set for every test (no network at all), except the hub-check tests, which
point HF_ENDPOINT at HTTP servers they start on 127.0.0.1. The fallback model is loaded once for the module.
"""

from __future__ import annotations

import socket
import threading
import time
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import tiny_models
import torch
from transformers import GPT2Config

from attnlimits import models
from attnlimits.models import describing, gguf, loading, windows

TOL = 1e-6


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("ATTNLIMITS_MODEL", raising=False)


@pytest.fixture(scope="module")
def fallback():
    """The real offline fallback, loaded once (from attnlimits' cache after the first run on a machine)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return models.load("fallback")


def _gpt2(layers=3, inverse_layer_scaling=False):
    return tiny_models.gpt2(
        layers=layers,
        heads=4,
        width=64,
        positions=128,
        vocab=500,
        scale_attn_by_inverse_layer_idx=inverse_layer_scaling,
    )


def _llama():
    return tiny_models.llama(seed=0, heads=6, kv_heads=2, hidden=96, intermediate=128, vocab=500, positions=256)


TINY = {"gpt2": _gpt2, "gpt2-inverse-layer": lambda: _gpt2(inverse_layer_scaling=True), "llama-gqa": _llama}


# ---------------------------------------------------------------------------------------------------------------
# Capture exactness
# ---------------------------------------------------------------------------------------------------------------


def _check_exact(model, ids, prefix):
    cap = models.capture(model, ids)
    info = describing.config_facts(model.config)
    assert len(cap) == info["n_layers"]
    batch, seq = ids.shape if ids.ndim == 2 else (1, ids.shape[0])
    for layer in cap:
        for name in ("q", "k", "v"):
            assert getattr(layer, name).shape == (batch, info["n_heads"], seq, info["head_dim"]), name
        assert layer.weights.shape == layer.logits.shape == (batch, info["n_heads"], seq, seq)
    ref = models.eager_attentions(model, ids)
    for layer, r in zip(cap, ref, strict=True):
        assert (layer.weights - r).abs().max().item() <= TOL
        assert (torch.softmax(layer.logits, -1) - layer.weights).abs().max().item() <= TOL
        causal = torch.ones(seq, seq, dtype=torch.bool).triu(1)
        assert torch.equal(torch.isneginf(layer.logits), causal.expand_as(layer.logits))
        assert torch.isfinite(layer.logits[..., ~causal]).all()
    short = models.capture(model, ids[..., :prefix])
    for long_layer, short_layer in zip(cap, short, strict=True):
        a, b = long_layer.logits[..., :prefix, :prefix], short_layer.logits
        assert torch.equal(torch.isneginf(a), torch.isneginf(b))
        assert (a[torch.isfinite(a)] - b[torch.isfinite(b)]).abs().max().item() <= 1e-5
        assert (long_layer.weights[..., :prefix, :prefix] - short_layer.weights).abs().max().item() <= TOL
    return cap


@pytest.mark.parametrize("kind", list(TINY))
def test_capture_is_exact_on_random_models(kind):
    model = TINY[kind]()
    ids = torch.randint(0, 500, (2, 40), generator=torch.Generator().manual_seed(1))
    _check_exact(model, ids, prefix=17)
    assert model.config._attn_implementation == "sdpa", "capture must restore the attention implementation"


def test_gpt2_scaling_matches_the_model():
    model = _gpt2(inverse_layer_scaling=True)
    cap = models.capture(model, torch.arange(10))
    assert [c.scaling for c in cap] == pytest.approx([(16**-0.5) / (i + 1) for i in range(3)])
    plain = models.capture(_gpt2(), torch.arange(10))
    assert all(c.scaling == pytest.approx(16**-0.5) for c in plain)


def test_llama_queries_and_keys_are_post_rope_and_kv_expanded():
    """Recompute q and k from each layer's input with the model's own projections and rotary embedding."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    model = _llama()
    ids = torch.randint(0, 500, (1, 24), generator=torch.Generator().manual_seed(2))
    inputs = {}
    hooks = [
        layer.self_attn.register_forward_pre_hook(
            lambda mod, args, kwargs, i=i: inputs.__setitem__(i, kwargs["hidden_states"]), with_kwargs=True
        )
        for i, layer in enumerate(model.model.layers)
    ]
    try:
        cap = models.capture(model, ids)
    finally:
        for h in hooks:
            h.remove()
    positions = torch.arange(ids.shape[1]).unsqueeze(0)
    with torch.no_grad():
        cos, sin = model.model.rotary_emb(inputs[0], positions)
        for i, layer in enumerate(model.model.layers):
            attn, h = layer.self_attn, inputs[i]
            q = attn.q_proj(h).view(1, -1, 6, 16).transpose(1, 2)
            k = attn.k_proj(h).view(1, -1, 2, 16).transpose(1, 2)
            v = attn.v_proj(h).view(1, -1, 2, 16).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            assert torch.allclose(cap[i].q, q, atol=1e-6)
            for head in range(6):  # GQA: query head h reads key/value head h // 3
                assert torch.allclose(cap[i].k[:, head], k[:, head // 3], atol=1e-6)
                assert torch.allclose(cap[i].v[:, head], v[:, head // 3], atol=1e-6)
            assert cap[i].kv_heads == 2
            assert cap[i].scaling == pytest.approx(16**-0.5)


def test_row_keeps_the_visible_keys_and_selection_on_the_whole_row_is_wrong():
    import attnlimits.core.selection as sel

    model = _gpt2()
    cap = models.capture(model, torch.arange(40)[None])
    layer = cap[1]
    for i in (0, 10, 39):
        for h in (0, 3):
            row = layer.row(i, head=h)
            assert torch.equal(row.keys, torch.arange(i + 1))
            assert torch.equal(row.weights, layer.weights[0, h, i, : i + 1])
            assert torch.equal(row.values, layer.v[0, h, : i + 1])
            assert abs(row.weights.double().sum().item() - 1) < TOL
    # The whole captured row of query 10 carries 29 masked keys of weight exactly 0; selection counts them.
    row, whole = layer.row(10, head=0), layer.weights[0, 0, 10]
    assert (whole[11:] == 0).all()
    right = sel.cumulative_distance(row.weights, row.values, 3)
    s = sel.context_vector(row.weights, row.values, 3)
    wrong = sel.cumulative_distance(whole, layer.v[0, 0], 3)
    assert wrong.item() == pytest.approx(right.item() + 29 * s.norm().item(), rel=1e-5)
    # Row 0 sees one key; top-2 of the whole row picks the masked key 1.
    assert sel.top_n(layer.weights[0, 0, 0], 2).tolist() == [0, 1] and len(layer.row(0, head=0).weights) == 1
    for kwargs, name in (({"head": 4}, "head"), ({"head": 0, "batch": 1}, "batch"), ({"head": True}, "head")):
        with pytest.raises(ValueError, match=f"^{name}: expected an integer"):
            layer.row(3, **kwargs)
    with pytest.raises(ValueError, match="^query: expected an integer in 0..39"):
        layer.row(40, head=0)


def test_readme_example_runs(fallback, monkeypatch):
    """The README's example of selection on a captured row, run as written."""
    from pathlib import Path

    import attnlimits.core.selection as sel

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    marker = "<!-- README example: capture-a-row (tests/models/test_models.py runs this block) -->"
    block = readme.split(f"{marker}\n```python\n")[1]
    code = block.split("```")[0]
    monkeypatch.setattr(models, "load", lambda *a, **k: fallback)  # the module's fallback, loaded once
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the project's own README
    row, cap = namespace["row"], namespace["cap"]
    assert len(row.weights) == 11 and torch.equal(row.weights, cap[2].weights[0, 0, 10, :11])
    expected = sel.cumulative_distance(cap[2].weights[0, 0, 10, :11], cap[2].v[0, 0, :11], 3)
    assert namespace["d"].item() == pytest.approx(expected.item(), rel=1e-12)
    assert namespace["selected"].max().item() <= 10


def test_capture_options_and_validation():
    model = _gpt2()
    ids = torch.randint(0, 500, (32,), generator=torch.Generator().manual_seed(3))
    some = models.capture(model, ids, layers=[2, 0])
    assert [c.layer for c in some] == [0, 2] and some.layer_ids == [0, 2] and len(some) == 2
    assert some[2].layer == 2 and some[0].layer == 0, "a Capture is indexed by layer number"
    assert 2 in some and 1 not in some
    with pytest.raises(KeyError, match=r"layer 1 was not captured; this capture holds layers \[0, 2\]"):
        some[1]
    with pytest.raises(IndexError):
        some[5]
    with pytest.raises(TypeError, match="layer number"):
        some["0"]
    assert some.stack("weights").shape == (2, 1, 4, 32, 32)
    exact = models.capture(model, ids, float64=True)
    plain = models.capture(model, ids)
    for a, b in zip(exact, plain, strict=True):
        assert a.weights.dtype == a.logits.dtype == torch.float64
        assert (a.weights - b.weights.double()).abs().max().item() <= TOL
        torch.testing.assert_close(a.weights.sum(-1), torch.ones_like(a.weights.sum(-1)), rtol=0, atol=1e-12)
    again = models.capture(model, ids)
    assert all(torch.equal(a.weights, b.weights) for a, b in zip(again, plain, strict=True)), "not repeatable"
    with pytest.raises(ValueError, match="layers"):
        models.capture(model, ids, layers=[3])
    with pytest.raises(ValueError, match="vocabulary"):
        models.capture(model, torch.tensor([0, 500]))
    with pytest.raises(ValueError, match="integer token ids"):
        models.capture(model, torch.zeros(4))
    with pytest.raises(ValueError, match="exceeds"):
        models.capture(model, torch.zeros(129, dtype=torch.long))
    with pytest.raises(ValueError, match="seq ≥ 1"):
        models.capture(model, torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="name must be"):
        plain.stack("values")


def test_capture_restores_implementation_after_an_error():
    model = _gpt2()
    with pytest.raises(ValueError):
        models.capture(model, torch.tensor([10**6]))
    model.set_attn_implementation("eager")
    models.capture(model, torch.arange(5))
    assert model.config._attn_implementation == "eager"


# ---------------------------------------------------------------------------------------------------------------
# The fallback model (the real one)
# ---------------------------------------------------------------------------------------------------------------


def test_fallback_provenance(fallback):
    p = fallback.provenance
    assert p.source == "fallback" and p.model_id == models.FALLBACK["model_id"]
    assert (p.n_layers, p.n_heads, p.n_kv_heads, p.head_dim) == (30, 9, 3, 64)
    assert p.positional.startswith("RoPE")
    assert len(p.sha256) == 64 and p.weight_file.endswith(models.FALLBACK["gguf_file"])
    assert p.sha256 == models.sha256_file(p.weight_file)
    assert fallback.tokenizer is not None and fallback.encode("War and Peace").ndim == 1


def test_capture_is_exact_on_the_fallback(fallback):
    import attnlimits.models.texts as texts

    ids = windows.windows(fallback, texts.load("pydoc-topics"), 48, 1)
    cap = _check_exact(fallback.model, ids, prefix=20)
    # GQA: 9 query heads share 3 key/value heads, three query heads per group
    assert torch.equal(cap[5].k[:, 0], cap[5].k[:, 2]) and not torch.equal(cap[5].k[:, 0], cap[5].k[:, 3])


def test_offline_gpt2_resolves_to_the_fallback_quickly(fallback, capsys):
    started = time.perf_counter()
    loaded = models.load("gpt2")
    assert time.perf_counter() - started < 30  # cached safetensors; no network (HF_HUB_OFFLINE)
    assert loaded.provenance.source == "fallback" and loaded.provenance.requested == "gpt2"
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "OFFLINE FALLBACK" in out and "gpt2" in out
    with pytest.raises(models.ModelUnavailableError, match="gpt2"):
        models.load("gpt2", allow_fallback=False)


def test_a_named_model_that_cannot_be_found_is_an_error_not_the_fallback(monkeypatch):
    started = time.perf_counter()
    for call in (lambda: models.load("no-such-model"), lambda: models.load("no-such-org/gpt2")):
        with pytest.raises(models.ModelUnavailableError) as err:
            call()
        message = str(err.value)
        assert "could not be loaded" in message and "Hugging Face cache" in message and "offline mode" in message
        assert "allow_fallback=True" in message and "--allow-fallback" in message
    assert "'no-such-org/gpt2'" in message
    monkeypatch.setenv("ATTNLIMITS_MODEL", "no-such-model")  # a model named through the environment, likewise
    with pytest.raises(models.ModelUnavailableError, match="'no-such-model' could not be loaded"):
        models.load()
    with pytest.raises(models.ModelUnavailableError, match="allow_fallback=False forbids"):
        models.load("no-such-model", allow_fallback=False)
    assert time.perf_counter() - started < 30  # offline: no request, no wait
    with pytest.raises(ValueError, match="^allow_fallback must be None, True or False"):
        models.load("no-such-model", allow_fallback="yes")


def test_a_named_model_falls_back_only_when_allowed(fallback, capsys):
    loaded = models.load("no-such-model", allow_fallback=True)
    assert loaded.provenance.source == "fallback" and loaded.provenance.requested == "no-such-model"
    assert loaded.provenance.model_id == models.FALLBACK["model_id"]
    assert "OFFLINE FALLBACK" in capsys.readouterr().out
    assert models.load("openai-community/gpt2").provenance.source == "fallback"  # the paper's model, by its long id


def test_local_directory_without_tokenizer_warns_at_load_and_fails_clearly_on_text(tmp_path, fallback):
    _gpt2().save_pretrained(tmp_path)
    with pytest.warns(models.MissingTokenizerWarning, match="has no tokenizer files") as record:
        loaded = models.load(tmp_path)
    message = str(record[0].message)
    assert str(tmp_path.resolve()) in message and "tokenizer.save_pretrained(" in message
    assert loaded.tokenizer is None
    assert len(models.capture(loaded.model, torch.tensor([[1, 2, 3]]))) == 3  # token ids still work
    with pytest.raises(ValueError, match=r"^tokenizer: the model was loaded without one.*save_pretrained"):
        windows.windows(loaded, "Some text to cut into windows.", 4)
    with pytest.raises(ValueError, match="without a tokenizer.*save_pretrained"):
        loaded.encode("text")
    fallback.tokenizer.save_pretrained(tmp_path)  # the fix the messages name
    with warnings.catch_warnings():
        warnings.simplefilter("error", models.MissingTokenizerWarning)
        assert models.load(tmp_path).tokenizer is not None


def test_environment_variable_overrides_the_default(tmp_path, monkeypatch):
    model = _gpt2()
    model.save_pretrained(tmp_path)
    monkeypatch.setenv("ATTNLIMITS_MODEL", str(tmp_path))
    with pytest.warns(models.MissingTokenizerWarning):
        loaded = models.load()
    assert loaded.provenance.source == "local" and loaded.tokenizer is None
    assert loaded.provenance.sha256 == models.sha256_file(tmp_path / "model.safetensors")
    assert loaded.provenance.positional == "learned absolute position embeddings"
    for a, b in zip(loaded.model.state_dict().values(), model.state_dict().values(), strict=True):
        assert torch.equal(a, b)


# ---------------------------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------------------------


def test_model_id_that_does_not_exist():
    with pytest.raises(models.ModelUnavailableError, match="no-such-org/no-such-model"):
        models.load("no-such-org/no-such-model", allow_fallback=False)
    with pytest.raises(ValueError, match="valid Hugging Face model id"):
        models.load("not a model id!")
    with pytest.raises(FileNotFoundError, match="looks like a path"):
        models.load("./no/such/directory")
    with pytest.raises(ValueError, match="non-empty"):
        models.load("  ")
    with pytest.raises(ValueError, match="device"):
        models.load("gpt2", device="no-such-device")


def test_directory_without_weights(tmp_path):
    _gpt2().config.save_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="no model weights"):
        models.load(tmp_path)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "wrong-shapes"])
def test_corrupt_weight_file(tmp_path, damage):
    _gpt2().save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    if damage == "truncate":
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        weights.write_bytes(b"\x00\x01 not a safetensors file" * 100)
    else:
        _gpt2(layers=3).save_pretrained(tmp_path)
        GPT2Config(n_layer=3, n_head=4, n_embd=128, vocab_size=500).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="corrupt"):
        models.load(tmp_path)


def test_fallback_cache_detects_corruption(tmp_path, capsys):
    model = _llama()
    target = tmp_path / "cached"
    record = gguf.save_cached_model(model, None, target, {"gguf_sha256": "x"})
    assert len(record["safetensors_sha256"]) == 64 and not list(tmp_path.glob(".*tmp*"))
    loaded, _, record_again = gguf.load_cached_model(target, {"gguf_sha256": "x"})
    assert record_again == record
    for a, b in zip(loaded.state_dict().values(), model.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert "different gguf_sha256" in gguf.load_cached_model(target, {"gguf_sha256": "y"})
    weights = target / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert "corrupt" in gguf.load_cached_model(target, {"gguf_sha256": "x"})
    assert gguf.load_cached_model(tmp_path / "absent", {}) == "no cache yet"


# ---------------------------------------------------------------------------------------------------------------
# Hub reachability: bounded, no retries, only 127.0.0.1
# ---------------------------------------------------------------------------------------------------------------


class _Hub(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        code = {"/api/models/known/model": 200, "/api/models/busy/model": 503}.get(self.path, 404)
        self.send_response(code)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def local_hub(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    yield
    server.shutdown()
    server.server_close()


def test_hub_status_against_a_local_server(local_hub):
    assert models.hub_status("known/model")[0] == "found"
    assert models.hub_status("unknown/model")[0] == "missing"
    assert models.hub_status("busy/model")[0] == "reachable"
    with pytest.raises(ValueError, match="no model 'unknown/model' on the Hugging Face Hub"):
        models.load("unknown/model", allow_fallback=False)


def test_hub_that_never_answers_gives_up_in_time(monkeypatch):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts connections, never answers
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{listener.getsockname()[1]}")
    monkeypatch.setattr(loading, "HUB_TIMEOUT_S", 0.5)
    try:
        started = time.perf_counter()
        status, reason = models.hub_status("some/model")
        assert status == "unreachable" and time.perf_counter() - started < 3
        with pytest.raises(models.ModelUnavailableError, match="could not be loaded.*(did not answer|unreachable)"):
            models.load("some/model", allow_fallback=False)
        assert time.perf_counter() - started < 10
    finally:
        listener.close()


@pytest.mark.parametrize("flag", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_offline_flag_means_no_request(monkeypatch, flag):
    requests = []
    monkeypatch.setattr(loading.urllib.request, "urlopen", lambda *a, **k: requests.append(a))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv(flag, "1")
    status, reason = models.hub_status("gpt2")
    assert status == "unreachable" and reason.startswith("offline mode is set") and requests == []
    monkeypatch.delenv(flag)  # the same call without the flag does reach urlopen (here: the stand-in)
    models.hub_status("gpt2")
    assert len(requests) == 1


def test_banner_names_model_and_text(fallback, capsys):
    import attnlimits.models.texts as texts

    models.banner(fallback, texts.load("pydoc-topics"))
    out = capsys.readouterr().out
    assert "OFFLINE FALLBACK MODEL" in out and "OFFLINE FALLBACK TEXT" in out
    assert fallback.provenance.sha256 in out
    assert models.facts(fallback)["n_kv_heads"] == 3


def test_model_in_the_hugging_face_cache_loads_without_network(tmp_path):
    """The cache step, in a fresh process (huggingface_hub reads HF_HOME at import): no network, source 'cache'."""
    import json
    import os
    import subprocess
    import sys

    snapshot = tmp_path / "hub" / "models--tiny-org--tiny-gpt2" / "snapshots" / ("a" * 40)
    _gpt2().save_pretrained(snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("a" * 40)
    script = (
        "import json, attnlimits.models as m; p = m.load('tiny-org/tiny-gpt2', allow_fallback=False).provenance; "
        "print(json.dumps([p.source, p.sha256, p.weight_file]))"
    )
    env = dict(os.environ, HF_HOME=str(tmp_path), HF_HUB_OFFLINE="1")
    env.pop("ATTNLIMITS_MODEL", None)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    source, sha, weight_file = json.loads(done.stdout.strip().splitlines()[-1])
    assert source == "cache" and weight_file.endswith("model.safetensors")
    assert sha == models.sha256_file(snapshot / "model.safetensors")
