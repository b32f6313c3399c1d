"""Sweeps behind the figures of the vanishing-attention and gradient-sensitivity chapters (12 and 15).

Each function is seeded, runs on synthetic float64 data, and returns a pandas DataFrame that a chapter plots in a
few lines; the heavy lifting (and the vectorisation) stays here so the chapters read as prose, maths and figures.

- :func:`vanishing_sweep`        L * max alpha, the fraction of exact zeros and T ||J||_2 against L per normaliser.
- :func:`corollary1_tightness`   the extremal keys of Corollary 1: measured / paper band and / sharp band.
- :func:`jacobian_sample`        the random softmax Jacobians of the Corollary-3 checks, as a table.
- :func:`swap_example`           two logit vectors sqrt(5) eps apart whose top two entries swap.
- :func:`g_synthetic`            Algorithm 5's g(T, eps) on synthetic causal heads, paper's and corrected curves
                                 (the measurement itself, :func:`attnlimits.core.rowstats.finite_difference_g`, is one
                                 of the experiments' per-row kernels; ``sweeps.finite_difference_g`` is that
                                 function).
- :func:`max_weight_sweep`       the largest weight against L per normaliser (chapter 11).
- :func:`max_weight_slopes`      the log-log slope of those curves at long contexts (chapter 11).
- :func:`jacobian_autograd_errors` how far the library's Jacobians are from torch.autograd's: two floats (chapter 15).
- :func:`corollary3_counterexample` two tied top logits against the printed Corollary 3 (chapter 15).
- :func:`jacobian_readings`      three readings of ||grad_l alpha||: tied pair, random rows, sharp bounds (chapter 15).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from attnlimits.core import bounds, validation
from attnlimits.core.rowstats import finite_difference_g, jacobian_spectral_norm
from attnlimits.infra.profiling import one_thread
from attnlimits.theory import checks, synthetic

__all__ = [
    "max_weight_sweep",
    "max_weight_slopes",
    "corollary1_tightness",
    "corollary3_counterexample",
    "g_synthetic",
    "jacobian_autograd_errors",
    "jacobian_readings",
    "jacobian_sample",
    "swap_example",
    "vanishing_sweep",
]


def _top_eig_diag_minus_rank_one(d: torch.Tensor, u: torch.Tensor, iters: int = 60) -> torch.Tensor:
    """Largest eigenvalue of diag(d) - u u^T (d >= 0, u_i != 0 where d_i > 0) per row: the root of the secular
    equation 1 = sum_i u_i^2 / (d_i - lambda) between the two largest d_i, by Newton steps safeguarded with
    bisection (a step leaving the bracket is replaced by the midpoint). O(L) memory; stops when the bracket or the
    step is below 1e-14 relative."""
    top2 = d.topk(min(2, d.shape[-1]), dim=-1).values
    hi = top2[..., 0]
    lo = top2[..., 1] if d.shape[-1] > 1 else torch.zeros_like(hi)
    u2 = u * u
    lam = (lo + hi) / 2
    for _ in range(iters):
        diff = d - lam[..., None]
        r = u2 / diff
        f = 1 - r.sum(-1)
        fp = -(r / diff).sum(-1)
        lo, hi = torch.where(f > 0, lam, lo), torch.where(f > 0, hi, lam)
        newton = lam - f / fp
        new = torch.where((newton > lo) & (newton < hi), newton, (lo + hi) / 2)
        new = torch.where(hi > lo, new, hi)  # tied top entries: lambda = d_max exactly
        done = ((new - lam).abs() <= 1e-14 * hi).all() or ((hi - lo) <= 1e-14 * hi).all()
        lam = new
        if done:
            break
    return lam


def _exact_jacobian_norm(name: str, logits: torch.Tensor, alpha: torch.Tensor):
    """T ||J||_2 in closed form where the Jacobian is diag(d) - u u^T (T = 1, default parameters), else None.

    softmax: d = u = alpha; Scalable-Softmax: the same times log L; sparsemax: d = support indicator m, u = m/sqrt|S|;
    1.5-entmax: d = sqrt(alpha), u = d / sqrt(sum d) (Peters et al. 2019).
    """
    if name in ("softmax", "scalable-softmax"):
        scale = math.log(logits.shape[-1]) if name == "scalable-softmax" else 1.0
        return scale * _top_eig_diag_minus_rank_one(alpha, alpha)
    if name in ("sparsemax", "1.5-entmax"):
        d = (alpha > 0).to(alpha.dtype) if name == "sparsemax" else alpha.sqrt()
        return _top_eig_diag_minus_rank_one(d, d / d.sum(-1, keepdim=True).sqrt())
    if name == "adaptive-temperature":
        # alpha = softmax(beta(H) z), z the centred logits, p = softmax(z), H its entropy: the Jacobian is
        # beta A_alpha + (A_alpha z)(grad beta)^T with grad beta = -poly'(H) A_p log p (A_w = diag w - w w^T).
        # Where beta is locally constant (H below the threshold, or the polynomial clamped at 1) the rank-one term
        # vanishes and the norm is beta times the softmax one; elsewhere (short rows) J is formed explicitly.
        from attnlimits.core.normalizers import ADAPTIVE_TEMPERATURE_COEFFS, softmax

        z = logits - logits.amax(-1, keepdim=True)
        p = softmax(z, dim=-1)
        logp = torch.log(p.clamp_min(torch.finfo(p.dtype).tiny))
        H = -(p * logp).sum(-1)
        poly, dpoly = torch.zeros_like(H), torch.zeros_like(H)
        for c in ADAPTIVE_TEMPERATURE_COEFFS:  # Horner for the polynomial and its derivative
            dpoly = dpoly * H + poly
            poly = poly * H + c
        beta = torch.where(H > 0.5, poly.clamp_min(1.0), torch.ones_like(H))
        norm = beta * _top_eig_diag_minus_rank_one(alpha, alpha)
        moving = (H > 0.5) & (poly > 1)
        if moving.any():
            a, zm, pm, lm = alpha[moving], z[moving], p[moving], logp[moving]
            u = a * (zm - (a * zm).sum(-1, keepdim=True))  # A_alpha z
            g = -dpoly[moving][:, None] * pm * (lm - (pm * lm).sum(-1, keepdim=True))  # grad beta
            b = beta[moving][:, None]
            if a.shape[-1] <= 256:  # exact: form J, largest eigenvalue of J^T J
                A = torch.diag_embed(a) - a[..., :, None] * a[..., None, :]
                J = b[..., None] * A + u[..., :, None] * g[..., None, :]
                norm[moving] = torch.linalg.eigvalsh(J.mT @ J)[..., -1].clamp_min(0).sqrt()
            else:  # power iteration on J^T J with O(L) matrix-vector products (A w = a * (w - a.w))
                w = torch.randn(a.shape, generator=torch.Generator().manual_seed(0), dtype=a.dtype)  # not ones: A 1 = 0
                with one_thread():  # many tiny ops: threads cost more than they save
                    for _ in range(400):
                        w = w / torch.linalg.vector_norm(w, dim=-1, keepdim=True)
                        jw = b * a * (w - (a * w).sum(-1, keepdim=True)) + u * (g * w).sum(-1, keepdim=True)
                        w = b * a * (jw - (a * jw).sum(-1, keepdim=True)) + g * (u * jw).sum(-1, keepdim=True)
                norm[moving] = torch.linalg.vector_norm(jw, dim=-1)
        return norm
    return None


def vanishing_sweep(
    lengths, names=None, *, rho: float = 2.0, d: int = 4, rows: int = 8, seed: int = 0, jacobian: bool = True
) -> pd.DataFrame:
    """Who escapes Theta(1/L), and at what price.

    Keys uniform on the unit sphere in R^d (one draw of max(lengths) keys; each L uses the first L), ``rows`` random
    unit queries scaled by ``rho``, T = 1: logits q.k_i in [-rho, rho], so Delta / T = rho. For each normaliser of
    the paper's family of :data:`attnlimits.core.normalizers.NORMALIZERS` (default parameters) and each L: mean over
    queries of L * max alpha (Corollary 1 keeps it in [e^{-2 rho}, e^{2 rho}] for softmax), the fraction of exactly-
    zero weights, and T ||J||_2 (sensitivity; 1/2 is the softmax ceiling of chapter 15). Returns a long DataFrame.
    """
    from attnlimits.core.normalizers import NORMALIZERS, resolve

    names = resolve(names, "paper")
    lengths = sorted({int(L) for L in lengths})
    if not lengths or lengths[0] < 1:
        raise ValueError(f"lengths: need integers >= 1, got {lengths}")
    if not (math.isfinite(rho) and rho >= 0):
        raise ValueError(f"rho: must be a finite number >= 0, got {rho}")
    gen = torch.Generator().manual_seed(seed)
    keys = torch.randn(lengths[-1], d, generator=gen, dtype=torch.float64)
    keys = keys / torch.linalg.vector_norm(keys, dim=-1, keepdim=True)
    q = torch.randn(rows, d, generator=gen, dtype=torch.float64)
    q = rho * q / torch.linalg.vector_norm(q, dim=-1, keepdim=True)
    out = []
    for L in lengths:
        logits = q @ keys[:L].T
        for name in names:
            fn = NORMALIZERS[name]
            alpha = fn(logits, dim=-1)
            row = {
                "normalizer": name,
                "L": L,
                "L_times_max_weight": (L * alpha.amax(-1)).mean().item(),
                "zero_fraction": (alpha == 0).double().mean().item(),
            }
            if jacobian:
                norm = _exact_jacobian_norm(name, logits, alpha)
                if norm is None:  # any other normaliser: matrix-free power iteration
                    norm = jacobian_spectral_norm(lambda z, fn=fn: fn(z, dim=-1), logits, iters=60)
                row["T_jacobian_norm"] = norm.mean().item()
            out.append(row)
    return pd.DataFrame(out)


def corollary1_tightness(lengths, rhos, *, T: float = 1.0) -> pd.DataFrame:
    """The extremal keys of Corollary 1 (one key parallel to q, L - 1 antiparallel, all of norm max ||k||), measured.

    For each L and rho = Delta / T: the largest weight alpha_1, the paper's upper band e^{2 rho}/L, the sharp band
    1/(1 + (L-1) e^{-2 rho}) and the ratios. The sharp ratio is 1 (attained); the paper's ratio L / (e^{2 rho} + L - 1)
    tends to 1 only as L -> infinity.
    """
    out = []
    for rho in rhos:
        for L in lengths:
            L = int(L)
            delta = rho * T
            q = torch.tensor([delta, 0.0], dtype=torch.float64)  # ||q|| = Delta, ||k_i|| = 1
            k = torch.tensor([[-1.0, 0.0]], dtype=torch.float64).repeat(L, 1)
            k[0, 0] = 1.0
            alpha = torch.softmax((k @ q) / T, dim=-1)
            _, upper = bounds.corollary1_band(L, bounds.corollary1_delta(q, k), T=T)
            _, sharp = bounds.corollary1_band_sharp(L, delta, T=T)
            out.append(
                {
                    "rho": rho,
                    "L": L,
                    "alpha_max": alpha[0].item(),
                    "paper_upper": upper.item(),
                    "sharp_upper": sharp.item(),
                    "ratio_paper": (alpha[0] / upper).item(),
                    "ratio_sharp": (alpha[0] / sharp).item(),
                }
            )
    return pd.DataFrame(out)


def jacobian_sample(trials: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The random softmax logits of the Corollary-3 checks (same sampler, same seed), one row per trial:
    L, T, max alpha, T ||J||_2 (exact) and T max_ij |J_ij|."""
    s = checks.jacobian_norm_study(int(trials), int(seed))
    return pd.DataFrame(
        {
            "L": s["lengths"].numpy(),
            "T": s["T"].numpy(),
            "max_alpha": s["max_alpha"].numpy(),
            "T_norm": (s["norm"] * s["T"]).numpy(),
            "T_entry": (s["entry"] * s["T"]).numpy(),
        }
    )


