"""Closed forms of every bound in the paper (and of the book's corrections), one function per bound.

Each function is batched over leading dimensions, works in float32 and float64, and raises ``ValueError`` naming
the argument on invalid input. Proofs are in the Theory chapters; numerical checks in :mod:`attnlimits.theory.checks`.
"""

from __future__ import annotations

import math

import torch

from attnlimits.core import selection, validation

__all__ = [
    "corollary1_band",
    "corollary1_band_sharp",
    "corollary1_delta",
    "corollary3_printed",
    "finite_difference_bound",
    "general_jacobian",
    "general_jacobian_bound",
    "heads_needed",
    "jacobian_of_weights",
    "jensen_residual_bound",
    "lemma1_band",
    "lemma1_band_sharp",
    "multihead_coverage",
    "softmax_entry_bound",
    "softmax_jacobian",
    "softmax_jacobian_norm",
    "softmax_spectral_bound",
    "softmax_weight_gradient_bound",
    "softmax_weight_gradient_norm",
    "softmax_weights",
    "theorem1_dmax",
    "theorem1_dmax_sharp",
    "theorem2_bounds_of_weights",
    "theorem2_lower",
    "theorem2_mean_lower",
    "theorem2_upper",
    "theorem2_upper_reconstructed",
    "theorem2_xi",
    "theorem2_xi_of_weights",
]


# ==============================================================================================================
# Vanishing attention (Lemma 1, Corollary 1) and gradient sensitivity (Lemma 2, Corollary 3).
# Chapters 12 and 15; checks in attnlimits.theory.checks ("Lemma 1", "Corollary 1", "Corollary 3 ...", "Lemma 2 ...").
# ==============================================================================================================


def lemma1_band(L, f_min, f_max) -> tuple[torch.Tensor, torch.Tensor]:
    """Lemma 1: for logits in [-a, a] and a positive F that does not depend on L, every weight satisfies
    C1/L <= alpha_i <= C2/L with C1 = f_min / f_max and C2 = f_max / f_min (f_min, f_max = min, max of F on [-a, a]).

    Returns ``(lower, upper)``, broadcast over ``L``, ``f_min``, ``f_max``. Why: the band shows that every weight is
    Theta(1/L) whatever the content, so attention "vanishes" as the context grows.
    """
    L = validation.lengths("L", L)
    f_min, f_max = validation.positive("f_min", f_min), validation.positive("f_max", f_max)
    if not (f_max >= f_min).all():
        raise ValueError("f_max: must be >= f_min everywhere")
    L, f_min, f_max = validation.promote(L=L, f_min=f_min, f_max=f_max)
    return f_min / (f_max * L), f_max / (f_min * L)


def lemma1_band_sharp(L, f_min, f_max) -> tuple[torch.Tensor, torch.Tensor]:
    """The sharp form of Lemma 1: f_min / (f_min + (L-1) f_max) <= alpha_i <= f_max / (f_max + (L-1) f_min).

    Attained: put l_i where F is largest (smallest) and every other logit where F is smallest (largest). It lies
    inside :func:`lemma1_band`, and the two coincide as L -> infinity (ratio (f_max + (L-1) f_min) / (L f_min) -> 1).
    """
    L = validation.lengths("L", L)
    f_min, f_max = validation.positive("f_min", f_min), validation.positive("f_max", f_max)
    if not (f_max >= f_min).all():
        raise ValueError("f_max: must be >= f_min everywhere")
    L, f_min, f_max = validation.promote(L=L, f_min=f_min, f_max=f_max)
    return f_min / (f_min + (L - 1) * f_max), f_max / (f_max + (L - 1) * f_min)


