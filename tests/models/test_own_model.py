"""Bring your own model: attention given as arrays (experiments.run_arrays) and TransformerLens models give the tables
of the Hugging Face path on the same attention; bad arrays are refused with the place that is wrong."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tiny_models
import torch

import attnlimits as al
from attnlimits import experiments, models
from attnlimits.models import arrays, kv_capture, lens, texts, windows
from attnlimits.models.windows import _input_embedding, _residual_stream

pytestmark = pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated:DeprecationWarning")

#: Grids small enough for windows of 32 tokens (seconds per run).
PRESET = experiments.Preset(
    name="tiny",
    windows=2,
    alg1_N=2,
    alg1_L=(8, 16, 32),
    alg2_L=32,
    alg2_N=(1, 2, 4),
    alg4_L=32,
    alg4_N=(1, 2, 4),
    alg5_L=16,
    alg5_T=(0.01, 1.0),
    alg5_eps=(0.1,),
)
LENGTH = 32


def _captures(model, count=2):
    ids = torch.randint(0, model.config.vocab_size, (count, LENGTH), generator=torch.Generator().manual_seed(0))
    return [
        dataclasses.replace(models.capture(model, row, index=i), embedding=_input_embedding(model, row))
        for i, row in enumerate(ids)
    ]


def _arrays(caps, logits=True):
    """What another tool would hand over for these captures: per layer (W, H, L, L) and (W, H, L, d)."""
    L = caps[0].seq_len
    out = {
        "values": {layer: torch.cat([c[layer].v for c in caps]) for layer in caps[0].layer_ids},
        "embeddings": torch.cat([c.embedding for c in caps]),
    }
    scores = {layer: torch.stack([c.logits(layer, L) for c in caps]) for layer in caps[0].layer_ids}
    out["weights"] = {layer: torch.softmax(s, -1) for layer, s in scores.items()}
    if logits:
        out["logits"] = scores
    return out


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def tiny(request):
    model = tiny_models.gpt2() if request.param == "gpt2" else tiny_models.llama()
    caps = _captures(model)
    return model, caps, experiments.run(model, "unused", PRESET, captures=caps, seed=3)


def _assert_same(ours: experiments.Results, theirs: experiments.Results, rtol=0.0, loose=()):
    """Every table equal: bit for bit where ``rtol`` is 0, else the non-float columns exactly and the floats within
    ``rtol`` relative (1e-4 for the ``loose`` columns); ``rtol`` may be a dict of table names (0 for the others)."""
    for name in experiments.TABLES:
        a, b = getattr(ours, name), getattr(theirs, name)
        tol = rtol.get(name, 0.0) if isinstance(rtol, dict) else rtol
        if tol == 0.0:
            pd.testing.assert_frame_equal(a, b, check_exact=True, obj=name)
            continue
        floats = [c for c in a.columns if a[c].dtype.kind == "f"]
        pd.testing.assert_frame_equal(a.drop(columns=floats), b.drop(columns=floats), check_exact=True, obj=name)
        for column in floats:
            np.testing.assert_allclose(
                b[column], a[column], rtol=1e-4 if column in loose else tol, atol=1e-12, err_msg=f"{name}.{column}"
            )


#: Algorithm 3 reads sampled rows, whose logits a model computes for those rows alone (q.k in float32 of another
#: shape: one rounding apart) and given logits slice from the whole matrix; every other table is bit for bit.
SAMPLED_ROWS = {"critical_heads": 3e-7}


# ---------------------------------------------------------------------------------------------------------------
# arrays
# ---------------------------------------------------------------------------------------------------------------
def test_arrays_with_logits_give_the_tables_of_the_model(tiny):
    _, caps, model_run = tiny
    res = experiments.run_arrays(**_arrays(caps), preset=PRESET, seed=3)
    _assert_same(model_run, res, rtol=SAMPLED_ROWS)
    assert res.provenance["absent"] == {}
    assert res.provenance["mask"] == {"0": "causal", "1": "causal"}
    assert res.provenance["preset"]["name"] == "tiny"


def test_numpy_arrays_and_a_list_of_layers_are_read_as_tensors(tiny):
    _, caps, model_run = tiny
    given = _arrays(caps)
    as_numpy = {
        k: [v[layer].numpy() for layer in sorted(v)] if isinstance(v, dict) else v.numpy() for k, v in given.items()
    }
    _assert_same(model_run, experiments.run_arrays(**as_numpy, preset=PRESET, seed=3), rtol=SAMPLED_ROWS)


def test_weights_alone_agree_and_leave_algorithm_5_out(tiny):
    _, caps, model_run = tiny
    res = experiments.run_arrays(**_arrays(caps, logits=False), preset=PRESET, seed=3)
    assert res.gradient.empty and list(res.gradient.columns) == list(model_run.gradient.columns)
    assert "gradient" in res.provenance["absent"]
    # the float32 softmax of float32 logits, widened to float64 for Algorithm 4, against float64 from the logits
    no_gradient = experiments.Results(
        **{name: getattr(model_run, name) for name in experiments.TABLES if name != "gradient"},
        gradient=res.gradient,
        provenance=model_run.provenance,
    )
    _assert_same(no_gradient, res, rtol=1e-5, loose=("E_mc_se",))
    with pytest.raises(ValueError, match="logits"):
        experiments.run_arrays(**_arrays(caps, logits=False), preset=PRESET).g()


def test_grouped_value_heads_are_expanded_as_transformers_groups_them():
    model = tiny_models.llama()
    caps = _captures(model)
    given = _arrays(caps)
    # the model's 2 key/value heads, un-expanded: head h reads value head h // 2
    grouped = {layer: v[:, ::2] for layer, v in given["values"].items()}
    for v in given["values"].values():
        assert torch.equal(v[:, 0], v[:, 1]) and not torch.equal(v[:, 1], v[:, 2])
    one = experiments.run_arrays(**given, preset=PRESET)
    two = experiments.run_arrays(**{**given, "values": grouped}, preset=PRESET)
    _assert_same(one, two)


def test_the_preset_is_cut_to_the_arrays_length():
    paper = experiments.get_preset("paper")
    fitted = experiments.fit_preset(paper, 256)
    assert fitted.name == "paper@256"
    assert fitted.alg1_L == (32, 64, 128, 256) and fitted.alg2_L == fitted.alg4_L == fitted.alg5_L == 256
    assert fitted.alg2_N == paper.alg2_N and fitted.alg4_N == paper.alg4_N
    experiments.validate_grid(fitted)
    assert experiments.fit_preset(paper, 1024) is paper
    short = experiments.fit_preset(paper, 24)
    assert short.alg1_L == (24,) and short.alg2_N == (1, 5, 10, 20) and short.alg4_N == (1, 2, 4, 8, 16)
    experiments.validate_grid(short)


def test_a_sliding_window_is_read_from_the_weights_or_given(tiny_gemma):
    window = tiny_gemma.config.sliding_window
    caps = _captures(tiny_gemma)
    windows = {layer: caps[0].window(layer, LENGTH) for layer in caps[0].layer_ids}
    assert windows == {0: window, 1: None, 2: window}
    given = _arrays(caps, logits=False)
    inferred = arrays.captures(**given)
    assert {layer: inferred[0].window(layer, LENGTH) for layer in windows} == windows
    stated = arrays.captures(**given, mask=[window, "causal", window])
    assert {layer: stated[1].window(layer, LENGTH) for layer in windows} == windows
    from_logits = arrays.captures(**{**given, "weights": None, "logits": _arrays(caps)["logits"]})
    assert {layer: from_logits[0].window(layer, LENGTH) for layer in windows} == windows
    with pytest.raises(ValueError, match="mass on masked positions"):  # a window narrower than the model's
        arrays.captures(**given, mask=window - 1)


def _softmax_arrays(W=2, H=3, L=12, d=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(W, H, L, L, generator=gen, dtype=torch.float64)
    scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)
    return {"weights": [torch.softmax(scores, -1)], "values": [torch.randn(W, H, L, d, generator=gen)]}


def _broken(change):
    given = _softmax_arrays()
    change(given)
    return given


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda g: g["weights"][0].mul_(1.01), r"rows must sum to 1 .*layer 0, window 0, head 0, query 0"),
        (
            lambda g: g["weights"][0][1, 2, 3].__setitem__(7, 0.5),
            r"mass on future positions .*window 1, head 2, query 3",
        ),
        (
            lambda g: g["weights"][0][0, 1, 4].__setitem__(2, math.nan),
            r"weights: not finite at layer 0, window 0, head 1",
        ),
        (
            lambda g: g["values"][0][1, 0, 5].__setitem__(0, math.inf),
            r"values: not finite at layer 0, window 1, head 0",
        ),
        (lambda g: g["weights"][0][0, 0, 2].__setitem__(0, -0.1), r"weights: negative at layer 0, window 0, head 0"),
        (
            lambda g: g.__setitem__("values", [g["values"][0][:, :, :11]]),
            r"values\[0\]: expected \(windows, heads, L, d\)",
        ),
        (lambda g: g.__setitem__("values", [g["values"][0][:, :2]]), r"3 or a divisor"),
        (
            lambda g: g.__setitem__("weights", [g["weights"][0][..., :11]]),
            r"weights\[0\]: expected \(windows, heads, L, L\)",
        ),
        (
            lambda g: g.__setitem__("values", {1: g["values"][0]}),
            r"weights: holds layers \[0\], the values hold layers \[1\]",
        ),
        (lambda g: g.__setitem__("values", None), r"values: the value vectors"),
        (lambda g: g.__setitem__("weights", None), r"give the attention weights, the logits, or both"),
        (lambda g: g.__setitem__("weights", [g["weights"][0].long()]), r"weights\[0\]: expected floating-point"),
        (lambda g: g.__setitem__("weights", "attention"), r"weights: expected per-layer arrays"),
    ],
)
def test_bad_arrays_are_refused_with_the_place(change, message):
    with pytest.raises(ValueError, match=message):
        arrays.captures(**_broken(change))


def test_logits_must_be_those_of_the_weights_and_causal():
    given = _softmax_arrays()
    scores = torch.log(given["weights"][0])
    arrays.captures(**given, logits=[scores])  # consistent: accepted
    shifted = scores.clone()
    shifted[0, 0, 5, :3] += 1.0
    with pytest.raises(ValueError, match=r"softmax differs from the weights .*window 0, head 0, query 5"):
        arrays.captures(**given, logits=[shifted])
    raw = torch.randn(2, 3, 12, 12, dtype=torch.float64)  # no -inf above the diagonal: not causal
    with pytest.raises(ValueError, match=r"logits: finite on future positions .*mask='causal'"):
        arrays.captures(values=given["values"], logits=[raw])
    masked = arrays.captures(values=given["values"], logits=[raw], mask="causal")
    assert masked[0].window(0, 12) is None and torch.isinf(masked[0].logits(0, 12)).sum() == 3 * 66


def test_a_mask_neither_causal_nor_sliding_is_refused():
    given = _softmax_arrays()
    visible = torch.ones(12, 12, dtype=torch.bool).tril()
    visible[6, 3] = False  # a hole inside the causal band
    weights = given["weights"][0].clone()
    weights[..., 6, 3] = 0
    weights = weights / weights.sum(-1, keepdim=True)
    with pytest.raises(ValueError, match="neither causal nor a causal sliding window"):
        arrays.captures(weights=[weights], values=given["values"], mask=visible)
    with pytest.raises(ValueError, match=r"mask\[0\]: must be 'causal'"):
        arrays.captures(**given, mask="bidirectional")


def test_a_short_run_on_given_arrays_repeats_exactly_and_records_what_it_read():
    given = _softmax_arrays(L=40)
    one = experiments.run_arrays(**given, preset="quick", seed=2, name="my-model", text="my-text")
    two = experiments.run_arrays(**given, preset="quick", seed=2, name="my-model", text="my-text")
    _assert_same(one, two)
    p = one.provenance
    assert p["model"]["model_id"] == "my-model" and p["text"]["name"] == "my-text"
    assert p["preset"]["name"] == "quick@40" and p["windows"] == [0, 1]
    assert set(p["absent"]) == {"gradient", "separability (embedding)"}
    other = _softmax_arrays(L=40, seed=1)
    assert experiments.run_arrays(**other, preset="quick").provenance["model"]["sha256"] != p["model"]["sha256"]


# ---------------------------------------------------------------------------------------------------------------
# TransformerLens (the optional extra)
# ---------------------------------------------------------------------------------------------------------------
def _transformer_lens():
    pytest.importorskip("transformer_lens", reason=f"TransformerLens is an optional extra: {lens.INSTALL}")
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError:
        pytest.skip("TransformerLens 4 has no HookedTransformer (it wraps Hugging Face models, read directly)")
    return HookedTransformer, HookedTransformerConfig


@pytest.fixture(scope="module")
def tokenizer():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return models.load("fallback").tokenizer


@pytest.fixture(scope="module")
def text():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return texts.load()


def _converted(kind: str, tokenizer):
    """A random-init Hugging Face model and the same weights in a HookedTransformer (TransformerLens's own
    conversions, no weight processing), sharing the offline fallback's tokenizer."""
    HookedTransformer, HookedTransformerConfig = _transformer_lens()
    from transformer_lens.pretrained.weight_conversions import convert_gpt2_weights, convert_llama_weights

    vocab = len(tokenizer)
    shared = {"n_layers": 2, "n_ctx": 64, "d_vocab": vocab, "default_prepend_bos": False, "model_name": f"tiny-{kind}"}
    if kind == "gpt2":
        hf = tiny_models.gpt2(vocab=vocab)
        cfg = HookedTransformerConfig(
            **shared, d_model=48, d_head=16, n_heads=3, d_mlp=192, act_fn="gelu_new", normalization_type="LN"
        )
        state = convert_gpt2_weights(hf, cfg)
    else:
        hf = tiny_models.llama(vocab=vocab)
        cfg = HookedTransformerConfig(
            **shared,
            d_model=64,
            d_head=16,
            n_heads=4,
            n_key_value_heads=2,
            d_mlp=96,
            act_fn="silu",
            normalization_type="RMS",
            positional_embedding_type="rotary",
            rotary_dim=16,
            rotary_base=hf.config.rope_parameters["rope_theta"],
            eps=hf.config.rms_norm_eps,
            gated_mlp=True,
            final_rms=True,
        )
        state = convert_llama_weights(hf, cfg)
    hooked = HookedTransformer(cfg)
    hooked.load_state_dict(state, strict=False)
    hooked.eval()
    hooked.tokenizer = tokenizer
    return hf, hooked


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_a_hooked_transformer_gives_the_tables_of_the_same_weights_in_transformers(kind, tokenizer, text, tmp_path):
    hf, hooked = _converted(kind, tokenizer)
    hf.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = models.load(str(tmp_path))
    ours = experiments.run(loaded, text, PRESET, seed=1)
    theirs = experiments.run(hooked, text, PRESET, seed=1)
    # the same windows; TransformerLens computes q.k in another order: counts, critical N and every N_s/N equal,
    # values within 5e-6 relative (one rounding of q.k carries up to 2.5e-6 into a head's mean on these windows;
    # a Monte Carlo standard error, E_mc_se, within 1e-4)
    _assert_same(ours, theirs, rtol=5e-6, loose=("E_mc_se",))
    p = theirs.provenance["model"]
    assert p["model_id"] == f"tiny-{kind}" and p["source"].startswith("TransformerLens HookedTransformer")
    hooked.cfg.model_name = loaded.provenance.model_id  # the same name: the two caches stay apart
    ours_at, theirs_at = (experiments.results_folder(m, text, PRESET, root=tmp_path) for m in (loaded, hooked))
    assert theirs_at.parts[-3] == f"transformer-lens--{ours_at.parts[-3]}"
    assert p["n_heads"] == hooked.cfg.n_heads and float(p["attention scaling"]) == pytest.approx(0.25)


