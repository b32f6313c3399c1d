"""Theorem 2 (geometric separability) and the multi-head corollary: closed forms, properties, the checks."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlimits.core import bounds, selection
from attnlimits.theory import checks, synthetic


@settings(max_examples=60, deadline=None)
@given(
    L=st.integers(2, 40),
    d=st.integers(2, 64),
    seed=st.integers(0, 2**20),
    beta=st.floats(0, 8),
    M=st.floats(0.1, 10),
    data=st.data(),
)
def test_xi_bounds_the_distance_and_the_lower_bound_holds_pathwise(L, d, seed, beta, M, data):
    n = data.draw(st.integers(1, L - 1))
    gen = torch.Generator().manual_seed(seed)
    alpha = synthetic.concentrated_weights((16,), L, beta, gen=gen)
    x = synthetic.sphere((16, L), d, M=M, gen=gen)
    delta = synthetic.min_separation(x)
    dist, mask = selection.token_distances(alpha, x, n)
    selected = torch.gather(dist, -1, selection.top_n(alpha, n))
    xi = bounds.theorem2_xi(alpha, n, M=M, delta=delta)
    assert (selected <= xi * (1 + 1e-9) + 1e-9 * M).all()  # ||s - a_i x_i|| <= xi_i, every configuration
    r = torch.where(mask, torch.inf, dist).amin(-1)
    frac = selection.distinguishable_fraction(alpha, x, n)
    sharp = bounds.theorem2_lower(alpha, n, r=r, M=M, delta=delta, sharp=True)
    assert (frac >= sharp - 1e-12).all()
    assert (sharp >= bounds.theorem2_lower(alpha, n, r=r, M=M, delta=delta) - 1e-12).all()


def test_xi_is_attained_when_selected_tokens_coincide():
    alpha = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)
    x = torch.tensor([[1.0, 0.0]] * 3 + [[-1.0, 0.0]], dtype=torch.float64)
    dist, _ = selection.token_distances(alpha, x, 3)
    torch.testing.assert_close(dist[:3], bounds.theorem2_xi(alpha, 3, M=1.0, delta=0.0))


def test_mean_lower_is_below_the_simulated_mean():
    gen = torch.Generator().manual_seed(0)
    for L, d, n, beta in [(16, 2, 4, 0.0), (32, 8, 8, 2.0), (8, 64, 8, 1.0)]:
        alpha = synthetic.concentrated_weights((), L, beta, gen=gen)
        x = synthetic.sphere((20000, L), d, M=2.0, gen=gen)
        dist, _ = selection.token_distances(alpha.expand(20000, L), x, n)
        mean = torch.gather(dist, -1, selection.top_n(alpha, n).expand(20000, n)).mean(0)
        assert (bounds.theorem2_mean_lower(alpha, n, M=2.0, d=d) <= mean * 1.01).all()


def test_reconstructed_upper_is_violated_and_the_book_bound_holds_on_the_counterexample():
    alpha = synthetic.two_level_weights(24, 12, eta=0.0)
    res = synthetic.separability_samples(alpha, 12, 1024, 400, seed=1)
    assert res["frac"].mean() > res["upper_rec"].mean() + 4 * (res["frac"] - res["upper_rec"]).std() / 20
    r = float(bounds.theorem2_mean_lower(alpha, 12, M=1.0, d=1024).mean())
    fixed = synthetic.separability_samples(alpha, 12, 1024, 400, r=r, seed=2)
    assert fixed["frac"].mean() <= fixed["upper_book"].mean()


@pytest.mark.parametrize("p,H", [(0.8, 3), (0.5, 1), (0.0, 4), (1.0, 2)])
def test_multihead_closed_form(p, H):
    assert bounds.multihead_coverage(p, H).item() == pytest.approx(1 - (1 - p) ** H, abs=1e-15)


@settings(max_examples=100, deadline=None)
@given(p=st.floats(0.01, 1.0), target=st.floats(0.0, 0.999))
def test_heads_needed_is_minimal(p, target):
    H = int(bounds.heads_needed(p, target))
    assert 1 - (1 - p) ** H >= target - 1e-12
    assert H == 1 or 1 - (1 - p) ** (H - 1) < target + 1e-12


def test_paper_example_p08():
    assert int(bounds.heads_needed(0.8, 0.99)) == 3


def test_multihead_simulation_per_token_form():
    alpha = synthetic.concentrated_weights((), 32, 1.0, gen=torch.Generator().manual_seed(4))
    df = synthetic.multihead_simulation(alpha, 8, 8, (1, 2, 4), samples=1500, seed=5)
    assert ((df.simulated - df.per_token).abs() <= 5 * df.sd + 0.01).all()
    assert (df.simulated <= df.paper + 5 * df.sd).all()


def test_validation():
    alpha = synthetic.two_level_weights(8, 2, eta=0.1)
    with pytest.raises(ValueError, match="^M:"):
        bounds.theorem2_xi(alpha, 2, M=0.0)
    with pytest.raises(ValueError, match="^delta:"):
        bounds.theorem2_xi(alpha, 2, delta=-1.0)
    with pytest.raises(ValueError, match="^r:"):
        bounds.theorem2_lower(alpha, 2, r=0.0)
    with pytest.raises(ValueError, match="^n:"):
        bounds.theorem2_upper(alpha, 9, r=0.5)
    with pytest.raises(ValueError, match="^d:"):
        bounds.theorem2_upper(alpha, 2, r=0.5, d=0)
    with pytest.raises(ValueError, match="^alpha:"):
        bounds.theorem2_upper_reconstructed(alpha * 3, 2, r=0.5)
    with pytest.raises(ValueError, match="^p:"):
        bounds.multihead_coverage(1.5, 2)
    with pytest.raises(ValueError, match="^H:"):
        bounds.multihead_coverage(0.5, 0)
    with pytest.raises(ValueError, match="^target:"):
        bounds.heads_needed(0.5, 1.0)
    with pytest.raises(ValueError, match="^r:"):
        bounds.theorem2_upper(alpha, 2, r=math.nan)


def test_float32_preserved():
    alpha = synthetic.two_level_weights(8, 2, eta=0.1).float()
    assert bounds.theorem2_xi(alpha, 2).dtype == torch.float32
    assert bounds.theorem2_upper(alpha, 2, r=0.3, d=4).dtype == torch.float32


@pytest.mark.parametrize("name", ["thm2-lower", "thm2-upper-reconstructed", "thm2-upper", "multihead"])
def test_checks_agree_with_the_book_and_repeat(name, uncached):
    v = checks.CHECKS[name](trials=400, seed=5)
    assert v.as_expected, v
    uncached()  # no study is memoised here today; a future cache must not make this compare v with itself
    assert checks.CHECKS[name](trials=400, seed=5) == v
