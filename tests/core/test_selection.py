"""attnlimits.core.selection against straightforward per-row loops, its tie rule, dtypes, broadcasting and bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlimits.core import selection as sel


def _random(batch=(3, 4), length=7, dim=5, seed=0, dtype=torch.float64, beta=2.0):
    gen = torch.Generator().manual_seed(seed)
    alpha = torch.softmax(beta * torch.randn(*batch, length, generator=gen, dtype=torch.float64), dim=-1)
    x = torch.randn(*batch, length, dim, generator=gen, dtype=torch.float64)
    return alpha.to(dtype), x.to(dtype)


# ---- reference implementations: one row at a time, plain numpy and Python ----------------------------------------
def _ref_top(a: np.ndarray, n: int) -> list[int]:
    return sorted(range(len(a)), key=lambda i: (-a[i], i))[:n]


def _ref_row(a: np.ndarray, x: np.ndarray, n: int, r=None):
    top = _ref_top(a, n)
    rest = [i for i in range(len(a)) if i not in top]
    s = sum(a[i] * x[i] for i in top)
    dist = [float(np.linalg.norm(a[i] * x[i] - s)) for i in range(len(a))]
    dtilde = sum(dist[i] for i in rest)
    length = len(a)
    if length == 1:
        main = 0.0
    else:
        main = (
            (length - n)
            / length
            * sum(
                np.linalg.norm(a[i] * x[i] - n / (length - 1) * sum(a[j] * x[j] for j in range(length) if j != i))
                for i in range(length)
            )
        )
    exact = []
    for subset in itertools.combinations(range(length), n):
        ss = sum(a[j] * x[j] for j in subset)
        exact.append(sum(np.linalg.norm(a[i] * x[i] - ss) for i in range(length) if i not in subset))
    radius = min((dist[j] for j in rest), default=math.inf) if r is None else r
    if all(dist[j] >= radius for j in rest):
        frac = sum(dist[i] <= radius for i in top) / n
    else:
        frac = 0.0
    return dict(top=top, s=s, dtilde=dtilde, main=main, exact=float(np.mean(exact)), frac=frac)


def _rows(alpha, x):
    a2 = alpha.reshape(-1, alpha.shape[-1]).numpy().astype(np.float64)
    x2 = x.reshape(-1, *x.shape[-2:]).numpy().astype(np.float64)
    return list(zip(a2, x2, strict=True))


@pytest.mark.parametrize("n", [1, 3, 6, 7])
def test_against_per_row_loops(n):
    alpha, x = _random(seed=n)
    refs = [_ref_row(a, xx, n) for a, xx in _rows(alpha, x)]
    batch = alpha.shape[:-1]
    assert sel.top_n(alpha, n).reshape(-1, n).tolist() == [r["top"] for r in refs]
    mask = sel.top_n_mask(alpha, n).reshape(-1, alpha.shape[-1])
    assert [sorted(torch.nonzero(m).flatten().tolist()) for m in mask] == [sorted(r["top"]) for r in refs]
    np.testing.assert_allclose(
        sel.context_vector(alpha, x, n).reshape(-1, x.shape[-1]).numpy(),
        np.stack([r["s"] for r in refs]),
        rtol=1e-12,
        atol=1e-12,
    )
    for name, fn in [
        ("dtilde", sel.cumulative_distance),
        ("main", sel.random_selection_expectation),
        ("exact", sel.random_selection_exact),
        ("frac", sel.distinguishable_fraction),
    ]:
        got = fn(alpha, x, n)
        assert got.shape == batch and got.dtype == torch.float64, name
        np.testing.assert_allclose(
            got.reshape(-1).numpy(), [r[name] for r in refs], rtol=1e-11, atol=1e-12, err_msg=name
        )


@pytest.mark.parametrize("r", [0.0, 0.3, 1.0, 5.0])
def test_distinguishable_fraction_explicit_radius(r):
    alpha, x = _random(seed=11, beta=0.5)
    got = sel.distinguishable_fraction(alpha, x, 3, r=r).reshape(-1).numpy()
    np.testing.assert_allclose(got, [_ref_row(a, xx, 3, r)["frac"] for a, xx in _rows(alpha, x)])


def test_distinguishable_fraction_tensor_radius_broadcasts():
    alpha, x = _random(batch=(2, 3), seed=12)
    r = torch.tensor([0.1, 0.5, 2.0])
    got = sel.distinguishable_fraction(alpha, x, 2, r=r)
    want = torch.stack([sel.distinguishable_fraction(alpha[:, k], x[:, k], 2, r=float(r[k])) for k in range(3)], dim=1)
    torch.testing.assert_close(got, want)


@settings(max_examples=60, deadline=None)
@given(
    length=st.integers(1, 8),
    dim=st.integers(1, 4),
    seed=st.integers(0, 10_000),
    beta=st.floats(0.0, 6.0),
    data=st.data(),
)
def test_property_matches_loops_and_residual_is_nonnegative(length, dim, seed, beta, data):
    n = data.draw(st.integers(1, length))
    alpha, x = _random(batch=(2,), length=length, dim=dim, seed=seed, beta=beta)
    refs = [_ref_row(a, xx, n) for a, xx in _rows(alpha, x)]
    np.testing.assert_allclose(
        sel.cumulative_distance(alpha, x, n).numpy(), [r["dtilde"] for r in refs], rtol=1e-10, atol=1e-12
    )
    exact = sel.random_selection_exact(alpha, x, n)
    main = sel.random_selection_expectation(alpha, x, n)
    np.testing.assert_allclose(exact.numpy(), [r["exact"] for r in refs], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(main.numpy(), [r["main"] for r in refs], rtol=1e-10, atol=1e-12)
    assert (exact >= main - 1e-12).all()  # Jensen: the residual is never negative


def test_ties_go_to_the_lower_index():
    alpha = torch.tensor([[0.1, 0.3, 0.3, 0.3], [0.25, 0.25, 0.25, 0.25]], dtype=torch.float64)
    assert sel.top_n(alpha, 2).tolist() == [[1, 2], [0, 1]]
    assert sel.top_n(alpha, 3).tolist() == [[1, 2, 3], [0, 1, 2]]
    # many ties in a long row: torch.topk would be free to return any of them
    long = torch.full((1, 1000), 1e-3, dtype=torch.float64)
    assert sel.top_n(long, 5).tolist() == [[0, 1, 2, 3, 4]]


def test_n_equals_l_and_single_token():
    alpha, x = _random(seed=3)
    length = alpha.shape[-1]
    torch.testing.assert_close(sel.cumulative_distance(alpha, x, length), torch.zeros(alpha.shape[:-1], dtype=x.dtype))
    torch.testing.assert_close(
        sel.random_selection_expectation(alpha, x, length), torch.zeros(alpha.shape[:-1], dtype=x.dtype)
    )
    torch.testing.assert_close(
        sel.distinguishable_fraction(alpha, x, length), torch.ones(alpha.shape[:-1], dtype=x.dtype)
    )
    one = torch.ones(4, 1, dtype=torch.float64)
    xs = torch.randn(4, 1, 3, dtype=torch.float64)
    assert (sel.random_selection_expectation(one, xs, 1) == 0).all()
    assert (sel.cumulative_distance(one, xs, 1) == 0).all()


def test_monte_carlo_agrees_with_enumeration_and_is_seeded():
    alpha, x = _random(batch=(5,), length=9, dim=3, seed=4)
    exact = sel.random_selection_exact(alpha, x, 3)
    mc = sel.random_selection_monte_carlo(alpha, x, 3, samples=20_000, seed=1)
    torch.testing.assert_close(mc, exact, rtol=0.02, atol=0.0)
    assert torch.equal(mc, sel.random_selection_monte_carlo(alpha, x, 3, samples=20_000, seed=1))
    assert not torch.equal(mc, sel.random_selection_monte_carlo(alpha, x, 3, samples=20_000, seed=2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_preserved(dtype):
    alpha, x = _random(seed=5, dtype=dtype)
    for fn in (
        sel.context_vector,
        sel.cumulative_distance,
        sel.random_selection_expectation,
        sel.random_selection_exact,
        sel.distinguishable_fraction,
    ):
        assert fn(alpha, x, 2).dtype == dtype
    assert sel.random_selection_monte_carlo(alpha, x, 2, samples=10).dtype == dtype
    d32 = sel.cumulative_distance(*_random(seed=5, dtype=torch.float32), 2)
    d64 = sel.cumulative_distance(*_random(seed=5, dtype=torch.float64), 2)
    torch.testing.assert_close(d32.double(), d64, rtol=1e-5, atol=1e-5)


def test_mixed_dtypes_promote_and_numpy_lists_accepted():
    alpha, x = _random(seed=6)
    assert sel.cumulative_distance(alpha.float(), x, 2).dtype == torch.float64
    np_out = sel.cumulative_distance(alpha.numpy(), x.numpy(), 2)
    torch.testing.assert_close(np_out, sel.cumulative_distance(alpha, x, 2))
    assert sel.top_n([0.2, 0.5, 0.3], 2).tolist() == [1, 2]


def test_leading_dims_broadcast():
    alpha, x = _random(batch=(4,), seed=7)
    # one set of tokens shared by 3 heads x 4 rows of weights
    a3 = torch.stack([alpha, alpha.flip(0), alpha.roll(1, 0)])  # (3, 4, L)
    got = sel.cumulative_distance(a3, x, 2)  # x: (4, L, d) broadcasts against (3, 4)
    assert got.shape == (3, 4)
    torch.testing.assert_close(got[1], sel.cumulative_distance(alpha.flip(0), x, 2))


# ---- invalid input --------------------------------------------------------------------------------------------
def _good():
    return _random(batch=(2,), length=5, dim=3, seed=8)


FUNCS = [
    sel.context_vector,
    sel.cumulative_distance,
    sel.random_selection_expectation,
    sel.random_selection_exact,
    sel.random_selection_monte_carlo,
    sel.distinguishable_fraction,
    sel.token_distances,
]


@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n", [0, -1, 6, 2.5, True, None])
def test_bad_n_raises(fn, n):
    alpha, x = _good()
    with pytest.raises(ValueError, match=r"^n:"):
        fn(alpha, x, n)


@pytest.mark.parametrize("n", [0, 6])
def test_bad_n_raises_top_n(n):
    alpha, _ = _good()
    with pytest.raises(ValueError, match=r"^n:"):
        sel.top_n(alpha, n)
    with pytest.raises(ValueError, match=r"^n:"):
        sel.top_n_mask(alpha, n)


def _bad_alphas():
    alpha, _ = _good()
    nan = alpha.clone()
    nan[0, 1] = math.nan
    inf = alpha.clone()
    inf[1, 0] = math.inf
    neg = alpha.clone()
    neg[0, 0] += 0.5
    neg[0, 1] -= 0.5
    neg[0, 0], neg[0, 1] = 0.5 + neg[0, 1] + 0.5, -0.5  # sums to ~1 but has a negative weight
    neg[0] = neg[0] / neg[0].sum()
    unnormalised = alpha * 1.01
    slightly = alpha.clone()
    slightly[0, 0] += 1e-6  # fine for float32, not for float64
    return {
        "nan": nan,
        "inf": inf,
        "negative": neg,
        "sum": unnormalised,
        "sum-float64": slightly,
        "scalar": torch.tensor(1.0),
        "empty": torch.zeros(2, 0),
    }


@pytest.mark.parametrize("case", list(_bad_alphas()))
@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.__name__)
def test_bad_alpha_raises(fn, case):
    _, x = _good()
    with pytest.raises(ValueError, match=r"^alpha:"):
        fn(_bad_alphas()[case], x, 1)


def test_float32_tolerance_is_looser():
    alpha, x = _good()
    slightly = alpha.clone()
    slightly[0, 0] += 1e-6
    got = sel.cumulative_distance(slightly.float(), x.float(), 2)  # within float32's 1e-4: accepted
    assert got.dtype == torch.float32
    assert torch.allclose(got.double(), sel.cumulative_distance(alpha, x, 2), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"^alpha: .*float64"):
        sel.cumulative_distance(slightly, x, 2)  # the same rows in float64: rejected
    off = alpha.clone()
    off[0, 0] += 1e-3
    with pytest.raises(ValueError, match=r"^alpha: .*float32"):
        sel.cumulative_distance(off.float(), x.float(), 2)  # beyond float32's tolerance: rejected


@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.__name__)
def test_bad_x_raises(fn):
    alpha, x = _good()
    for bad in (x[:, :4], x[0, 0], torch.randn(3, 5, 3, dtype=torch.float64)):  # wrong L, 1-d, batch mismatch
        with pytest.raises(ValueError, match=r"^x:"):
            fn(alpha, bad, 2)
    for value in (math.nan, math.inf, -math.inf):
        bad = x.clone()
        bad[1, 2, 0] = value
        with pytest.raises(ValueError, match=r"^x:"):
            fn(alpha, bad, 2)


@pytest.mark.parametrize("r", [-0.1, math.nan, [1.0, 2.0, 3.0]])
def test_bad_radius_raises(r):
    alpha, x = _good()
    with pytest.raises(ValueError, match=r"^r:"):
        sel.distinguishable_fraction(alpha, x, 2, r=r)


def test_bad_samples_and_too_many_subsets():
    alpha, x = _good()
    with pytest.raises(ValueError, match=r"^samples:"):
        sel.random_selection_monte_carlo(alpha, x, 2, samples=0)
    big = torch.full((40,), 1 / 40, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^n:"):
        sel.random_selection_exact(big, torch.zeros(40, 2, dtype=torch.float64), 20)


@settings(max_examples=60, deadline=None)
@given(
    length=st.integers(1, 7), dim=st.integers(1, 4), seed=st.integers(0, 2**20), masked=st.booleans(), data=st.data()
)
def test_random_context_norm_exact_matches_enumeration(length, dim, seed, masked, data):
    n = data.draw(st.integers(1, length))
    alpha, x = _random(batch=(2,), length=length, dim=dim, seed=seed)
    if masked and length > 1:  # trailing positions of weight 0, counted as tokens
        alpha[:, length // 2 + 1 :] = 0
        alpha = alpha / alpha.sum(dim=-1, keepdim=True)
    got = sel.random_context_norm_exact(alpha, x, n)
    for row in range(2):
        y = (alpha[row, :, None] * x[row]).numpy()
        want = np.mean([np.linalg.norm(y[list(c)].sum(axis=0)) for c in itertools.combinations(range(length), n)])
        assert float(got[row]) == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_random_context_norm_exact_at_full_selection_and_bad_input():
    alpha, x = _random(batch=(3,), length=5)
    full = torch.linalg.vector_norm(torch.einsum("bl,bld->bd", alpha, x), dim=-1)
    torch.testing.assert_close(sel.random_context_norm_exact(alpha, x, 5), full)
    assert sel.random_context_norm_exact(alpha.float(), x.float(), 2).dtype == torch.float32
    with pytest.raises(ValueError, match="^n:"):
        sel.random_context_norm_exact(alpha, x, 6)
    with pytest.raises(ValueError, match="subsets exceed"):
        sel.random_context_norm_exact(torch.full((40,), 1 / 40), torch.ones(40, 1), 20)