def test_a_hooked_transformer_captures_the_residual_stream_of_transformers(tokenizer, text):
    hf, hooked = _converted("gpt2", tokenizer)
    (cap,) = experiments.capture_windows(hooked, text, length=LENGTH, count=1, tokens="residual")
    ids = windows.windows(tokenizer, text, length=LENGTH, count=1)[0]
    theirs = _residual_stream(hf, ids, [0, 1])
    for layer in (0, 1):  # hook_resid_pre of layer l: the input of layer l, transformers' hidden_states[l]
        torch.testing.assert_close(cap.residual[layer], theirs[layer], rtol=1e-5, atol=1e-5)
    assert not torch.equal(cap.residual[0], cap.residual[1])


def test_an_activation_cache_through_run_arrays_gives_the_tables_of_run(tokenizer, text):
    _, hooked = _converted("llama", tokenizer)
    ids = windows.windows(tokenizer, text, length=LENGTH, count=2, total=2, bos=False)  # run's: spread over the text
    with torch.inference_mode():
        _, cache = hooked.run_with_cache(ids)
    given = lens.arrays(cache, hooked)
    assert set(given) == {"weights", "logits", "values", "embeddings", "scaling", "bos"}
    # the expanded values reproduce TransformerLens's own head outputs z = pattern @ v
    for layer in (0, 1):
        z = torch.einsum("bhqk,bhkd->bqhd", given["weights"][layer], given["values"][layer])
        torch.testing.assert_close(z, cache[f"blocks.{layer}.attn.hook_z"], rtol=1e-5, atol=1e-6)
    _assert_same(experiments.run(hooked, text, PRESET, seed=1), experiments.run_arrays(**given, preset=PRESET, seed=1))


