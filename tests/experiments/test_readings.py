"""The readings of the paper's expectation (attnlimits.core.rowstats): E_full, the Monte Carlo expectation E_mc, the
permutation null E_perm and the ``row`` counting, each against its per-row definition."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from attnlimits.core import rowstats, selection

REL = 1e-9


def _causal(H, L, d, scale, seed):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(H, L, L, generator=gen, dtype=torch.float64) * scale
    logits = logits.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(logits, -1), torch.randn(H, L, d, generator=gen, dtype=torch.float64)


def _e_full_row(a, x, n):
    """((l - n) / l) sum_i ||2 y_i - Y|| on one row's tokens."""
    y = a.unsqueeze(-1) * x
    total = torch.linalg.vector_norm(2 * y - y.sum(0), dim=-1).sum()
    return float((len(a) - n) / len(a) * total)


@pytest.fixture
def blocks(monkeypatch):
    monkeypatch.setattr(rowstats, "ROW_BLOCK", 7)  # several blocks, the last one short


@pytest.mark.parametrize("first", [0, 1])
def test_full_reading_and_row_counting_equal_their_definitions(blocks, first):
    alpha, x = _causal(2, 20, 3, 3.0, seed=first)
    if first:
        alpha[..., 0] = 0
        alpha = alpha / alpha.sum(-1, keepdim=True).clamp_min(1e-300)
    ns, L = [1, 4], 20
    e_full = rowstats.expectation(alpha, x, ns, first=first, full=True)
    e_row = rowstats.expectation(alpha, x, ns, first=first, counting="row")
    d_vis = rowstats.distances(alpha, x, ns, first=first)[0]
    d_row = rowstats.distances(alpha, x, ns, first=first, counting="row")[0]
    checked = 0
    for j, n in enumerate(ns):
        for h in range(2):
            for t in range(first + n, L):  # rows with more than n visible tokens
                a, xr = alpha[h, t, first : t + 1], x[h, first : t + 1]
                assert e_full[j, h, t].item() == pytest.approx(_e_full_row(a, xr, n), rel=REL)
                # the whole row: masked positions are tokens of weight 0 (their vectors never matter)
                a_all, x_all = alpha[h, t, first:], x[h, first:]
                ref = selection.random_selection_expectation(a_all, x_all, n).item()
                assert e_row[j, h, t].item() == pytest.approx(ref, rel=REL)
                assert d_row[j, h, t].item() == pytest.approx(
                    selection.cumulative_distance(a_all, x_all, n).item(), rel=REL
                )
                s = selection.context_vector(a, xr, n)
                extra = (L - 1 - t) * torch.linalg.vector_norm(s).item()
                assert d_row[j, h, t].item() == pytest.approx(d_vis[j, h, t].item() + extra, rel=REL)
                checked += 1
    assert checked == 2 * ((L - first - 1) + (L - first - 4))


def test_monte_carlo_expectation_is_the_exact_expectation_within_its_error(blocks):
    alpha, x = _causal(2, 9, 3, 2.0, seed=3)
    ns = [2, 4]
    mean, var = rowstats.random_expectation(alpha, x, ns, samples=4000, seed=1)
    z = []
    for j, n in enumerate(ns):
        for h in range(2):
            for t in range(n, 9):
                exact = selection.random_selection_exact(alpha[h, t, : t + 1], x[h, : t + 1], n).item()
                se = var[j, h, t].sqrt().item()
                assert se > 0
                z.append((mean[j, h, t].item() - exact) / se)
    z = torch.tensor(z)
    # a calibrated standard error, neither too small nor too large (the draws are shared by heads and n: z correlate)
    assert z.abs().max() < 4.5 and 0.2 < z.pow(2).mean() < 3.0
    # the exact expectation sits above the book's closed form (Jensen) for these rows
    e0 = rowstats.expectation(alpha, x, ns)
    assert (mean[:, :, 5:] > e0[:, :, 5:]).float().mean() > 0.9


