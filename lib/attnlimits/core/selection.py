"""Attention as selection: the top-N set, the context vector and the distances built on them.

Notation (as in the book): weights ``alpha`` of shape ``(..., L)`` (non-negative, summing to one along the last
axis), token vectors ``x`` of shape ``(..., L, d)``; leading dimensions broadcast (layers, heads, query rows).
``I_N`` is the set of the ``n`` largest weights, ties broken by the lower index; ``y_i = alpha_i x_i`` are the
weight-scaled tokens and ``s = sum_{i in I_N} y_i`` is the context vector.

- :func:`top_n`, :func:`top_n_mask`          the selected set I_N (indices / boolean mask).
- :func:`context_vector`                     s.
- :func:`token_distances`                    ||y_i - s|| for every token, with the selection mask.
- :func:`cumulative_distance`                d~ = sum_{i not in I_N} ||y_i - s||   (Theorem 1).
- :func:`random_selection_expectation`       closed-form main term of E_{I_N uniform}[d~]  (Theorem 1, random I_N).
- :func:`random_selection_exact`             E_{I_N uniform}[d~] by enumerating all C(L, n) subsets (small L).
- :func:`random_selection_monte_carlo`       the same expectation by sampling subsets (any L).
- :func:`random_context_norm_exact`          E_{I_N uniform}[||s||] by enumerating all C(L, n) subsets (small L).
- :func:`distinguishable_fraction`           N_s / N  (Theorem 2).

Every function accepts tensors, arrays or nested lists, returns ``torch`` tensors, keeps float32/float64 (mixed
inputs are promoted), loops over no rows, and raises ``ValueError`` naming the argument on invalid input.
``sums_to_one=False`` (:func:`token_distances`, :func:`cumulative_distance`, :func:`random_selection_expectation`,
:func:`distinguishable_fraction`) accepts rows that do not sum to one (sigmoid attention, softpick, a softmax with
a sink): each quantity is then the same formula on the weights as they are, the vectors ``y_i`` the layer mixes.

Every position of ``alpha`` is a token. On a captured model, pass one query's weights over the keys it sees,
``cap[layer].row(i, head=h)`` (:meth:`attnlimits.models.LayerCapture.row`: under a causal mask the prefix
``weights[0, h, i, : i + 1]`` with the values ``v[0, h, : i + 1]``), not the whole captured row
``weights[0, h, i]``: its masked future keys hold weight exactly 0, and nothing here can tell them from tokens
of weight 0 (which sparsemax and entmax give legitimately). Passed whole, each masked key adds ``||s||`` to d~ (an early
row of a long capture has hundreds of them), and :func:`top_n` of row 0 with ``n > 1`` picks masked keys.
"""

from __future__ import annotations

import itertools
import math
import numbers

import torch

from attnlimits.core import validation
from attnlimits.core.validation import SUM_TOL

__all__ = [
    "MAX_SUBSETS",
    "SUM_TOL",
    "context_vector",
    "cumulative_distance",
    "distinguishable_fraction",
    "random_selection_exact",
    "random_selection_expectation",
    "random_context_norm_exact",
    "random_selection_monte_carlo",
    "token_distances",
    "top_n",
    "top_n_mask",
]

#: Largest number of subsets :func:`random_selection_exact` will enumerate.
MAX_SUBSETS = 200_000


# ----------------------------------------------------------------------------------------------------------------
# selection and context vector
# ----------------------------------------------------------------------------------------------------------------
def _top_n_indices(a: torch.Tensor, n: int) -> torch.Tensor:
    # A stable sort of -alpha keeps equal weights in index order: ties go to the lower index (torch.topk does not
    # promise any tie order).
    return torch.sort(-a, dim=-1, stable=True).indices[..., :n]


def _mask(a: torch.Tensor, n: int) -> torch.Tensor:
    idx = _top_n_indices(a, n)
    return torch.zeros(a.shape, dtype=torch.bool, device=a.device).scatter(-1, idx, True)


def top_n(alpha, n: int) -> torch.Tensor:
    """Indices of the ``n`` largest weights, shape ``(..., n)``, largest first; ties go to the lower index.

    This is the paper's selected set I_N; the deterministic tie rule makes every quantity below a function of alpha.
    Every position is a candidate: for a captured causal row pass only the visible keys (see the module note).
    """
    a, _ = validation.weights(alpha)
    return _top_n_indices(a, validation.selection_size(n, a.shape[-1]))


def top_n_mask(alpha, n: int) -> torch.Tensor:
    """Boolean mask of I_N, shape ``(..., L)``: True at the ``n`` selected positions (tie rule of :func:`top_n`)."""
    a, _ = validation.weights(alpha)
    return _mask(a, validation.selection_size(n, a.shape[-1]))


def _scaled_and_context(a: torch.Tensor, x: torch.Tensor, mask: torch.Tensor):
    y = a.unsqueeze(-1) * x  # (..., L, d): y_i = alpha_i x_i
    s = torch.einsum("...l,...ld->...d", torch.where(mask, a, torch.zeros_like(a)), x)
    return y, s