def test_a_sliding_window_of_transformer_lens_is_read_from_its_scores(tokenizer, text):
    HookedTransformer, HookedTransformerConfig = _transformer_lens()
    cfg = HookedTransformerConfig(
        n_layers=2,
        d_model=32,
        d_head=8,
        n_heads=4,
        d_mlp=64,
        n_ctx=64,
        d_vocab=len(tokenizer),
        act_fn="gelu",
        use_local_attn=True,
        attn_types=["local", "global"],
        window_size=6,
        default_prepend_bos=False,
        seed=0,
    )
    hooked = HookedTransformer(cfg)
    hooked.tokenizer = tokenizer
    caps = experiments.capture_windows(hooked, text, length=LENGTH, count=1)
    assert [caps[0].window(layer, LENGTH) for layer in (0, 1)] == [6, None]


def test_a_hooked_transformer_without_a_tokenizer_says_what_to_do(text):
    HookedTransformer, HookedTransformerConfig = _transformer_lens()
    cfg = HookedTransformerConfig(n_layers=1, d_model=16, d_head=8, n_ctx=64, d_vocab=50, act_fn="relu", seed=0)
    hooked = HookedTransformer(cfg)
    assert lens.is_hooked(hooked) and not lens.is_hooked(tiny_models.gpt2())
    with pytest.raises(ValueError, match=r"no tokenizer.*run_arrays"):
        experiments.run(hooked, text, "quick")
    with pytest.raises(ValueError, match="above the model's 64 positions"):
        experiments.run(hooked, text, "paper")


