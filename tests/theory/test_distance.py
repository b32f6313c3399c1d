"""Theorem 1 (distance collapse): d_max in both forms, the Jensen residual and its bound, Corollary 2, the checks."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlimits.core import bounds, selection
from attnlimits.theory import checks, synthetic


def _rows(seed, rows, L, d, beta, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    alpha = torch.softmax(beta * torch.randn(rows, L, generator=gen, dtype=torch.float64), dim=-1)
    x = scale * torch.randn(rows, L, d, generator=gen, dtype=torch.float64)
    return alpha, x


@settings(max_examples=80, deadline=None)
@given(
    L=st.integers(1, 40),
    d=st.integers(1, 6),
    seed=st.integers(0, 2**20),
    beta=st.floats(0, 10),
    scale=st.floats(1e-3, 1e3),
    data=st.data(),
)
def test_dmax_bounds_hold(L, d, seed, beta, scale, data):
    n = data.draw(st.integers(1, L))
    alpha, x = _rows(seed, 8, L, d, beta, scale)
    dt = selection.cumulative_distance(alpha, x, n)
    sharp = bounds.theorem1_dmax_sharp(alpha, x, n)
    rec = bounds.theorem1_dmax(alpha, x, n)
    tol = 1e-12 * (1 + rec.abs())
    assert (dt <= sharp * (1 + 1e-12) + tol).all()
    assert (sharp <= rec + tol).all()
    torch.testing.assert_close(
        rec - sharp,
        2
        * (1 - torch.where(selection.top_n_mask(alpha, n), alpha, 0).sum(-1))
        * torch.where(selection.top_n_mask(alpha, n), torch.linalg.vector_norm(x, dim=-1), 0).amax(-1),
        rtol=1e-9,
        atol=1e-9,
    )


def test_sharp_bound_is_attained():
    u = torch.tensor([3.0, 4.0], dtype=torch.float64)
    for L, N, eta, c in [(5, 2, 0.3, 0.5), (10, 3, 0.1, 2.0), (7, 1, 0.0, 1.0)]:
        alpha = synthetic.two_level_weights(L, N, eta=eta)
        x = torch.cat([u.expand(N, 2), (-c * u).expand(L - N, 2)])
        torch.testing.assert_close(selection.cumulative_distance(alpha, x, N), bounds.theorem1_dmax_sharp(alpha, x, N))
    # all mass on I_N: the reconstructed bound is attained too
    alpha = synthetic.two_level_weights(6, 2, eta=0.0)
    x = torch.cat([u.expand(2, 2), (-u).expand(4, 2)])
    torch.testing.assert_close(selection.cumulative_distance(alpha, x, 2), bounds.theorem1_dmax(alpha, x, 2))


@settings(max_examples=60, deadline=None)
@given(L=st.integers(2, 9), d=st.integers(1, 4), seed=st.integers(0, 2**20), beta=st.floats(0, 8), data=st.data())
def test_jensen_residual_is_between_zero_and_the_book_bound(L, d, seed, beta, data):
    n = data.draw(st.integers(1, L))
    alpha, x = _rows(seed, 4, L, d, beta)
    eps = selection.random_selection_exact(alpha, x, n) - selection.random_selection_expectation(alpha, x, n)
    assert (eps >= -1e-12).all()
    assert (eps <= bounds.jensen_residual_bound(alpha, x, n) * (1 + 1e-9) + 1e-12).all()


def test_corollary2_exact_linear_form():
    """|d~ - (L - N) ||s||| <= (1 - abar_N) max ||x_i||: linear in L exactly when ||s|| stays away from 0."""
    for L in (8, 64, 512):
        alpha, x = synthetic.attention_rows(L, 8, 16, regime="sink", seed=L)
        for n in (1, 5, L // 2, L):
            s = torch.linalg.vector_norm(selection.context_vector(alpha, x, n), dim=-1)
            mass = torch.where(selection.top_n_mask(alpha, n), alpha, 0).sum(-1)
            gap = (selection.cumulative_distance(alpha, x, n) - (L - n) * s).abs()
            assert (gap <= (1 - mass) * torch.linalg.vector_norm(x, dim=-1).amax(-1) + 1e-10).all()


def test_corollary2_collapse_and_growth():
    sink = synthetic.distance_sweep([32, 128, 512], [5], d=8, rows=8, regime="sink", mc_samples=16)
    slope = sink.d_tilde.diff().to_numpy()[1:] / sink.L.diff().to_numpy()[1:]
    assert (slope > 0.3).all()  # grows ~ ||s|| per token: linear
    bounded = synthetic.distance_sweep([32, 512], [5], d=8, rows=8, regime="bounded", mc_samples=16)
    assert bounded.d_tilde.iloc[1] < 16 * bounded.d_tilde.iloc[0] / 4  # far from linear (16x the length)
    collapse = synthetic.distance_sweep([64], [1, 32, 63, 64], d=8, rows=8, regime="sink", mc_samples=16)
    assert collapse.d_tilde.iloc[-1] == 0 and collapse.E.iloc[-1] == 0
    assert collapse.d_tilde.is_monotonic_decreasing


def test_dmax_validation():
    alpha, x = _rows(0, 2, 5, 3, 1.0)
    with pytest.raises(ValueError, match="^n:"):
        bounds.theorem1_dmax(alpha, x, 0)
    with pytest.raises(ValueError, match="^x:"):
        bounds.theorem1_dmax_sharp(alpha, x[:, :4], 2)
    with pytest.raises(ValueError, match="^alpha:"):
        bounds.jensen_residual_bound(alpha * 2, x, 2)
    bad = x.clone()
    bad[0, 0, 0] = math.nan
    with pytest.raises(ValueError, match="^x:"):
        bounds.theorem1_dmax(alpha, bad, 2)


def test_float32_preserved():
    alpha, x = _rows(1, 3, 6, 2, 1.0)
    for fn in (bounds.theorem1_dmax, bounds.theorem1_dmax_sharp, bounds.jensen_residual_bound):
        assert fn(alpha.float(), x.float(), 2).dtype == torch.float32
        assert fn(alpha, x, 2).dtype == torch.float64


@pytest.mark.parametrize(
    "name", ["thm1-dmax-reconstructed", "thm1-dmax-sharp", "thm1-residual-sign", "thm1-residual-bound"]
)
def test_checks_agree_with_the_book_and_repeat(name, uncached):
    v = checks.CHECKS[name](trials=300, seed=3)
    assert v.as_expected and v.violations == 0 and v.expected == "holds"
    assert v.worst_ratio <= 1 + 1e-9
    assert uncached()  # the studies are memoised: recompute them from scratch
    assert checks.CHECKS[name](trials=300, seed=3) == v