def swap_example(eps, *, T: float = 1.0, rest: float = -math.inf) -> pd.DataFrame:
    """Two logit vectors l = (c + eps, c, rest...) and l' = (c - eps, c + eps, rest...) with c = 0: their distance is
    sqrt((2 eps)^2 + eps^2) = sqrt(5) eps and their two largest entries swap order.

    ``rest`` is the value of the other logits (-inf: absent, the limit where the effect is largest). Returns, per
    eps: the distance, ||alpha - alpha'||, the ratio ||alpha - alpha'|| / ||l - l'|| times T (compare 1/4 printed,
    1/2 sharp) and the change itself against min{sqrt(5) eps / (2T), sqrt(2)}.
    """
    from attnlimits.core.normalizers import softmax

    eps = torch.as_tensor(eps, dtype=torch.float64).reshape(-1)
    if not (torch.isfinite(eps).all() and (eps > 0).all()):
        raise ValueError("eps: must be finite and > 0")
    tail = torch.full((len(eps), 2), float(rest), dtype=torch.float64)
    l1 = torch.cat([torch.stack([eps, torch.zeros_like(eps)], -1), tail], -1)
    l2 = torch.cat([torch.stack([-eps, eps], -1), tail], -1)
    a1, a2 = softmax(l1, T=T), softmax(l2, T=T)
    dist = torch.linalg.vector_norm((l1 - l2)[:, :2], dim=-1)
    change = torch.linalg.vector_norm(a1 - a2, dim=-1)
    return pd.DataFrame(
        {
            "eps": eps.numpy(),
            "distance": dist.numpy(),
            "change": change.numpy(),
            "T_change_per_distance": (T * change / dist).numpy(),
            "corrected_ceiling": torch.minimum(dist / (2 * T), torch.full_like(dist, math.sqrt(2))).numpy(),
            "printed_ceiling": torch.clamp(dist * bounds.corollary3_printed(T=T), max=math.sqrt(2)).numpy(),
        }
    )