# ---------------------------------------------------------------------------------------------------------------
# one capture type, one address per layer
# ---------------------------------------------------------------------------------------------------------------
def _capture_of(kind, tokenizer, text, tmp_path):
    """Layer 1 alone of a window of LENGTH tokens, captured the way ``kind`` names."""
    ids = windows.windows(tokenizer, text, length=LENGTH, count=1)[0]
    if kind == "one pass":
        return models.capture(tiny_models.llama(vocab=len(tokenizer)), ids, layers=[1])
    if kind == "windows":
        tiny_models.saved(tiny_models.gpt2(vocab=len(tokenizer)), tmp_path, tokenizer)
        return experiments.capture_windows(models.load(str(tmp_path)), text, length=LENGTH, count=1, layers=[1])[0]
    if kind == "arrays":
        future = torch.ones(LENGTH, LENGTH, dtype=torch.bool).triu(1)
        logits = torch.randn(1, 2, LENGTH, LENGTH, generator=torch.Generator().manual_seed(0)).masked_fill(
            future, -math.inf
        )
        return arrays.captures(logits={1: logits}, values={1: torch.randn(1, 2, LENGTH, 8)})[0]
    if kind == "long (SDPA)":
        return kv_capture.capture_ids(tiny_models.llama(vocab=len(tokenizer)), ids, layers={1})
    _, hooked = _converted("gpt2", tokenizer)  # "TransformerLens": skipped without it
    return lens.capture_windows(hooked, text, length=LENGTH, count=1, layers=[1])[0]