def context_vector(alpha, x, n: int) -> torch.Tensor:
    """Context vector s = sum_{i in I_N} alpha_i x_i, shape ``(..., d)``: what attention keeps from N tokens."""
    a, xt = validation.weights(alpha, x)
    mask = _mask(a, validation.selection_size(n, a.shape[-1]))
    return _scaled_and_context(a, xt, mask)[1]


def token_distances(alpha, x, n: int, *, sums_to_one: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Distances ||alpha_i x_i - s|| for every token i, shape ``(..., L)``, and the mask of I_N.

    For a selected i this is ||sum_{j in I_N, j != i} alpha_j x_j|| (the X_i of Theorem 2); for a non-selected i it
    is the i-th term of the cumulative distance of Theorem 1. ``sums_to_one=False`` accepts rows that do not sum
    to one (sigmoid attention, softpick): the distances are then those of the weights as they are.
    """
    a, xt = validation.weights(alpha, x, sums_to_one=sums_to_one)
    mask = _mask(a, validation.selection_size(n, a.shape[-1]))
    y, s = _scaled_and_context(a, xt, mask)
    dist = torch.linalg.vector_norm(y - s.unsqueeze(-2), dim=-1)
    return dist, mask.expand(dist.shape)


def cumulative_distance(alpha, x, n: int, *, sums_to_one: bool = True) -> torch.Tensor:
    """Cumulative representation distance d~ = sum_{i not in I_N} ||alpha_i x_i - s||, shape ``(...)``.

    How far, in total, the tokens attention drops lie from what it keeps; 0 when n = L. Every position of ``alpha``
    counts as a token: for a captured causal row pass only the visible keys, ``cap[layer].row(i, head=h)`` (see the
    module note), or the masked ones each add ``||s||``.
    """
    dist, mask = token_distances(alpha, x, n, sums_to_one=sums_to_one)
    return torch.where(mask, torch.zeros_like(dist), dist).sum(dim=-1)


# ----------------------------------------------------------------------------------------------------------------
# random selection: E over I_N uniform among the C(L, n) subsets
# ----------------------------------------------------------------------------------------------------------------
def random_selection_expectation(alpha, x, n: int, *, sums_to_one: bool = True) -> torch.Tensor:
    """Closed-form main term of E_{I_N}[d~] when I_N is a uniformly random n-subset, shape ``(...)``.

    ((L - n) / L) * sum_i || alpha_i x_i - (n / (L - 1)) * sum_{j != i} alpha_j x_j ||: the norm of the conditional
    mean of alpha_i x_i - s given i not in I_N. By Jensen the exact expectation is this term plus a residual >= 0
    (see the distance-collapse chapter and :func:`attnlimits.core.bounds.jensen_residual_bound`).
    """
    a, xt = validation.weights(alpha, x, sums_to_one=sums_to_one)
    length = a.shape[-1]
    n = validation.selection_size(n, length)
    y = a.unsqueeze(-1) * xt
    if length == 1:  # n = L = 1: nothing is left out
        return torch.zeros(y.shape[:-2], dtype=y.dtype)
    total = y.sum(dim=-2, keepdim=True)
    mean_s = (n / (length - 1)) * (total - y)  # E[s | i not in I_N], one row per i
    terms = torch.linalg.vector_norm(y - mean_s, dim=-1)
    return ((length - n) / length) * terms.sum(dim=-1)


def _expected_distance_over_masks(y: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Mean over subsets of sum_{i not in mask} ||y_i - sum_{j in mask} y_j||, shape (...).

    ``masks`` is (S, L) (the same subsets for every row) or (..., S, L) (subsets per row).
    """
    m = masks.to(y.dtype)
    s = torch.einsum("...cl,...ld->...cd", m, y)  # (..., S, d)
    dist = torch.linalg.vector_norm(y.unsqueeze(-3) - s.unsqueeze(-2), dim=-1)  # (..., S, L)
    return (dist * (1 - m)).sum(dim=-1).mean(dim=-1)


def random_selection_exact(alpha, x, n: int) -> torch.Tensor:
    """E_{I_N}[d~] exactly, by enumerating all C(L, n) subsets (I_N uniform), shape ``(...)``.

    Meant for small L (at most :data:`MAX_SUBSETS` subsets); use :func:`random_selection_monte_carlo` beyond.
    """
    a, xt = validation.weights(alpha, x)
    length = a.shape[-1]
    n = validation.selection_size(n, length)
    count = math.comb(length, n)
    if count > MAX_SUBSETS:
        raise ValueError(f"n: C(L={length}, n={n}) = {count} subsets exceed {MAX_SUBSETS}; use Monte Carlo instead")
    masks = torch.zeros(count, length, dtype=torch.bool)
    for row, subset in enumerate(itertools.combinations(range(length), n)):
        masks[row, list(subset)] = True
    return _expected_distance_over_masks(a.unsqueeze(-1) * xt, masks)


def random_context_norm_exact(alpha, x, n: int) -> torch.Tensor:
    """E_{I_N}[||s||] exactly, by enumerating all C(L, n) subsets (I_N uniform), shape ``(...)``.

    The mean length of a random selection's context vector: with it, E_{I_N}[d~] <= sum_i ||alpha_i x_i||
    + (L - n) E_{I_N}[||s||] (the triangle inequality on each dropped term). Meant for small L (at most
    :data:`MAX_SUBSETS` subsets), like :func:`random_selection_exact`.
    """
    a, xt = validation.weights(alpha, x)
    length = a.shape[-1]
    n = validation.selection_size(n, length)
    count = math.comb(length, n)
    if count > MAX_SUBSETS:
        raise ValueError(f"n: C(L={length}, n={n}) = {count} subsets exceed {MAX_SUBSETS}; use smaller L or n")
    masks = torch.zeros(count, length, dtype=a.dtype)
    for row, subset in enumerate(itertools.combinations(range(length), n)):
        masks[row, list(subset)] = 1
    s = torch.einsum("cl,...ld->...cd", masks, a.unsqueeze(-1) * xt)  # (..., S, d): every subset's s
    return torch.linalg.vector_norm(s, dim=-1).mean(dim=-1)


def random_selection_monte_carlo(alpha, x, n: int, samples: int = 1000, seed: int = 0) -> torch.Tensor:
    """Monte Carlo estimate of E_{I_N}[d~] from ``samples`` uniform n-subsets drawn independently for every row,
    shape ``(...)``.

    Unbiased; its standard error shrinks like 1 / sqrt(samples), and independent subsets per row keep the error
    of a mean over rows small. Seeded: the same seed gives the same estimate.
    """
    a, xt = validation.weights(alpha, x)
    length = a.shape[-1]
    n = validation.selection_size(n, length)
    if isinstance(samples, bool) or not isinstance(samples, numbers.Integral) or samples < 1:
        raise ValueError(f"samples: must be an integer >= 1, got {samples!r}")
    gen = torch.Generator().manual_seed(int(seed))
    y = a.unsqueeze(-1) * xt
    batch = y.shape[:-2]
    chunk = max(1, 4_000_000 // max(1, y.numel()))  # bounds the (..., chunk, L, d) intermediate
    total = torch.zeros(batch, dtype=y.dtype)
    for start in range(0, int(samples), chunk):
        size = min(chunk, int(samples) - start)
        idx = torch.rand(*batch, size, length, generator=gen).argsort(dim=-1)[..., :n]
        masks = torch.zeros(*batch, size, length, dtype=torch.bool).scatter(-1, idx, True)
        total = total + _expected_distance_over_masks(y, masks) * size
    return total / samples


# ----------------------------------------------------------------------------------------------------------------
# geometric separability
# ----------------------------------------------------------------------------------------------------------------
def distinguishable_fraction(alpha, x, n: int, r=None, *, sums_to_one: bool = True) -> torch.Tensor:
    """N_s / N: the fraction of selected tokens that the ball B_r(s) tells apart from every non-selected one.

    A selected token i is distinguishable when ||alpha_i x_i - s|| <= r (inside the closed ball) while every
    non-selected alpha_j x_j satisfies ||alpha_j x_j - s|| >= r (not strictly inside). If any non-selected token
    lies strictly inside the ball, no selected token is distinguishable (N_s = 0).

    ``r`` defaults, per row, to min_{j not in I_N} ||s - alpha_j x_j||, so the non-selected condition holds by
    construction and i is distinguishable exactly when no non-selected token is strictly closer to s (ties count
    for the selected token). With n = L there is no non-selected token: the default r is +inf and N_s / N = 1.
    An explicit ``r`` (a number or a tensor broadcasting to the leading dims) must be >= 0 and not NaN.
    """
    dist, mask = token_distances(alpha, x, n, sums_to_one=sums_to_one)
    n = int(n)  # validated by token_distances
    inf = torch.full_like(dist, math.inf)
    nearest_out = torch.where(mask, inf, dist).amin(dim=-1)  # +inf when n = L
    if r is None:
        radius = nearest_out
    else:
        radius = torch.as_tensor(r, dtype=dist.dtype)
        if torch.isnan(radius).any() or (radius < 0).any():
            raise ValueError(f"r: must be >= 0 and not NaN, got {r!r}")
        try:
            radius = torch.broadcast_to(radius, dist.shape[:-1])
        except RuntimeError as err:
            raise ValueError(f"r: shape {tuple(radius.shape)} does not broadcast to {tuple(dist.shape[:-1])}") from err
    inside = mask & (dist <= radius.unsqueeze(-1))
    count = inside.sum(dim=-1).to(dist.dtype)
    outside_ok = nearest_out >= radius
    return torch.where(outside_ok, count, torch.zeros_like(count)) / n