def _g_heads(L: int, seed: int) -> tuple[torch.Tensor, list[str]]:
    """The causal heads of :func:`g_synthetic` (heads, L, L) and their labels: one Gaussian head per scale
    (:func:`attnlimits.theory.synthetic.gaussian_heads`), and one more, "tied", whose every row holds exactly two equal
    logits (the first two positions; row 0 sees one) - the worst case of chapter 15, where the Jacobian norm is
    1/(2T)."""
    scales = (0.5, 1.0, 2.0, 4.0)
    gaussian, _ = synthetic.gaussian_heads(L, scales, seed=seed)
    tied = torch.full((1, L, L), -math.inf, dtype=torch.float64)
    tied[..., :2] = 0.0
    labels = [f"gaussian sigma={sigma:g}" for sigma in scales] + ["tied top two"]
    return torch.cat([gaussian, tied]), labels


def g_synthetic(T_grid, eps_grid=(1e-3, 1e-1, 10.0), *, L: int = 64, seed: int = 0) -> pd.DataFrame:
    """Algorithm 5 on synthetic causal heads (Gaussian logits at four scales and one head with tied top two):
    g(T, eps) (max over heads), the head that attains it, the paper's dashed curve min{1/(4T), sqrt(2)} and the
    corrected ceiling min{1/(2T), sqrt(2)/eps}."""
    logits, labels = _g_heads(L, seed)
    T_grid = torch.as_tensor(T_grid, dtype=torch.float64).reshape(-1)
    eps_grid = torch.as_tensor(eps_grid, dtype=torch.float64).reshape(-1)
    per_head = finite_difference_g(logits, T=T_grid, eps=eps_grid, seed=seed, reduce=False)  # (heads, nT, neps)
    g, arg = per_head.max(dim=0)
    paper = bounds.corollary3_printed(T=T_grid)
    out = []
    for i, T in enumerate(T_grid.tolist()):
        for j, e in enumerate(eps_grid.tolist()):
            out.append(
                {
                    "T": T,
                    "eps": e,
                    "g": g[i, j].item(),
                    "head": labels[int(arg[i, j])],
                    "paper": paper[i].item(),
                    "corrected": bounds.finite_difference_bound(T=T, eps=e).item(),
                }
            )
    return pd.DataFrame(out)