@pytest.mark.parametrize("kind", ["one pass", "windows", "arrays", "long (SDPA)", "TransformerLens"])
def test_every_capture_is_one_type_addressed_by_layer_number(kind, tokenizer, text, tmp_path):
    cap = _capture_of(kind, tokenizer, text, tmp_path)
    assert isinstance(cap, models.Capture)
    assert cap.layer_ids == [1] and len(cap) == 1 and 1 in cap and 0 not in cap
    assert cap[1].layer == 1 and cap[np.int64(1)] is cap[1] and list(cap) == [cap[1]]
    with pytest.raises(models.LayerNotCapturedError, match=r"layer 0 was not captured.*holds layers \[1\]"):
        cap[0]
    assert not hasattr(cap, "layer"), "one address per layer: cap[layer]"
    alpha, x = cap.inputs(1, LENGTH)  # the window's methods read the record cap[1]
    assert alpha.shape == (cap.heads(1), LENGTH, LENGTH)
    assert torch.equal(x, cap[1].v[0].double())


# ---------------------------------------------------------------------------------------------------------------
# the README's "use it on your own model" examples, run as written
# ---------------------------------------------------------------------------------------------------------------
README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _readme_example(name: str) -> str:
    marker = f"<!-- README example: {name} -->\n```python\n"
    assert marker in README, f"the README lost its {name!r} example"
    code = README.split(marker)[1].split("```")[0]
    assert len(code.strip().splitlines()) == 3, f"the {name!r} example is three lines"
    return code


