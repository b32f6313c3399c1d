"""Properties every normaliser must have, and the clear errors it gives on bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnlimits.core import normalizers as nz
from attnlimits.theory import sweeps

ALL = list(nz.NORMALIZERS.items())
IDS = list(nz.NORMALIZERS)
#: The maps whose rows are distributions, and those whose rows need not sum to one (registered as such).
DISTRIBUTIONS = [(n, e) for n, e in ALL if e.sums_to_one]
UNNORMALISED = [(n, e) for n, e in ALL if not e.sums_to_one]
#: The maps that read the logits' level, not only their differences: softpick's e^l - 1, the sink logit, sigmoid's
#: independent entries.
LEVEL_DEPENDENT = {"softpick", "softmax-with-sink", "sigmoid"}
SHIFT_INVARIANT = [(n, e) for n, e in ALL if n not in LEVEL_DEPENDENT]

logit_rows = arrays(
    np.float64,
    st.tuples(st.integers(1, 4), st.integers(1, 40)),
    elements=st.floats(-30, 30, allow_nan=False, allow_infinity=False),
)


@pytest.mark.parametrize(("name", "fn"), DISTRIBUTIONS, ids=[n for n, _ in DISTRIBUTIONS])
@settings(max_examples=60, deadline=None)
@given(logits=logit_rows, T=st.floats(1e-3, 1e3))
def test_weights_are_a_distribution(name, fn, logits, T):
    w = fn(torch.from_numpy(logits), T=T)
    assert w.shape == logits.shape
    assert w.dtype == torch.float64
    assert torch.all(w >= 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(logits.shape[0], dtype=torch.float64), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("name", "fn"), ALL, ids=IDS)
@settings(max_examples=40, deadline=None)
@given(logits=logit_rows, shift=st.floats(-100, 100), seed=st.integers(0, 2**16))
def test_shift_invariance_and_permutation_equivariance(name, fn, logits, shift, seed):
    x = torch.from_numpy(logits)
    w = fn(x)
    if name not in LEVEL_DEPENDENT:
        torch.testing.assert_close(fn(x + shift), w, rtol=0, atol=1e-9)
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(x.shape[-1]))
    torch.testing.assert_close(fn(x[:, perm]), w[:, perm], rtol=0, atol=1e-12)


@pytest.mark.parametrize(("name", "fn"), ALL, ids=IDS)
def test_dim_argument_normalises_along_that_axis(name, fn):
    x = torch.randn(5, 7, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(fn(x, dim=1), fn(x.transpose(1, 2), dim=-1).transpose(1, 2), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("name", "fn"), ALL, ids=IDS)
def test_masked_positions_get_exactly_zero(name, fn):
    x = torch.tensor([[0.3, -1.0, -math.inf, 2.0], [-math.inf, -math.inf, 1.0, 0.0]], dtype=torch.float64)
    w = fn(x)
    assert torch.all(w[torch.isneginf(x)] == 0)
    # a masked entry is no token: the row is the map of its unmasked entries alone
    torch.testing.assert_close(w[0, [0, 1, 3]], fn(x[0, [0, 1, 3]]), rtol=0, atol=1e-15)
    torch.testing.assert_close(w[1, 2:], fn(x[1, 2:]), rtol=0, atol=1e-15)
    if fn.sums_to_one:
        torch.testing.assert_close(w.sum(-1), torch.ones(2, dtype=torch.float64))


@pytest.mark.parametrize(("name", "fn"), UNNORMALISED, ids=[n for n, _ in UNNORMALISED])
@settings(max_examples=60, deadline=None)
@given(logits=logit_rows, T=st.floats(1e-2, 1e2))
def test_unnormalised_rows_are_weights_in_zero_one(name, fn, logits, T):
    """Rows that need not sum to one still hold weights in [0, 1]; softpick's and the sink's sum to at most one."""
    w = fn(torch.from_numpy(logits), T=T)
    assert w.shape == logits.shape and torch.isfinite(w).all()
    assert torch.all((w >= 0) & (w <= 1))
    if name != "sigmoid":
        assert torch.all(w.sum(-1) <= 1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(logits=arrays(np.float64, st.integers(1, 30), elements=st.floats(-20, 20)), T=st.floats(0.1, 10))
@example(logits=np.array([2.220446049250313e-16]), T=2.0)  # a row of rounding noise over eps
def test_the_new_maps_are_their_papers_formulas(logits, T):
    z = torch.from_numpy(logits) / T
    n = len(logits)
    e = torch.exp(z) - 1  # softpick: ReLU(e^z - 1) / (sum |e^z - 1| + eps), as printed
    # e^z - 1 is computed to an ulp of e^z (2.2e-16) in either grouping; where every logit is near 0 the denominator
    # is about eps = 1e-6, so each weight carries up to 2.2e-10 of rounding per token (seen: 1.1e-10 at z = 1e-16)
    expected = torch.relu(e) / (e.abs().sum() + 1e-6)
    torch.testing.assert_close(nz.softpick(z * T, T=T), expected, rtol=1e-9, atol=n * 4.5e-10)
    assert torch.all(nz.softpick(z * T, T=T)[z <= 0] == 0)  # a logit <= 0 gets exactly nothing
    sink = torch.exp(z) / (math.exp(0.5) + torch.exp(z).sum())
    torch.testing.assert_close(nz.softmax_with_sink(z * T, T=T, sink=0.5), sink, rtol=1e-9, atol=1e-15)
    torch.testing.assert_close(nz.sigmoid(z * T, T=T), torch.sigmoid(z - math.log(n)), rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(nz.sigmoid(z * T, T=T, bias=-2.0), torch.sigmoid(z - 2.0), rtol=1e-12, atol=1e-15)
    scale = max(1.0, math.log(n) / math.log(8))  # plain softmax up to n0, sharpened by log n / log n0 beyond
    torch.testing.assert_close(nz.log_length(z * T, T=T, n0=8), torch.softmax(z * scale, -1), rtol=1e-9, atol=1e-15)


def test_a_very_negative_sink_is_softmax_and_a_row_below_zero_is_softpicks_empty_row():
    z = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    torch.testing.assert_close(nz.softmax_with_sink(z, sink=-60.0), nz.softmax(z), rtol=0, atol=1e-15)
    assert float(nz.softmax_with_sink(z, sink=0.0).sum()) == pytest.approx(1 - 1 / (1 + float(torch.exp(z).sum())))
    assert torch.equal(nz.softpick(torch.tensor([-0.5, -3.0, 0.0])), torch.zeros(3))  # attends to nothing
    big = torch.tensor([800.0, 799.0, -5.0], dtype=torch.float64)  # e^800 overflows: the scaled form does not
    assert torch.isfinite(nz.softpick(big)).all() and torch.isfinite(nz.softmax_with_sink(big)).all()
    for kwargs, match in [({"eps": -1.0}, "eps"), ({"sink": math.inf}, "sink"), ({"n0": 1}, "n0")]:
        fn = {"eps": nz.softpick, "sink": nz.softmax_with_sink, "n0": nz.log_length}[next(iter(kwargs))]
        with pytest.raises(ValueError, match=match):
            fn([1.0, 2.0], **kwargs)
    with pytest.raises(ValueError, match="bias"):
        nz.sigmoid([1.0, 2.0], bias=math.nan)


@settings(max_examples=80, deadline=None)
@given(logits=logit_rows, T=st.floats(1e-2, 1e2))
def test_softmax_equals_torch_softmax_of_scaled_logits(logits, T):
    x = torch.from_numpy(logits)
    torch.testing.assert_close(nz.softmax(x, T=T), torch.softmax(x / T, dim=-1), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("T", [1e-4, 1e4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_softmax_is_stable_at_extreme_temperatures(T, dtype):
    x = torch.tensor([[1000.0, 999.0, -1000.0, 0.0], [1e-3, 2e-3, 3e-3, 4e-3]], dtype=dtype)
    w = nz.softmax(x, T=T)
    assert torch.isfinite(w).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(2, dtype=dtype))
    if T == 1e-4:
        assert w[0, 0] == 1 and w[1, 3] > 0.99  # the largest logit takes everything
    else:
        torch.testing.assert_close(w[1], torch.full((4,), 0.25, dtype=dtype), rtol=0, atol=1e-6)  # nearly uniform


def test_general_normaliser_with_exp_is_softmax_and_accepts_theta():
    x = torch.randn(3, 9, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    torch.testing.assert_close(nz.general(x, F=torch.exp), torch.softmax(x, -1))
    torch.testing.assert_close(nz.general(x, F=lambda l, T: torch.exp(l / T), theta=0.5), torch.softmax(x / 0.5, -1))
    w = nz.general(x, F=lambda l: 1 + torch.sigmoid(l))  # a bounded positive F: weights stay within a factor 2
    assert (w.amax(-1) / w.amin(-1) <= 2).all()


@pytest.mark.parametrize(("name", "fn"), [("sparsemax", nz.sparsemax), ("1.5-entmax", nz.entmax15)])
def test_sparse_maps_give_exact_zeros(name, fn):
    x = torch.tensor([3.0, 2.9, 0.0, -1.0, -5.0], dtype=torch.float64)
    w = fn(x)
    assert (w == 0).sum() >= 2 and w[0] > 0 and w[1] > 0
    assert fn(torch.tensor([5.0, 0.0]))[1] == 0  # a gap beyond the threshold: all mass on one token


def test_sparsemax_is_the_simplex_projection():
    x = torch.tensor([0.8, 0.5, 0.1, -0.4], dtype=torch.float64)
    # Sorted z: tau solves sum (z_i - tau)_+ = 1 with support {0, 1}: tau = (0.8 + 0.5 - 1) / 2 = 0.15.
    torch.testing.assert_close(nz.sparsemax(x), torch.tensor([0.65, 0.35, 0.0, 0.0], dtype=torch.float64))


def test_scalable_softmax_top_weight_does_not_vanish_while_softmax_does():
    gap = 2.0  # one token's logit exceeds the L - 1 others by a fixed gap
    lengths = [16, 256, 4096, 65536]
    top_soft, top_ssmax = [], []
    for L in lengths:
        x = torch.zeros(L, dtype=torch.float64)
        x[0] = gap
        top_soft.append(nz.softmax(x)[0].item())
        top_ssmax.append(nz.scalable_softmax(x, s=1.0)[0].item())
    # softmax: e^gap / (e^gap + L - 1) -> Theta(1/L)
    for L, t in zip(lengths, top_soft, strict=True):
        assert t == pytest.approx(math.exp(gap) / (math.exp(gap) + L - 1), rel=1e-12)
    assert top_soft[-1] < 2e-4
    # Scalable-Softmax with s * gap > 1: L^(s*gap) / (L^(s*gap) + L - 1) grows towards 1.
    assert all(b >= a for a, b in zip(top_ssmax, top_ssmax[1:], strict=False))
    assert top_ssmax[-1] > 0.99


@pytest.mark.parametrize("name", [n for n, _ in DISTRIBUTIONS])
def test_causal_rows_of_one_token_put_their_weight_on_it(name):
    """The first row of a causal mask sees one token: every normaliser whose rows sum to one gives it weight 1 and
    the masked entries 0 (Scalable-Softmax's log L is 0 there, and -inf * 0 must not turn them into NaN)."""
    logits = torch.tensor([[0.7, -math.inf, -math.inf], [0.2, 1.5, -math.inf], [1.0, -0.5, 2.0]])
    w = nz.NORMALIZERS[name](logits.double(), dim=-1)
    assert torch.isfinite(w).all()
    torch.testing.assert_close(w[0], torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
    assert (w[1, 2] == 0) and w.sum(-1).sub(1).abs().max() < 1e-12


def test_adaptive_temperature_sharpens_high_entropy_rows_only():
    flat = torch.linspace(0, 1, 64, dtype=torch.float64)  # entropy close to log 64 > 0.5
    peaked = torch.tensor([10.0, 0.0, 0.0], dtype=torch.float64)  # entropy < 0.5: left alone
    w, p = nz.adaptive_temperature(flat), torch.softmax(flat, -1)
    assert w.amax() >= p.amax() - 1e-15
    entropy = lambda q: -(q * q.log()).sum()  # noqa: E731
    assert entropy(w) <= entropy(p) + 1e-12
    torch.testing.assert_close(nz.adaptive_temperature(peaked), torch.softmax(peaked, -1), rtol=0, atol=0)


@pytest.mark.parametrize(("name", "fn"), ALL, ids=IDS)
@pytest.mark.parametrize(
    ("kwargs", "logits", "match"),
    [
        ({"T": 0.0}, [1.0, 2.0], "T"),
        ({"T": -1.0}, [1.0, 2.0], "T"),
        ({"T": math.nan}, [1.0, 2.0], "T"),
        ({}, [1.0, math.nan], "NaN"),
        ({}, [1.0, math.inf], r"\+inf"),
        ({}, [-math.inf, -math.inf], "masked"),
        ({}, torch.empty(2, 0), "empty"),
        ({}, 3.0, "scalar"),
        ({"dim": 2}, [1.0, 2.0], "dim"),
    ],
)
def test_invalid_input_raises_naming_the_argument(name, fn, kwargs, logits, match):
    with pytest.raises(ValueError, match=match):
        fn(logits, **kwargs)


def test_invalid_parameters_of_specific_normalisers():
    with pytest.raises(ValueError, match="s:"):
        nz.scalable_softmax([1.0, 2.0], s=0)
    with pytest.raises(ValueError, match="entropy_threshold"):
        nz.adaptive_temperature([1.0, 2.0], entropy_threshold=-1)
    with pytest.raises(ValueError, match="F:"):
        nz.general([-1.0, 2.0], F=lambda l: l)  # not positive at -1
    with pytest.raises(ValueError, match="F:"):
        nz.general([1.0, 2.0], F="exp")


def test_max_weight_sweep_is_seeded_and_matches_the_normalisers():
    a = sweeps.max_weight_sweep([1, 8, 64], draws=5, seed=3, gap=1.0)
    b = sweeps.max_weight_sweep([1, 8, 64], draws=5, seed=3, gap=1.0)
    assert a.equals(b)
    paper = nz.names("paper")  # the theory chapters' sweeps show the paper's family
    assert set(a["normalizer"]) == set(paper) and len(a) == 3 * len(paper)
    assert (a.loc[a["L"] == 1, "max_weight"] == 1).all()  # one token takes all the mass
    torch.testing.assert_close(
        torch.tensor(a["L_times_max_weight"].to_numpy()), torch.tensor((a["L"] * a["max_weight"]).to_numpy())
    )
    # With a gap of 1 at T = 1 sparsemax puts all mass on the needle; softmax gives it e^2 / (e^2 + sum e^{l_j}).
    sparse = a[(a["normalizer"] == "sparsemax")]["max_weight"].to_numpy()
    assert np.all(sparse == 1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lengths": []}, "lengths"),
        ({"lengths": [0]}, "lengths"),
        ({"names": ["nope"]}, "names"),
        ({"draws": 0}, "draws"),
        ({"gap": 4.0}, "gap"),
        ({"logit_bound": -1.0}, "logit_bound"),
    ],
)
def test_max_weight_sweep_rejects_bad_arguments(kwargs, match):
    kwargs = {"lengths": [4], **kwargs}
    with pytest.raises(ValueError, match=match):
        sweeps.max_weight_sweep(**kwargs)


def test_registry_entries_call_their_function_and_carry_label_and_colour():
    logits = torch.randn(3, 9, dtype=torch.float64)
    fns = [nz.softmax, nz.sparsemax, nz.entmax15, nz.scalable_softmax, nz.adaptive_temperature,
           nz.softpick, nz.softmax_with_sink, nz.sigmoid, nz.log_length]  # fmt: skip
    for entry, fn in zip(nz.NORMALIZERS.values(), fns, strict=True):
        assert isinstance(entry, nz.Normalizer) and entry.fn is fn and entry.label
        torch.testing.assert_close(entry(logits, dim=0, T=0.5), fn(logits, dim=0, T=0.5), rtol=0, atol=0)
    colors = [entry.color for entry in nz.NORMALIZERS.values()]
    assert len(set(colors)) == len(colors)
    assert nz.names("paper") == IDS[:5] and nz.names("recent") == IDS[5:] and nz.names() == IDS
    # the registry's fixed parameters, overridden by the call's own
    fixed = nz.Normalizer(nz.log_length, "n0 = 4", params={"n0": 4})
    torch.testing.assert_close(fixed(logits), nz.log_length(logits, n0=4), rtol=0, atol=0)
    torch.testing.assert_close(fixed(logits, n0=16), nz.log_length(logits, n0=16), rtol=0, atol=0)
    assert nz.resolve(None, "recent") == IDS[5:] and nz.resolve(["sigmoid"]) == ["sigmoid"]
    with pytest.raises(ValueError, match=r"unknown normaliser\(s\) \['nope'\]"):
        nz.resolve(["softmax", "nope"])
    with pytest.raises(ValueError, match="families: unknown"):
        nz.names("modern")


def test_registry_entries_reject_what_cannot_be_drawn_or_called():
    with pytest.raises(ValueError, match="fn: must be callable"):
        nz.Normalizer("softmax", "softmax")
    with pytest.raises(ValueError, match="label: must be a non-empty string"):
        nz.Normalizer(nz.softmax, "")
    with pytest.raises(ValueError, match="family: must be one of"):
        nz.Normalizer(nz.softmax, "softmax", family="new")
    with pytest.raises(ValueError, match="sums_to_one: must be True or False"):
        nz.Normalizer(nz.softmax, "softmax", sums_to_one=1)


def test_every_normaliser_gets_a_colour_of_its_own(monkeypatch):
    from matplotlib.colors import to_rgb

    from attnlimits.infra import plotting

    assert plotting.NORMALIZER_COLORS == {n: to_rgb(e.color) for n, e in nz.NORMALIZERS.items()}
    monkeypatch.setitem(nz.NORMALIZERS, "uncoloured", nz.Normalizer(nz.softmax, "uncoloured one"))
    monkeypatch.setitem(nz.NORMALIZERS, "bare", nz.softmax)  # a plain function, as an older registry held
    names = [*nz.NORMALIZERS, "not-registered"]
    colors = plotting.normalizer_colors(names)
    assert list(colors) == names and len(set(colors.values())) == len(names)
    assert plotting.normalizer_colors(["bare"]) == {"bare": colors["bare"]}  # the same colour in every figure
    labels = plotting.normalizer_labels(names)
    assert labels["uncoloured"] == "uncoloured one" and labels["bare"] == "bare" and labels["softmax"] == "softmax"


def test_registry_entries_hash_and_compare_by_value():
    a = nz.Normalizer(nz.log_length, "n0 = 4", params={"n0": 4})
    b = nz.Normalizer(nz.log_length, "n0 = 4", params={"n0": 4})
    assert a == b and hash(a) == hash(b) and len({a, b, nz.NORMALIZERS["softmax"]}) == 2
    assert a != nz.Normalizer(nz.log_length, "n0 = 4", params={"n0": 8})