def max_weight_sweep(
    lengths,
    *,
    names=None,
    logit_bound: float = 2.0,
    gap: float = 0.0,
    draws: int = 16,
    seed: int = 0,
    dtype=torch.float64,
):
    """Median over ``draws`` random rows of the largest weight, for each length L and normaliser.

    Each row has one "needle" logit at ``logit_bound`` and L - 1 distractors drawn uniformly from
    [-logit_bound, logit_bound - gap]; ``gap = 0`` gives plain i.i.d. uniform logits. Bounded logits are the
    setting of Lemma 1. The same rows feed every normaliser, so the curves differ only by the normaliser.

    Returns a long pandas DataFrame with columns ``normalizer, L, max_weight, L_times_max_weight``. Seeded: the
    same arguments give the same table.
    """
    from attnlimits.core.normalizers import NORMALIZERS, resolve

    names = resolve(names, "paper")
    lengths = [int(L) for L in lengths]
    if not lengths or min(lengths) < 1:
        raise ValueError(f"lengths: need a non-empty list of integers >= 1, got {lengths}")
    if draws < 1:
        raise ValueError(f"draws: must be >= 1, got {draws}")
    validation.positive_number("logit_bound", logit_bound)
    if not 0 <= gap < 2 * logit_bound:
        raise ValueError(f"gap: must lie in [0, 2 * logit_bound) = [0, {2 * logit_bound}), got {gap}")
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for L in lengths:
        span = 2 * logit_bound - gap
        logits = -logit_bound + span * torch.rand(draws, L, generator=gen, dtype=dtype)
        logits[:, 0] = logit_bound
        for name in names:
            top = NORMALIZERS[name](logits).amax(dim=-1).median().item()
            rows.append({"normalizer": name, "L": L, "max_weight": top, "L_times_max_weight": L * top})
    return pd.DataFrame(rows)