def _random_attention():
    """What a reader's own code might return: per layer (windows, heads, L, L) softmax weights and values."""
    given = _softmax_arrays(W=2, H=3, L=64)
    return given["weights"] * 2, given["values"] * 2


def _run_example(name, namespace, tmp_path, monkeypatch, substitute=()):
    code = _readme_example(name)
    for old, new in substitute:
        assert old in code
        code = code.replace(old, new)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README example {name}", "exec"), {"al": al, **namespace})
    (folder,) = (tmp_path / "runs").iterdir()
    page = (folder / "report.html").read_text()
    assert "<title>attnlimits report:" in page and page.count("data:image/png;base64,") >= 7
    return folder


def test_the_readme_runs_a_hugging_face_id(tmp_path, monkeypatch, tokenizer):
    # no download here: the id the example names loads a random-init GPT-2 saved under it
    saved = tmp_path / "gpt2"
    tiny_models.saved(tiny_models.gpt2(vocab=len(tokenizer)), saved, tokenizer)
    load, asked = al.models.load, []
    monkeypatch.setattr(al.models, "load", lambda name: asked.append(name) or load(str(saved)))
    folder = _run_example("hugging-face-id", {}, tmp_path, monkeypatch)
    assert asked == ["gpt2"]
    assert json.loads((folder / "provenance.json").read_text())["preset"]["name"] == "quick"


def test_the_readme_runs_a_local_folder_and_a_text_file(tmp_path, monkeypatch, tokenizer):
    model = tmp_path / "tiny-llama"
    tiny_models.saved(tiny_models.llama(vocab=len(tokenizer)), model, tokenizer)
    (tmp_path / "corpus.txt").write_text(texts.load("pydoc-topics").body[:40_000], encoding="utf-8")
    substitute = [("path/to/my-model", str(model)), ("my-corpus.txt", str(tmp_path / "corpus.txt"))]
    folder = _run_example("local-folder", {}, tmp_path, monkeypatch, substitute)
    assert json.loads((folder / "provenance.json").read_text())["model"]["source"] == "local"


def test_the_readme_runs_a_hooked_transformer(tmp_path, monkeypatch, tokenizer):
    HookedTransformer, _ = _transformer_lens()
    _, hooked = _converted("gpt2", tokenizer)
    monkeypatch.setattr(HookedTransformer, "from_pretrained", lambda name: hooked)  # no download here
    folder = _run_example("transformer-lens", {"HookedTransformer": HookedTransformer}, tmp_path, monkeypatch)
    assert "TransformerLens" in json.loads((folder / "provenance.json").read_text())["model"]["source"]


def test_the_readme_runs_an_activation_cache(tmp_path, monkeypatch, tokenizer, text):
    _, hooked = _converted("llama", tokenizer)
    tokens = windows.windows(tokenizer, text, length=64, count=2)
    _run_example("activation-cache", {"model": hooked, "tokens": tokens}, tmp_path, monkeypatch)


def test_the_readme_runs_arrays_and_its_report_has_the_sections_it_describes(tmp_path, monkeypatch):
    folder = _run_example("arrays", {"my_attention": _random_attention}, tmp_path, monkeypatch)
    outline = README.split("Reading a report: its sections, in order.\n\n```text\n")[1].split("```")[0]
    headings = [line.split("  ")[0].strip() for line in outline.splitlines()]
    report = (folder / "report.md").read_text()
    found = [line for line in report.splitlines() if line.startswith("#")]
    assert [h.split(":")[0] for h in found] == [h.split(":")[0] for h in headings]