def test_monte_carlo_is_seeded_and_one_sample_has_no_variance(blocks):
    alpha, x = _causal(2, 15, 3, 2.0, seed=4)
    a = rowstats.random_expectation(alpha, x, [3], samples=3, seed=7)
    b = rowstats.random_expectation(alpha, x, [3], samples=3, seed=7)
    c = rowstats.random_expectation(alpha, x, [3], samples=3, seed=8)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and not torch.equal(a[0], c[0])
    assert torch.count_nonzero(rowstats.random_expectation(alpha, x, [3], samples=1)[1]) == 0
    with pytest.raises(ValueError, match="samples"):
        rowstats.random_expectation(alpha, x, [3], samples=0)
    with pytest.raises(ValueError, match="counting"):
        rowstats.expectation(alpha, x, [3], counting="all")


def _exact_permutation_mean(a, x, n):
    """The mean of d~ over every permutation of the row's weights (small rows only)."""
    values = [selection.cumulative_distance(a[list(p)], x, n).item() for p in itertools.permutations(range(len(a)))]
    return sum(values) / len(values)


def test_permutation_null_is_the_mean_over_permutations(blocks):
    alpha, x = _causal(1, 6, 2, 2.0, seed=5)
    ns = [1, 2]
    perm = rowstats.permuted_distance(alpha, x, ns, samples=3000, seed=2)
    for j, n in enumerate(ns):
        for t in range(n, 6):
            exact = _exact_permutation_mean(alpha[0, t, : t + 1], x[0, : t + 1], n)
            assert perm[j, 0, t].item() == pytest.approx(exact, rel=0.05)


def test_permutation_keeps_the_weights_and_moves_them(blocks):
    alpha, x = _causal(3, 20, 3, 3.0, seed=6)
    same = x[:, :1].expand_as(x).contiguous()  # every token the same vector: d~ depends on the weights only
    perm = rowstats.permuted_distance(alpha, same, [2, 5], seed=0)
    d = rowstats.distances(alpha, same, [2, 5])[0]
    torch.testing.assert_close(perm[:, :, 5:], d[:, :, 5:], rtol=1e-12, atol=1e-12)
    # distinct tokens: the null differs from the model's own selection
    null, own = rowstats.permuted_distance(alpha, x, [2])[0], rowstats.distances(alpha, x, [2])[0][0]
    assert not torch.allclose(null[:, 5:], own[:, 5:])


@pytest.mark.parametrize("window", [None, 5])
def test_a_rows_permutation_null_is_the_same_whichever_rows_are_read_with_it(blocks, window):
    """Each row draws its permutations from a stream of its own, so a row sample, another block split or a bin
    gives it the same value as the whole window (what lets Algorithm 3 evaluate rows in any grouping)."""
    alpha, x = _causal(2, 40, 3, 2.0, seed=9)
    whole = rowstats.permuted_distance(alpha, x, [2, 5], samples=3, seed=4, window=window)
    at = torch.tensor([7, 19, 20, 33])
    part = rowstats.permuted_distance(alpha[:, at], x, [2, 5], samples=3, seed=4, window=window, positions=at)
    # the same draws summed in another grouping: equal to the last bits of a float64, not bit for bit (the
    # kernels of an AVX-512 CPU and of an AVX2 one group the sums differently; 1.8e-15 measured)
    torch.testing.assert_close(part, whole[:, :, at], rtol=1e-12, atol=1e-12)
    other = rowstats.permuted_distance(alpha[:, at], x, [2, 5], samples=3, seed=5, window=window, positions=at)
    assert not torch.equal(other, part)


@pytest.mark.parametrize("window", [None, 4])
def test_readings_respect_sliding_windows_and_rows(blocks, window):
    """Sliding windows and ``positions`` give the same rows as the full causal layer."""
    alpha, x = _causal(2, 18, 3, 2.0, seed=7)
    if window is not None:
        t, n = torch.arange(18).unsqueeze(-1), torch.arange(18)
        alpha = alpha.masked_fill(n <= t - window, 0)
        alpha = alpha / alpha.sum(-1, keepdim=True)
    rows = torch.arange(9, 18)
    full = rowstats.expectation(alpha, x, [2], window=window, full=True)
    part = rowstats.expectation(alpha[:, 9:], x, [2], window=window, full=True, positions=rows)
    torch.testing.assert_close(part, full[:, :, 9:], rtol=1e-12, atol=1e-12)
    if window is not None:  # a row's tokens are the window's: its E_full matches the definition on them
        t = 12
        a, xr = alpha[0, t, t - window + 1 : t + 1], x[0, t - window + 1 : t + 1]
        assert full[0, 0, t].item() == pytest.approx(_e_full_row(a, xr, 2), rel=REL)