def max_weight_slopes(by_gap: dict, *, min_length: int = 100) -> pd.DataFrame:
    """The exponent p of max alpha ~ L^p per normaliser: the slope of a least-squares line through
    (log L, log max_weight) for L >= ``min_length``.

    ``by_gap`` maps a logit gap to its :func:`max_weight_sweep` table. Returns one column per gap (``"gap 1.5"``),
    one row per normaliser; p = -1 is the Theta(1/L) of Lemma 1.
    """
    slopes = {
        f"gap {gap}": {
            name: np.polyfit(
                np.log(part["L"][part["L"] >= min_length]), np.log(part["max_weight"][part["L"] >= min_length]), 1
            )[0]
            for name, part in sweep.groupby("normalizer", sort=False)
        }
        for gap, sweep in by_gap.items()
    }
    return pd.DataFrame(slopes)


def jacobian_autograd_errors(logits: torch.Tensor, F, *, T: float) -> tuple[float, float]:
    """How far the library's exact Jacobians are from torch.autograd's on each row of ``logits`` (rows, L): the
    largest |difference| for softmax at temperature ``T`` (:func:`attnlimits.core.bounds.softmax_jacobian`) and for
    the normaliser F(l) / sum F (:func:`attnlimits.core.bounds.general_jacobian`, F' by autograd). Returns
    ``(softmax error, general error)``; float64 rounding is all they should show.
    """
    J = bounds.softmax_jacobian(logits, T=T)
    J_auto = torch.stack(
        [torch.autograd.functional.jacobian(lambda z: torch.softmax(z / T, -1), row) for row in logits]
    )
    Jg = bounds.general_jacobian(logits, F)
    Jg_auto = torch.stack([torch.autograd.functional.jacobian(lambda z: F(z) / F(z).sum(), row) for row in logits])
    return (J - J_auto).abs().max().item(), (Jg - Jg_auto).abs().max().item()