def corollary1_delta(q, k) -> torch.Tensor:
    """Delta = ||q|| * max_i ||k_i||: the largest possible |logit| for ``q`` (..., d) and keys ``k`` (..., L, d)."""
    q, k = validation.float_tensor("q", q), validation.float_tensor("k", k)
    if q.dim() < 1 or k.dim() < 2:
        raise ValueError(
            f"q, k: expected q of shape (..., d) and k of shape (..., L, d), got {tuple(q.shape)}, {tuple(k.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"k: last dimension {k.shape[-1]} must equal q's d = {q.shape[-1]}")
    if k.shape[-2] == 0:
        raise ValueError("k: needs at least one key (L >= 1)")
    try:
        torch.broadcast_shapes(q.shape[:-1], k.shape[:-2])
    except RuntimeError:
        lead_k, lead_q = tuple(k.shape[:-2]), tuple(q.shape[:-1])
        raise ValueError(f"k: leading dims {lead_k} must broadcast against q's {lead_q}") from None
    dtype = validation.common_dtype(q, k)
    q, k = q.to(dtype), k.to(dtype)
    return torch.linalg.vector_norm(q, dim=-1) * torch.linalg.vector_norm(k, dim=-1).amax(dim=-1)


def _corollary1_args(L, delta, T):
    """Validate and promote the arguments shared by the Corollary 1 bands."""
    L = validation.lengths("L", L)
    delta = validation.float_tensor("delta", delta)
    if not (delta >= 0).all():
        raise ValueError(f"delta: must be >= 0 (a product of norms), got min {delta.min().item():g}")
    T = validation.positive("T", T)
    return validation.promote(L=L, delta=delta, T=T)


def corollary1_band(L, delta, *, T=1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Corollary 1 (softmax): (1/L) exp(-2 Delta / T) <= alpha_i <= (1/L) exp(2 Delta / T), Delta = ||q|| max ||k_i||.

    Lemma 1 with F = exp(l / T) on [-Delta, Delta]. Returns ``(lower, upper)`` broadcast over the arguments.
    """
    L, delta, T = _corollary1_args(L, delta, T)
    x = 2 * delta / T
    return torch.exp(-x) / L, torch.exp(x) / L


def corollary1_band_sharp(L, delta, *, T=1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The sharp softmax band 1/(1 + (L-1) e^{2 Delta/T}) <= alpha_i <= 1/(1 + (L-1) e^{-2 Delta/T}).

    Attained exactly by keys of norm max ||k|| parallel (one key) and antiparallel (all others) to q. Computed
    as logistic functions, so it neither overflows nor loses the L = 1 case (both ends equal 1).
    """
    L, delta, T = _corollary1_args(L, delta, T)
    x, log_rest = 2 * delta / T, torch.log(L - 1)
    return torch.sigmoid(-(x + log_rest)), torch.sigmoid(x - log_rest)


def jacobian_of_weights(alpha, *, T=1.0) -> torch.Tensor:
    """Softmax Jacobian written in its weights: d alpha / d l = (diag(alpha) - alpha alpha^T) / T.

    ``alpha`` (..., L) must be a probability vector along the last dim (:func:`attnlimits.core.validation.weights`);
    ``T`` a
    positive temperature broadcasting against the leading dims. Returns (..., L, L), symmetric positive semi-definite.
    """
    a, _ = validation.weights(alpha)
    T = validation.positive("T", T)
    validation.temperature_shape(T, a.shape[:-1])
    dtype = validation.common_dtype(a, T)
    a, T = a.to(dtype), T.to(dtype)
    return (torch.diag_embed(a) - a[..., :, None] * a[..., None, :]) / T[..., None, None]


def softmax_jacobian(logits, *, T=1.0) -> torch.Tensor:
    """Exact Jacobian of alpha = softmax(l / T) along the last dim, (..., L, L); -inf logits are masked (zero rows)."""
    T = validation.positive("T", T)
    alpha = softmax_weights(logits, T=T)
    return jacobian_of_weights(alpha, T=T.to(alpha.dtype))


def softmax_weights(logits, *, T: torch.Tensor) -> torch.Tensor:
    """softmax(l / T) along the last dim with a temperature tensor T broadcasting against the leading dims (one
    temperature per slice, unlike :func:`attnlimits.core.normalizers.softmax`); -inf logits get weight 0."""
    from attnlimits.core.normalizers import softmax

    x = softmax(logits, dim=-1)  # validates the logits
    validation.temperature_shape(T, x.shape[:-1])
    z = torch.as_tensor(logits, dtype=x.dtype)
    z = z - z.amax(dim=-1, keepdim=True)
    return torch.softmax(z / T.to(x.dtype)[..., None], dim=-1)


def softmax_jacobian_norm(logits, *, T=1.0, iters: int = 80) -> torch.Tensor:
    """Exact spectral norm of the softmax Jacobian, ||diag(alpha) - alpha alpha^T||_2 / T, shape (...,).

    The matrix is diag(alpha) minus a rank-one term, so its largest eigenvalue is the root of the secular equation
    1 = sum_i alpha_i^2 / (alpha_i - lambda) between the two largest weights; bisection finds it in O(L) memory
    per slice, so L = 10^5 is fine (no L x L matrix). Ties of the top weight give lambda = alpha_max exactly.
    """
    T = validation.positive("T", T)
    x = torch.as_tensor(logits)
    alpha = softmax_weights(x, T=T)
    top2 = alpha.topk(min(2, alpha.shape[-1]), dim=-1).values
    hi = top2[..., 0]
    lo = top2[..., 1] if alpha.shape[-1] > 1 else torch.zeros_like(hi)
    a2 = alpha * alpha
    for _ in range(iters):
        mid = (lo + hi) / 2
        with torch.no_grad():
            f = 1 - (a2 / (alpha - mid[..., None])).sum(dim=-1)
        # f decreases from +inf (at the second weight) to -inf (at the largest): the root is where f changes sign.
        lo, hi = torch.where(f > 0, mid, lo), torch.where(f > 0, hi, mid)
    lam = torch.where(hi - lo <= 0, hi, (lo + hi) / 2)
    return lam / T.to(alpha.dtype)


def corollary3_printed(*, T) -> torch.Tensor:
    """Corollary 3 as printed in the paper: ||grad_l alpha||_2 <= min{1/(4T), sqrt(2)}. Violated (chapter 15)."""
    T = validation.positive("T", T)
    return torch.clamp(1 / (4 * T), max=math.sqrt(2))


def softmax_spectral_bound(*, T) -> torch.Tensor:
    """The sharp bound on the softmax Jacobian's spectral norm: ||diag(alpha) - alpha alpha^T||_2 / T <= 1/(2T).

    Attained by two tied top logits with every other weight 0 (exactly at L = 2, in the limit for L > 2).
    """
    T = validation.positive("T", T)
    return 1 / (2 * T)


def softmax_entry_bound(*, T) -> torch.Tensor:
    """The sharp bound on every entry of the softmax Jacobian: |d alpha_i / d l_j| <= 1/(4T), attained at alpha_i = 1/2.

    This is what the printed 1/(4T) of Corollary 3 bounds: the largest entry, not the spectral norm.
    """
    T = validation.positive("T", T)
    return 1 / (4 * T)


def softmax_weight_gradient_norm(logits, *, T=1.0) -> torch.Tensor:
    """The largest gradient of one weight, max_i ||grad_l alpha_i||_2 for alpha = softmax(l / T), shape (...,).

    Row i of the Jacobian is alpha_i (e_i - alpha) / T, so ||grad_l alpha_i||^2 = alpha_i^2 ((1 - alpha_i)^2 +
    ||alpha||^2 - alpha_i^2) / T^2: O(L) per slice, no L x L matrix. -inf logits are masked (weight 0).
    """
    T = validation.positive("T", T)
    alpha = softmax_weights(logits, T=T)
    sq = (alpha * alpha).sum(dim=-1, keepdim=True)
    # the top weight may be 1 - 1e-12: its 1 - alpha_i and sum_{j != i} alpha_j^2 are summed from the other
    # weights (no cancellation); every other weight is at most 1/2, where the differences are accurate
    top = torch.zeros_like(alpha, dtype=torch.bool).scatter_(-1, alpha.argmax(dim=-1, keepdim=True), True)
    rest = alpha.masked_fill(top, 0)
    one_minus = torch.where(top, rest.sum(dim=-1, keepdim=True), 1 - alpha)
    others_sq = torch.where(top, (rest * rest).sum(dim=-1, keepdim=True), sq - alpha * alpha)
    row = alpha * (one_minus**2 + others_sq.clamp_min(0)).sqrt()
    return row.amax(dim=-1) / T.to(alpha.dtype)


def softmax_weight_gradient_bound(*, T) -> torch.Tensor:
    """The sharp bound on the gradient of one softmax weight: ||grad_l alpha_i||_2 <= sqrt(2)/(4T).

    ||grad_l alpha_i||^2 T^2 = alpha_i^2 ((1 - alpha_i)^2 + sum_{j != i} alpha_j^2) <= 2 alpha_i^2 (1 - alpha_i)^2
    <= 2/16; attained by two tied top logits with every other weight 0 (exactly at L = 2). Above the printed 1/(4T).
    """
    T = validation.positive("T", T)
    return math.sqrt(2) / (4 * T)


def finite_difference_bound(*, T, eps) -> torch.Tensor:
    """Corrected ceiling for Algorithm 5's g(T, eps): ||softmax((l + eps v)/T) - softmax(l/T)|| / eps
    <= min{1/(2T), sqrt(2)/eps} for every unit v. The first term is the sharp Lipschitz constant (mean-value
    theorem with :func:`softmax_spectral_bound`), the second the diameter sqrt(2) of the probability simplex.
    """
    T, eps = validation.positive("T", T), validation.positive("eps", eps)
    T, eps = validation.promote(T=T, eps=eps)
    return torch.minimum(1 / (2 * T), math.sqrt(2) / eps)


def _elementwise_derivative(F, x: torch.Tensor, theta=None) -> torch.Tensor:
    """F'(x) for an elementwise F by autograd (d/dx sum F(x) = F'(x) elementwise)."""
    with torch.enable_grad():
        xg = x.detach().clone().requires_grad_(True)
        y = F(xg) if theta is None else F(xg, theta)
        (g,) = torch.autograd.grad(y.sum(), xg)
    return g.detach()


def _general_parts(logits, F, dF, theta):
    x = validation.float_tensor("logits", logits)
    if x.dim() < 1 or x.shape[-1] == 0:
        raise ValueError(f"logits: expected shape (..., L) with L >= 1, got {tuple(x.shape)}")
    if not callable(F):
        raise ValueError(f"F: must be callable (a positive function of the logits), got {type(F).__name__}")
    f = torch.as_tensor(F(x) if theta is None else F(x, theta), dtype=x.dtype)
    if f.shape != x.shape or not (torch.isfinite(f) & (f > 0)).all():
        raise ValueError("F: must return finite values > 0 of the logits' shape")
    if dF is None:
        fp = _elementwise_derivative(F, x, theta)
    else:
        if not callable(dF):
            raise ValueError(f"dF: must be callable (the derivative F') or None, got {type(dF).__name__}")
        fp = torch.as_tensor(dF(x) if theta is None else dF(x, theta), dtype=x.dtype)
    if fp.shape != x.shape or not torch.isfinite(fp).all():
        raise ValueError("dF: must return finite values of the logits' shape")
    return x, f, fp


def general_jacobian(logits, F, *, dF=None, theta=None) -> torch.Tensor:
    """Jacobian of the general normaliser alpha_i = F(l_i) / S, S = sum_k F(l_k):

        d alpha_i / d l_j = delta_ij F'(l_i) / S - F(l_i) F'(l_j) / S^2,  i.e.  (diag(alpha) - alpha alpha^T) diag(h)

    with h = F'/F = (log F)'. ``F`` (and its derivative ``dF``, found by autograd when None) act elementwise on
    finite logits (..., L). Returns (..., L, L) (not symmetric unless h is constant, e.g. softmax with h = 1/T).
    """
    x, f, fp = _general_parts(logits, F, dF, theta)
    S = f.sum(dim=-1, keepdim=True)
    return torch.diag_embed(fp / S) - (f / S)[..., :, None] * (fp / S)[..., None, :]


def general_jacobian_bound(logits, F, *, dF=None, theta=None) -> torch.Tensor:
    """The book's Lemma 2: ||d alpha / d l||_2 <= min{ max_j |h_j| / 2, sqrt( sum_j alpha_j (1 - alpha_j) h_j^2 / 2 ) }
    with h = F'/F at the logits. Shape (...,).

    Unlike a bound in 1 / min F, it stays finite as some F(l_j) -> 0: weights near 0 drop out of the second term.
    Sharp: F = exp(l / T) with two tied top logits gives 1/(2T) for both the norm and the bound.
    """
    x, f, fp = _general_parts(logits, F, dF, theta)
    alpha = f / f.sum(dim=-1, keepdim=True)
    h = fp / f
    first = h.abs().amax(dim=-1) / 2
    second = torch.sqrt((alpha * (1 - alpha) * h * h).sum(dim=-1) / 2)
    return torch.minimum(first, second)


# ==============================================================================================================
# Distance collapse (Theorem 1, Corollary 2) and geometric separability (Theorem 2, multi-head coverage).
# Chapters 13 and 14; checks in attnlimits.theory.checks ("Theorem 1 ...", "Theorem 2 ...", "Multi-head coverage").
# Weights alpha (..., L) and tokens x (..., L, d) are validated as in attnlimits.core.selection.
# ==============================================================================================================


def _sel_parts(alpha, x, n):
    a, xt = validation.weights(alpha, x)
    n = validation.selection_size(n, a.shape[-1])
    return a, xt, n, selection.top_n_mask(alpha, n)  # alpha in its own dtype: the tolerance of its precision


def _theorem1_parts(alpha, x, n):
    """(1 - abar_N, d1, m, L - N, abar_N): the ingredients of d_max, tensors of shape (...)."""
    a, xt, n, mask = _sel_parts(alpha, x, n)
    length = a.shape[-1]
    shape = torch.broadcast_shapes(a.shape[:-1], xt.shape[:-2])
    mask = mask.expand(*shape, length)
    xt = xt.expand(*shape, *xt.shape[-2:])
    abar = torch.where(mask, a, torch.zeros_like(a)).sum(dim=-1)
    out_mass = (1 - abar).clamp_min(0)  # the rows sum to 1 only within tolerance
    norms = torch.linalg.vector_norm(xt, dim=-1)
    m = torch.where(mask, norms, torch.zeros_like(norms)).amax(dim=-1)
    pair = torch.cdist(xt, xt) if xt.shape[-1] > 0 else torch.zeros(*shape, length, length, dtype=xt.dtype)
    cross = (~mask).unsqueeze(-1) & mask.unsqueeze(-2)  # i not selected, j selected
    d1 = torch.where(cross, pair, torch.zeros_like(pair)).flatten(-2).amax(dim=-1)  # 0 when n = L
    return out_mass, d1, m, length - n, 1 - out_mass


def theorem1_dmax(alpha, x, n: int) -> torch.Tensor:
    """Theorem 1 (fixed I_N) as reconstructed: d~ <= (1 - abar_N) d1 + [(1 - abar_N) + (L - N) abar_N] m,

    m = max_{j in I_N} ||x_j||,
    abar_N = sum_{j in I_N} alpha_j, d1 = max_{i not in I_N, j in I_N} ||x_i - x_j|| (0 when N = L). Shape (...).
    """
    out_mass, d1, m, rest, abar = _theorem1_parts(alpha, x, n)
    return out_mass * d1 + (out_mass + rest * abar) * m


def theorem1_dmax_sharp(alpha, x, n: int) -> torch.Tensor:
    """The book's sharp Theorem 1: d~ <= (1 - abar_N) d1 + [(L - N) abar_N - (1 - abar_N)] max_{j in I_N} ||x_j||.

    Smaller than :func:`theorem1_dmax` by 2 (1 - abar_N) max ||x_j||, and attained (selected tokens all equal to u,
    the others on the ray -c u), so no bound in d1, abar_N and max ||x_j|| alone can be smaller.
    """
    out_mass, d1, m, rest, abar = _theorem1_parts(alpha, x, n)
    return out_mass * d1 + (rest * abar - out_mass).clamp_min(0) * m


def jensen_residual_bound(alpha, x, n: int) -> torch.Tensor:
    """Upper bound on the Jensen residual eps = E_{I_N}[d~] - main term (I_N uniform), shape (...).

    eps <= ((L - N) / L) * sum_i sqrt(tr Cov(s | i not in I_N)), and for a uniform N-subset of the M = L - 1 other
    scaled tokens tr Cov = N (M - N) / (M - 1) * sigma_i^2, sigma_i^2 their population variance (1/M normalised).
    Together with eps >= 0 it pins the exact expectation between two closed forms.
    """
    a, xt, n, _ = _sel_parts(alpha, x, n)
    length = a.shape[-1]
    y = a.unsqueeze(-1) * xt
    if length <= 2 or n == length:  # M - 1 = 0 or nothing left out: the conditional sum is deterministic
        return torch.zeros(y.shape[:-2], dtype=y.dtype)
    others = length - 1
    total = y.sum(dim=-2, keepdim=True)
    sq_total = (y * y).sum(dim=(-2, -1)).unsqueeze(-1)  # (..., 1)
    mean = (total - y) / others  # mean of the other scaled tokens, one row per i
    second = (sq_total - (y * y).sum(dim=-1)) / others  # mean squared norm of the others
    var = (second - (mean * mean).sum(dim=-1)).clamp_min(0)
    factor = n * max(others - n, 0) / (others - 1)
    return ((length - n) / length) * torch.sqrt(factor * var).sum(dim=-1)


def _selected_weights(alpha, n):
    a, _ = validation.weights(alpha)
    n = validation.selection_size(n, a.shape[-1])
    return torch.gather(a, -1, selection.top_n(a, n)), n


def _radius(name, value, dtype, allow_zero=False):
    r = validation.float_tensor(name, value).to(dtype)
    if not ((r >= 0).all() if allow_zero else (r > 0).all()):
        raise ValueError(f"{name}: must be {'>= 0' if allow_zero else '> 0'} everywhere")
    return r


def theorem2_xi(alpha, n: int, *, M=1.0, delta=0.0) -> torch.Tensor:
    """xi_i of Theorem 2 for each selected token (largest weight first), shape (..., n).

    xi_i^2 = M^2 sum_{j != i} alpha_j^2 + (M^2 - delta^2 / 2) sum_{j != k; j, k != i} alpha_j alpha_k (sums over
    I_N). Under ||x_j|| = M and ||x_j - x_k|| >= delta it bounds ||s - alpha_i x_i|| for every configuration.
    """
    return theorem2_xi_of_weights(_selected_weights(alpha, n)[0], M=M, delta=delta)


def theorem2_xi_of_weights(weights, *, M=1.0, delta=0.0) -> torch.Tensor:
    """:func:`theorem2_xi` from the selected weights themselves, ``(..., n)`` largest first (they need not sum to
    1): for a caller that has already selected I_N, as the experiments have. ``M`` and ``delta`` broadcast against
    the leading dims."""
    w = validation.float_tensor("weights", weights)
    M = validation.positive("M", M).to(w.dtype).unsqueeze(-1)
    delta = _radius("delta", delta, w.dtype, allow_zero=True).unsqueeze(-1)
    s1 = w.sum(dim=-1, keepdim=True) - w
    s2 = (w * w).sum(dim=-1, keepdim=True) - w * w
    xi2 = M**2 * s2 + (M**2 - delta**2 / 2) * (s1 * s1 - s2)
    return xi2.clamp_min(0).sqrt()


def theorem2_lower(alpha, n: int, *, r, M=1.0, delta=0.0, sharp: bool = False) -> torch.Tensor:
    """Theorem 2 lower bound on N_s / N: 1 - (1 / (N r)) sum_i xi_i, shape (...).

    With ``sharp=True`` the book's stronger form (1 / N) #{i : xi_i <= r}. Both hold for every configuration with
    ||x_j|| = M and min separation >= delta, at every radius r <= R = min_{j not in I_N} ||s - alpha_j x_j|| (the
    paper's radius is R); at r > R a dropped token is inside the ball and N_s(r) = 0.
    """
    xi = theorem2_xi(alpha, n, M=M, delta=delta)
    r = _radius("r", r, xi.dtype).unsqueeze(-1)
    if sharp:
        return (xi <= r).to(xi.dtype).mean(dim=-1)
    return _lower_of_xi(xi, r)


def _lower_of_xi(xi: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    return 1 - (xi / r).mean(dim=-1)


def _upper_of_xi(xi: torch.Tensor, r: torch.Tensor, M) -> torch.Tensor:
    M = validation.positive("M", M).to(xi.dtype).unsqueeze(-1)
    return torch.exp(-((xi - r).clamp_min(0) ** 2) / (2 * M**2)).mean(dim=-1)


def theorem2_bounds_of_weights(weights, *, r, M=1.0, delta=0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Theorem 2's lower bound and the reconstructed upper bound together, from the selected weights ``(..., n)``
    (xi computed once, :func:`theorem2_xi_of_weights`): ``(lower, upper)``, each ``(...)``, the values of
    :func:`theorem2_lower` and :func:`theorem2_upper_reconstructed` at the radius ``r > 0``."""
    xi = theorem2_xi_of_weights(weights, M=M, delta=delta)
    r = _radius("r", r, xi.dtype).unsqueeze(-1)
    return _lower_of_xi(xi, r), _upper_of_xi(xi, r, M)


def theorem2_upper_reconstructed(alpha, n: int, *, r, M=1.0, delta=0.0) -> torch.Tensor:
    """The book's reconstruction of Theorem 2's upper bound: (1 / N) sum_i exp(-(xi_i - r)_+^2 / (2 M^2)).

    The paper does not print its upper bound in full. Chapter 14 shows this reconstruction is *not* a valid bound
    on E[N_s] / N (nor does it track the empirical maxima, as the paper reports its bound does); kept to draw it.
    """
    xi = theorem2_xi(alpha, n, M=M, delta=delta)
    return _upper_of_xi(xi, _radius("r", r, xi.dtype, allow_zero=True).unsqueeze(-1), M)


def theorem2_mean_lower(alpha, n: int, *, M=1.0, d=2) -> torch.Tensor:
    """mu_i <= E||s - alpha_i x_i|| for x_j iid uniform on the sphere of radius M in R^d, shape (..., n).

    mu_i = (E X^2)^{3/2} / (E X^4)^{1/2} (Hoelder), with E X^2 = M^2 S2 and E X^4 = M^4 (S2^2 + (2/d)(S2^2 - S4)),
    S2, S4 = sums of alpha_j^2, alpha_j^4 over the other selected tokens.
    """
    w, n = _selected_weights(alpha, n)
    M = validation.positive("M", M).to(w.dtype).unsqueeze(-1)
    d = validation.lengths("d", d).to(w.dtype).unsqueeze(-1)
    s2 = (w * w).sum(dim=-1, keepdim=True) - w * w
    s4 = (w**4).sum(dim=-1, keepdim=True) - w**4
    ex2 = M**2 * s2
    ex4 = M**4 * (s2 * s2 + (2 / d) * (s2 * s2 - s4).clamp_min(0))
    return torch.where(s2 > 0, ex2**1.5 / ex4.clamp_min(torch.finfo(w.dtype).tiny).sqrt(), torch.zeros_like(s2))


def theorem2_upper(alpha, n: int, *, r, M=1.0, d=2) -> torch.Tensor:
    """The book's Theorem 2 upper bound at a fixed radius r (x_j iid uniform on the sphere of radius M in R^d):

    E[N_s(r)] / N <= (1 / N) sum_i min(1, exp(-(mu_i - r)_+^2 / (2 M^2 S2_i))), S2_i = sum_{j in I_N, j != i}
    alpha_j^2 and mu_i from :func:`theorem2_mean_lower` (McDiarmid: moving x_j moves ||s - alpha_i x_i|| by at
    most 2 M alpha_j). Shape (...).
    """
    w, n = _selected_weights(alpha, n)
    mu = theorem2_mean_lower(alpha, n, M=M, d=d)
    r = _radius("r", r, w.dtype, allow_zero=True).unsqueeze(-1)
    M = validation.positive("M", M).to(w.dtype).unsqueeze(-1)
    s2 = (w * w).sum(dim=-1, keepdim=True) - w * w
    gap = (mu - r).clamp_min(0)
    term = torch.where(
        s2 > 0, torch.exp(-(gap**2) / (2 * M**2 * s2.clamp_min(torch.finfo(w.dtype).tiny))), torch.ones_like(s2)
    )
    return term.clamp(max=1).mean(dim=-1)


def multihead_coverage(p, H) -> torch.Tensor:
    """Multi-head corollary: H independent heads that each separate a token with probability p cover it with
    probability 1 - (1 - p)^H. Broadcast over p in [0, 1] and integer H >= 1."""
    p = validation.float_tensor("p", p)
    if not ((p >= 0) & (p <= 1)).all():
        raise ValueError("p: must lie in [0, 1]")
    H = validation.lengths("H", H)
    p, H = validation.promote(p=p, H=H)
    return 1 - (1 - p) ** H


def heads_needed(p, target) -> torch.Tensor:
    """Smallest H with 1 - (1 - p)^H >= target: ceil(log(1 - target) / log(1 - p)) (1 when p = 1). Integer tensor."""
    p = validation.float_tensor("p", p)
    if not ((p > 0) & (p <= 1)).all():
        raise ValueError("p: must lie in (0, 1]")
    target = validation.float_tensor("target", target)
    if not ((target >= 0) & (target < 1)).all():
        raise ValueError("target: must lie in [0, 1)")
    p, target = validation.promote(p=p, target=target)
    safe = torch.where(p < 1, p, torch.full_like(p, 0.5))
    h = torch.ceil(torch.log1p(-target) / torch.log1p(-safe) - 1e-12).clamp_min(1)
    return torch.where(p < 1, h, torch.ones_like(h)).to(torch.int64)
