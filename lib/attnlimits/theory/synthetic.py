"""Synthetic attention data for the distance-collapse and separability chapters (13, 14) and their checks, and
the synthetic heads of the gradient and alternative-normaliser chapters (15, 33).

Everything is float64 and seeded (``seed`` -> one ``torch.Generator``), so a chapter prints the same numbers on
every run. The data families:

- :func:`sphere`               tokens iid uniform on the sphere of radius M in R^d (Assumption 1 of Theorem 2).
- :func:`concentrated_weights` alpha = softmax(beta * g), g iid N(0, 1): beta = 0 is uniform attention, large beta
                               puts almost all mass on one token (the weight-concentration family of chapter 14).
- :func:`two_level_weights`    mass (1 - eta) spread evenly over N tokens, eta over the rest.
- :func:`attention_rows`       alpha = softmax(q . k_i) with ||q|| ||k_i|| = rho ("bounded" logits: Corollary 1
                               makes every weight Theta(1/L)), or the same plus an attention sink (token 0's logit
                               raised by log L, so its weight stays Theta(1) at every length).
- :func:`gaussian_heads`       heads of Gaussian logits sigma_h * N(0, 1), one scale per head (:func:`geometric_scales`
                               spreads them), causal or with every row seeing all tokens, and Gaussian token vectors.
- :func:`circle_tokens`        tokens at uniform random angles on the unit circle, and :func:`gaussian_softmax`
                               weights of iid Gaussian logits: the drawable 2-d setting of chapter 11's Figure 1.

Sweeps return pandas DataFrames, one row per grid point, for the chapters' figures.
"""

from __future__ import annotations

import math

import pandas as pd
import torch

from attnlimits.core import bounds, selection

__all__ = [
    "attention_rows",
    "circle_tokens",
    "concentrated_weights",
    "distance_sweep",
    "gaussian_heads",
    "gaussian_softmax",
    "geometric_scales",
    "min_separation",
    "multihead_simulation",
    "residual_study",
    "separability_by_delta",
    "separability_samples",
    "separability_sweep",
    "sphere",
    "two_level_weights",
]

DTYPE = torch.float64


def sphere(shape: tuple[int, ...], d: int, *, M: float = 1.0, gen: torch.Generator | None = None) -> torch.Tensor:
    """iid points uniform on the sphere of radius M in R^d, shape ``(*shape, d)`` (normalised Gaussians)."""
    z = torch.randn(*shape, d, generator=gen, dtype=DTYPE)
    return M * z / torch.linalg.vector_norm(z, dim=-1, keepdim=True)


def concentrated_weights(shape: tuple[int, ...], L: int, beta, *, gen: torch.Generator | None = None) -> torch.Tensor:
    """alpha = softmax(beta * g) with g iid standard normal, shape ``(*shape, L)``; ``beta`` broadcasts to shape."""
    g = torch.randn(*shape, L, generator=gen, dtype=DTYPE)
    beta = torch.as_tensor(beta, dtype=DTYPE)
    return torch.softmax(beta.unsqueeze(-1) * g if beta.dim() else beta * g, dim=-1)


def two_level_weights(L: int, n: int, *, eta: float = 0.0) -> torch.Tensor:
    """(1 - eta) / n on tokens 0..n-1 and eta / (L - n) on the others, shape ``(L,)``."""
    w = torch.full((L,), eta / max(L - n, 1), dtype=DTYPE)
    w[:n] = (1 - eta) / n if L > n else 1 / n
    return w / w.sum()


def circle_tokens(L: int, *, seed: int) -> torch.Tensor:
    """L points at uniform random angles on the unit circle, shape ``(L, 2)`` (tokens that can be drawn)."""
    angles = 2 * torch.pi * torch.rand(L, generator=torch.Generator().manual_seed(seed), dtype=DTYPE)
    return torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1)


def gaussian_softmax(L: int, *, scale: float = 1.0, seed: int) -> torch.Tensor:
    """Softmax weights of L iid N(0, scale^2) logits, shape ``(L,)``: attention that ignores where the tokens are."""
    from attnlimits.core.normalizers import softmax

    logits = scale * torch.randn(L, generator=torch.Generator().manual_seed(seed), dtype=DTYPE)
    return softmax(logits)