def corollary3_counterexample(temperatures) -> pd.DataFrame:
    """Two tied top logits against Corollary 3 as printed, at each temperature T: at L = 2 the logits (0, 0), and
    at L = 6 the same with four more logits 60 T below. One row per (T, case): the exact spectral norm of the
    softmax Jacobian, the sharp 1/(2T) it reaches, the printed min{1/(4T), sqrt 2} and measured / printed (about 2).
    """
    rows = []
    for T in temperatures:
        cases = [("L = 2, logits (0, 0)", [0.0, 0.0]), ("L = 6, others 60 T below", [0, 0] + [-60 * T] * 4)]
        for name, l in cases:
            l = torch.tensor(l, dtype=torch.float64)
            measured = bounds.softmax_jacobian_norm(l, T=T).item()
            printed = bounds.corollary3_printed(T=T).item()
            rows.append(
                {
                    "T": T,
                    "case": name,
                    "spectral norm": measured,
                    "1/(2T)": bounds.softmax_spectral_bound(T=T).item(),
                    "printed min{1/(4T), sqrt2}": printed,
                    "measured / printed": measured / printed,
                }
            )
    return pd.DataFrame(rows)


def jacobian_readings(rows: int = 4000, L: int = 8, *, scale: float = 3.0, seed: int = 1) -> pd.DataFrame:
    """Three readings of ||grad_l alpha||_2 for softmax at T = 1 - the spectral norm of the Jacobian, the largest
    gradient of one weight, the largest single entry - each at two tied logits (0, 0), as the maximum over ``rows``
    random rows of L logits scale * N(0, 1) (every fourth row with its first two logits tied; seeded), beside its
    sharp bound and the printed 1/(4T). Only the largest entry stays within the printed constant.
    """
    tied = torch.tensor([0.0, 0.0], dtype=torch.float64)
    gen = torch.Generator().manual_seed(seed)
    rand = scale * torch.randn(rows, L, generator=gen, dtype=torch.float64)
    rand[::4, 1] = rand[::4, 0]
    readings = pd.DataFrame(
        [
            (
                "spectral norm",
                bounds.softmax_jacobian_norm(tied).item(),
                bounds.softmax_jacobian_norm(rand).max().item(),
                float(bounds.softmax_spectral_bound(T=1.0)),
            ),
            (
                "gradient of one weight",
                bounds.softmax_weight_gradient_norm(tied).item(),
                bounds.softmax_weight_gradient_norm(rand).max().item(),
                float(bounds.softmax_weight_gradient_bound(T=1.0)),
            ),
            (
                "largest entry",
                bounds.softmax_jacobian(tied).abs().max().item(),
                bounds.softmax_jacobian(rand).abs().amax(dim=(-2, -1)).max().item(),
                float(bounds.softmax_entry_bound(T=1.0)),
            ),
        ],
        columns=["reading", "tied pair", "max over random rows", "sharp bound"],
    )
    readings["printed 1/(4T)"] = 0.25
    return readings