def attention_rows(L: int, d: int, rows: int, *, regime: str = "bounded", rho: float = 2.0, seed: int = 0):
    """Synthetic attention rows ``(alpha (rows, L), x (rows, L, d))``: tokens x uniform on the unit sphere,
    logits q . k_i with q, k_i uniform on spheres of radius sqrt(rho) (so |logit| <= rho), T = 1.

    ``regime="sink"`` adds log L to token 0's logit: its weight then stays near e^{l_0} / (e^{l_0} + mean e^{l})
    at every L, the attention-sink pattern of trained models, while ``"bounded"`` attention vanishes like 1/L.
    """
    if regime not in ("bounded", "sink"):
        raise ValueError(f"regime: must be 'bounded' or 'sink', got {regime!r}")
    gen = torch.Generator().manual_seed(seed)
    q = sphere((rows, 1), d, M=math.sqrt(rho), gen=gen)
    k = sphere((rows, L), d, M=math.sqrt(rho), gen=gen)
    x = sphere((rows, L), d, M=1.0, gen=gen)
    logits = (q * k).sum(dim=-1)
    if regime == "sink":
        logits[:, 0] += math.log(L)
    return torch.softmax(logits, dim=-1), x


def geometric_scales(low: float, high: float, count: int) -> torch.Tensor:
    """``count`` scales spaced geometrically from ``low`` to ``high`` (float64), for :func:`gaussian_heads`."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count: must be an integer >= 1, got {count!r}")
    if not 0 < low <= high < math.inf:
        raise ValueError(f"scales: need 0 < low <= high < inf, got {(low, high)!r}")
    return torch.logspace(math.log10(low), math.log10(high), count, dtype=DTYPE)


def gaussian_heads(L: int, scales, *, rows: int | None = None, d: int | None = None, seed: int = 0):
    """Synthetic heads, one per entry sigma_h of ``scales``: logits sigma_h * N(0, 1) in float64 from one seeded draw,
    and with ``d`` token vectors N(0, I_d / d) of shape ``(heads, L, d)`` drawn after them (else None).

    ``rows=None``: a causal layer, logits ``(heads, L, L)`` whose row t sees positions 0..t (the others -inf), as a
    model's heads reach Algorithm 5 (chapter 15). ``rows=R``: R query rows that each see all L tokens, logits
    ``(heads, R, L)`` (the heads of :mod:`attnlimits.studies.alternatives`, chapter 33); a prefix ``[:, :, :L']`` with
    ``x[:, :L']`` is the same construction at length L'. Returns ``(logits, x)``.
    """
    for name, v in (("L", L), ("rows", L if rows is None else rows), ("d", 1 if d is None else d)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: must be an integer >= 1, got {v!r}")
    sigma = torch.as_tensor(scales, dtype=DTYPE).reshape(-1)
    if len(sigma) == 0 or not (torch.isfinite(sigma) & (sigma > 0)).all():
        raise ValueError(f"scales: need one finite scale > 0 per head, got {scales!r}")
    gen = torch.Generator().manual_seed(seed)
    logits = sigma[:, None, None] * torch.randn(len(sigma), L if rows is None else rows, L, generator=gen, dtype=DTYPE)
    if rows is None:
        logits = logits.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), -math.inf)
    x = None if d is None else torch.randn(len(sigma), L, d, generator=gen, dtype=DTYPE) / math.sqrt(d)
    return logits, x


def distance_sweep(
    lengths,
    ns,
    *,
    d: int = 16,
    rows: int = 64,
    regime: str = "bounded",
    rho: float = 2.0,
    seed: int = 0,
    mc_samples: int = 200,
) -> pd.DataFrame:
    """Corollary 2 on synthetic rows: for each (L, N), the row means of d~, the random-selection expectation E
    (Monte Carlo), its closed-form main term E_0 and upper bound E_0 + eps_bound (E lies between them), the
    reconstructed and the sharp d_max, ||s|| and d~ / d_max (mean and max over rows)."""
    out = []
    for L in lengths:
        alpha, x = attention_rows(L, d, rows, regime=regime, rho=rho, seed=seed + L)
        for n in ns:
            if n > L:
                continue
            dt = selection.cumulative_distance(alpha, x, n)
            d_max = bounds.theorem1_dmax(alpha, x, n)
            sharp = bounds.theorem1_dmax_sharp(alpha, x, n)
            ratio = torch.where(d_max > 0, dt / d_max, torch.zeros_like(dt))
            out.append(
                dict(
                    L=L,
                    N=n,
                    regime=regime,
                    d_tilde=dt.mean().item(),
                    E_mc=selection.random_selection_monte_carlo(alpha, x, n, mc_samples, seed).mean().item(),
                    E=selection.random_selection_expectation(alpha, x, n).mean().item(),
                    E_upper=(
                        selection.random_selection_expectation(alpha, x, n) + bounds.jensen_residual_bound(alpha, x, n)
                    )
                    .mean()
                    .item(),
                    d_max=d_max.mean().item(),
                    d_max_sharp=sharp.mean().item(),
                    s_norm=torch.linalg.vector_norm(selection.context_vector(alpha, x, n), dim=-1).mean().item(),
                    ratio=ratio.mean().item(),
                    ratio_max=ratio.max().item(),
                )
            )
    return pd.DataFrame(out)


def residual_study(
    lengths, *, d: int = 4, rows: int = 256, beta: float = 2.0, seed: int = 0, mc_samples: int = 4000
) -> pd.DataFrame:
    """The Jensen residual eps = E - main term per (L, N): exact enumeration when C(L, N) <= 5000, Monte Carlo
    beyond; rows with alpha = softmax(beta g) and Gaussian tokens. Columns: mean E, main term, eps, eps / main,
    the book's upper bound on eps, min eps (its sign) and whether E is exact."""
    out = []
    gen = torch.Generator().manual_seed(seed)
    for L in lengths:
        alpha = concentrated_weights((rows,), L, beta, gen=gen)
        x = torch.randn(rows, L, d, generator=gen, dtype=DTYPE)
        for n in sorted({1, max(1, L // 4), max(1, L // 2), L - 1}):
            exact = math.comb(L, n) <= 5000
            E = (
                selection.random_selection_exact(alpha, x, n)
                if exact
                else selection.random_selection_monte_carlo(alpha, x, n, mc_samples, seed)
            )
            main = selection.random_selection_expectation(alpha, x, n)
            eps = E - main
            out.append(
                dict(
                    L=L,
                    N=n,
                    exact=exact,
                    E=E.mean().item(),
                    main=main.mean().item(),
                    eps=eps.mean().item(),
                    eps_min=eps.min().item(),
                    eps_rel=(eps / main).mean().item(),
                    eps_bound=bounds.jensen_residual_bound(alpha, x, n).mean().item(),
                )
            )
    return pd.DataFrame(out)


def min_separation(x: torch.Tensor) -> torch.Tensor:
    """delta = min_{i != j} ||x_i - x_j|| per row of x (..., L, d), shape (...)."""
    L = x.shape[-2]
    pair = torch.cdist(x, x).masked_fill(torch.eye(L, dtype=torch.bool), torch.inf)
    return pair.flatten(-2).amin(dim=-1)


def separability_samples(
    alpha: torch.Tensor,
    n: int,
    d: int,
    samples: int,
    *,
    M: float = 1.0,
    r=None,
    seed: int = 0,
    delta: str = "empirical",
) -> dict[str, torch.Tensor]:
    """Theorem 2's probability space: alpha (..., L) fixed, tokens iid uniform on the sphere of radius M in R^d,
    ``samples`` draws. Returns per draw (shape (samples, ...)): N_s / N, the radius used (default: the nearest
    non-selected token), delta (``"empirical"``: the realised min separation, or ``"zero"``) and the lower and
    reconstructed upper bounds evaluated at that radius and delta; plus the book's fixed-r upper bound when r is
    given."""
    gen = torch.Generator().manual_seed(seed)
    L = alpha.shape[-1]
    x = sphere((samples, *alpha.shape[:-1], L), d, M=M, gen=gen)
    a = alpha.expand(samples, *alpha.shape)
    frac = selection.distinguishable_fraction(a, x, n, r=r)
    dist, mask = selection.token_distances(a, x, n)
    if r is None:
        radius = torch.where(mask, torch.full_like(dist, torch.inf), dist).amin(dim=-1)
    else:
        radius = torch.broadcast_to(torch.as_tensor(r, dtype=DTYPE), frac.shape)
    dl = min_separation(x) if delta == "empirical" else torch.zeros_like(frac)
    safe = radius.clamp_min(torch.finfo(DTYPE).tiny)
    out = dict(
        frac=frac,
        r=radius,
        delta=dl,
        lower=bounds.theorem2_lower(a, n, r=safe, M=M, delta=dl),
        lower_sharp=bounds.theorem2_lower(a, n, r=safe, M=M, delta=dl, sharp=True),
        upper_rec=bounds.theorem2_upper_reconstructed(a, n, r=radius, M=M, delta=dl),
    )
    if r is not None:
        out["upper_book"] = bounds.theorem2_upper(a, n, r=radius, M=M, d=d)
    return out


def separability_by_delta(
    alpha: torch.Tensor, n: int, d: int, samples: int, *, deltas=("empirical", "zero"), seed: int = 0
) -> pd.DataFrame:
    """:func:`separability_samples` at the paper's radius R once per reading of delta (``"empirical"``: the realised
    min separation, ``"zero"``), on the same token draws. One row per delta: the mean and the smallest N_s / N, the
    mean reconstructed upper bound (below the mean N_s / N where the reconstruction fails) and the mean radius R."""
    rows = []
    for delta in deltas:
        res = separability_samples(alpha, n, d, samples, seed=seed, delta=delta)
        rows.append(
            dict(
                delta=delta,
                E_Ns_over_N=res["frac"].mean().item(),
                min_Ns_over_N=res["frac"].min().item(),
                reconstructed_upper=res["upper_rec"].mean().item(),
                mean_R=res["r"].mean().item(),
            )
        )
    return pd.DataFrame(rows)


def separability_sweep(
    ns, *, L: int = 64, d: int = 16, betas=(0.0, 1.0, 2.0, 4.0), samples: int = 200, M: float = 1.0, seed: int = 0
) -> pd.DataFrame:
    """E[N_s] / N against the Theorem 2 bounds over N and weight concentration beta (one alpha per beta)."""
    out = []
    gen = torch.Generator().manual_seed(seed)
    for beta in betas:
        alpha = concentrated_weights((), L, beta, gen=gen)
        for n in ns:
            res = separability_samples(alpha, n, d, samples, M=M, seed=seed + n)
            row = dict(beta=beta, N=n, L=L, d=d)
            row.update({k: v.mean().item() for k, v in res.items()})
            row["frac_sd"] = res["frac"].std().item() / math.sqrt(samples)
            out.append(row)
    return pd.DataFrame(out)


def multihead_simulation(
    alpha: torch.Tensor, n: int, d: int, heads, *, samples: int = 400, M: float = 1.0, seed: int = 0
) -> pd.DataFrame:
    """H heads that see the same weights alpha (L,) and independent token draws (independent heads). For each H:
    the simulated mean coverage (fraction of selected tokens distinguishable in at least one head), the paper's
    1 - (1 - p)^H with p = E[N_s] / N, and the per-token form mean_i 1 - (1 - p_i)^H (p_i estimated on separate
    draws)."""
    H_max = max(heads)
    gen_seed = seed
    ref = separability_samples(alpha, n, d, samples, M=M, seed=gen_seed)  # for p and p_i (independent draws)
    ref_mask = _selected_inside(alpha, n, d, samples, M, gen_seed)
    p_i = ref_mask.to(DTYPE).mean(dim=0)  # (n,)
    p = ref["frac"].mean()
    per_head = torch.stack([_selected_inside(alpha, n, d, samples, M, gen_seed + 1 + h) for h in range(H_max)])
    out = []
    for H in heads:
        covered = per_head[:H].any(dim=0).to(DTYPE)  # (samples, n)
        out.append(
            dict(
                H=H,
                simulated=covered.mean().item(),
                sd=covered.mean(dim=1).std().item() / math.sqrt(samples),
                paper=bounds.multihead_coverage(p, H).item(),
                per_token=bounds.multihead_coverage(p_i, H).mean().item(),
                p=p.item(),
            )
        )
    return pd.DataFrame(out)


def _selected_inside(alpha, n, d, samples, M, seed) -> torch.Tensor:
    """(samples, n) booleans: selected token (largest weight first) distinguishable at the default radius."""
    gen = torch.Generator().manual_seed(seed)
    L = alpha.shape[-1]
    x = sphere((samples, L), d, M=M, gen=gen)
    a = alpha.expand(samples, L)
    dist, mask = selection.token_distances(a, x, n)
    radius = torch.where(mask, torch.full_like(dist, torch.inf), dist).amin(dim=-1, keepdim=True)
    idx = selection.top_n(alpha, n).expand(samples, n)
    return torch.gather(dist, -1, idx) <= radius
