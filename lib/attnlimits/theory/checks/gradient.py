"""Checks of chapter 15, gradient sensitivity: Corollary 3 as printed (refuted), its two corrections, Lemma 2.

Exact spectral norms (the secular equation of :func:`attnlimits.core.bounds.softmax_jacobian_norm`, or an SVD for
the general normaliser) on random float64 logits, plus adversarial ties and Adam ascents.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

from attnlimits.core import bounds
from attnlimits.infra.profiling import one_thread
from attnlimits.infra.verdicts import VIOLATED
from attnlimits.theory.checks.registry import Verdict, register
from attnlimits.theory.checks.search import RTOL, Adam, conclude, generator, log_uniform

__all__ = [
    "JACOBIAN_LENGTHS",
    "check_corollary3_printed",
    "check_lemma2",
    "check_softmax_entry",
    "check_softmax_spectral",
    "jacobian_norm_study",
]

#: Sequence lengths of the Jacobian checks (exact spectral norms; the L x L SVD of the general normaliser).
JACOBIAN_LENGTHS = (2, 3, 4, 6, 8, 16, 32, 64)


def _softmax_jacobian_samples(trials: int, seed: int):
    """Random softmax logits for the Corollary-3 checks, padded with -inf to a common length (masked = absent).

    float64; L from :data:`JACOBIAN_LENGTHS`; T log-uniform in [0.01, 100]; logits = T * sigma * N(0, 1) with the
    spread sigma log-uniform in [0.01, 20] (near-uniform to one-hot weights); a quarter of the rows get their two
    largest logits tied (the critical case), so concentration covers the whole simplex.
    """
    gen = generator(seed, 2)
    Lmax = max(JACOBIAN_LENGTHS)
    lengths = torch.tensor(JACOBIAN_LENGTHS)[torch.randint(len(JACOBIAN_LENGTHS), (trials,), generator=gen)]
    T = log_uniform(gen, trials, 0.01, 100.0)
    sigma = log_uniform(gen, trials, 0.01, 20.0)
    z = sigma[:, None] * torch.randn(trials, Lmax, generator=gen, dtype=torch.float64)
    tie = torch.rand(trials, generator=gen) < 0.25
    top2 = z.topk(2, dim=-1)
    z = torch.where(tie[:, None] & (z == top2.values[:, 1:2]), top2.values[:, :1], z)
    z = z.masked_fill(torch.arange(Lmax)[None, :] >= lengths[:, None], -math.inf)
    return z * T[:, None], T, lengths


def _two_tied_counterexample(T: float):
    """The counterexample to Corollary 3: two tied top logits, every other logit -inf (weights 1/2, 1/2, 0, ...)."""
    return torch.tensor([0.0, 0.0, -math.inf, -math.inf], dtype=torch.float64), T


def _rayleigh_ascent(L: int, batch: int, gen: torch.Generator, steps: int = 200):
    """Adam ascent of Var_alpha(x) / ||x||^2 over (z = l / T, x): its maximum is T ||J||_2 (J = softmax Jacobian)."""
    z = torch.randn(batch, L, generator=gen, dtype=torch.float64, requires_grad=True)
    x = torch.randn(batch, L, generator=gen, dtype=torch.float64, requires_grad=True)
    opt = Adam([z, x], lr=0.1)
    for _ in range(steps):
        alpha = torch.softmax(z, dim=-1)
        var = (alpha * x * x).sum(-1) - (alpha * x).sum(-1) ** 2
        opt.zero_grad()
        (-(var / (x * x).sum(-1)).sum()).backward()
        opt.step()
    return z.detach()


@lru_cache(maxsize=4)
def jacobian_norm_study(trials: int, seed: int):
    """Exact T ||J||_2 and T max|J_ij| on random + adversarial logits.

    Shared by the three Corollary-3 checks and :func:`attnlimits.theory.sweeps.jacobian_sample`.
    """
    z, T, lengths = _softmax_jacobian_samples(trials, seed)
    norm = bounds.softmax_jacobian_norm(z, T=T)
    alpha = bounds.softmax_weights(z, T=T)
    top2 = alpha.topk(2, dim=-1).values
    entry = torch.maximum((alpha * (1 - alpha)).amax(-1), top2[:, 0] * top2[:, 1]) / T
    gen = generator(seed, 3)
    Lmax = max(JACOBIAN_LENGTHS)
    with one_thread():
        ascents = [_rayleigh_ascent(L, 16, gen) for L in (2, 3, 8, 32)]
    adv_z = torch.cat([torch.nn.functional.pad(z, (0, Lmax - z.shape[-1]), value=-math.inf) for z in ascents])
    T_grid = torch.tensor([0.01, 0.1, 0.25, 1.0, 4.0, 100.0], dtype=torch.float64)
    adv_T = T_grid.repeat_interleave(len(adv_z) // len(T_grid) + 1)[: len(adv_z)]
    adv_norm = bounds.softmax_jacobian_norm(adv_z * adv_T[:, None], T=adv_T)
    tied = torch.tensor([[0.0, 0.0, -math.inf, -math.inf]], dtype=torch.float64) * T_grid[:, None]
    tied_norm = bounds.softmax_jacobian_norm(tied, T=T_grid)
    half = torch.zeros(len(T_grid), 8, dtype=torch.float64)
    half[:, 0] = math.log(7.0)  # alpha_1 = 7 / 14 = 1/2: the largest entry alpha_1 (1 - alpha_1) = 1/4
    half_alpha = torch.softmax(half, dim=-1)
    half_entry = (half_alpha * (1 - half_alpha)).amax(-1) / T_grid
    return {
        "T": T,
        "norm": norm,
        "entry": entry,
        "max_alpha": alpha.amax(-1),
        "lengths": lengths,
        "adv_T": torch.cat([adv_T, T_grid]),
        "adv_norm": torch.cat([adv_norm, tied_norm]),
        "adv_entry_T": T_grid,
        "adv_entry": half_entry,
        "T_grid": T_grid,
        "tied_norm": tied_norm,
    }


_JACOBIAN_RANGES = (
    "L in {2,...,64}, T 0.01..100 (log-uniform), logit spread / T 0.01..20 (log-uniform), "
    "25% rows with tied top two; adversarial: Adam ascent of the Rayleigh quotient, "
    "two tied top logits, alpha_1 = 1/2"
)


def _ratio_summary(measured: torch.Tensor, bound: torch.Tensor):
    ratio = measured / bound
    i = int(ratio.argmax())
    return int((ratio > 1 + RTOL).sum()), ratio[i].item(), i


@register("cor3-printed", "Corollary 3 (as printed)")
def check_corollary3_printed(trials: int = 2000, seed: int = 0) -> Verdict:
    """Corollary 3 as printed: ||grad_l alpha||_2 <= min{1/(4T), sqrt(2)} for softmax with temperature T.

    The book claims this is violated: two tied top logits with all other weights 0 give exactly 1/(2T).
    Same trials as the corrected bounds (see :func:`_softmax_jacobian_samples`).
    """
    s = jacobian_norm_study(trials, seed)
    v1, w1, _ = _ratio_summary(s["norm"], bounds.corollary3_printed(T=s["T"]))
    v2, w2, i = _ratio_summary(s["adv_norm"], bounds.corollary3_printed(T=s["adv_T"]))
    T_c = 1.0
    logits, _ = _two_tied_counterexample(T_c)
    measured = bounds.softmax_jacobian_norm(logits, T=T_c).item()
    printed = bounds.corollary3_printed(T=T_c).item()
    violations = v1 + v2 + int(measured > printed * (1 + RTOL))
    worst = max(w1, w2, measured / printed)
    return conclude(
        "Corollary 3 (as printed)",
        r"softmax: $\lVert \partial\alpha / \partial l \rVert_2 \le \min\{1/(4T), \sqrt 2\}$",
        trials=len(s["norm"]) + len(s["adv_norm"]) + 1,
        violations=violations,
        worst=worst,
        expected=VIOLATED,
        violated=f"violated: two tied top logits, others -inf give ||J||_2 = 1/(2T) = {measured:.4g} > "
        f"{printed:.4g} at T = 1 (worst ratio {worst:.3g} at T = {s['adv_T'][i].item():g})",
        details={
            "random_violations": v1,
            "worst_ratio_random": w1,
            "adversarial_violations": v2,
            "counterexample": {"logits": logits.tolist(), "T": T_c, "spectral_norm": measured, "printed": printed},
            "ranges": _JACOBIAN_RANGES,
        },
    )


def _sharp_softmax_check(name: str, statement: str, measured: str, bound_fn, T_key: str, trials: int, seed: int):
    """Shared body of the two corrected Corollary-3 checks: the cached Jacobian study against ``bound_fn(T)``."""
    s = jacobian_norm_study(trials, seed)
    v1, w1, _ = _ratio_summary(s[measured], bound_fn(T=s["T"]))
    v2, w2, _ = _ratio_summary(s[f"adv_{measured}"], bound_fn(T=s[T_key]))
    worst = max(w1, w2)
    return conclude(
        name,
        statement,
        trials=len(s[measured]) + len(s[f"adv_{measured}"]),
        violations=v1 + v2,
        worst=worst,
        details={"worst_ratio_random": w1, "worst_ratio_adversarial": w2, "ranges": _JACOBIAN_RANGES},
    )


@register("cor3-spectral", "Corollary 3 corrected: spectral 1/(2T)")
def check_softmax_spectral(trials: int = 2000, seed: int = 0) -> Verdict:
    """The book's correction: ||diag(alpha) - alpha alpha^T||_2 / T <= 1/(2T), sharp (two tied top logits)."""
    return _sharp_softmax_check(
        "Corollary 3 corrected: spectral 1/(2T)",
        r"softmax: $\lVert \partial\alpha / \partial l \rVert_2 \le 1/(2T)$",
        "norm",
        bounds.softmax_spectral_bound,
        "adv_T",
        trials,
        seed,
    )


@register("cor3-entry", "Corollary 3 corrected: entry 1/(4T)")
def check_softmax_entry(trials: int = 2000, seed: int = 0) -> Verdict:
    """What 1/(4T) does bound: every entry |d alpha_i / d l_j| <= 1/(4T), sharp at alpha_i = 1/2."""
    return _sharp_softmax_check(
        "Corollary 3 corrected: entry 1/(4T)",
        r"softmax: $\max_{ij} \lvert \partial\alpha_i / \partial l_j \rvert \le 1/(4T)$",
        "entry",
        bounds.softmax_entry_bound,
        "adv_entry_T",
        trials,
        seed,
    )


def _lemma2_families():
    """(name, F(l, p), F'(l, p)): F > 0 everywhere, p > 0 a shape parameter; exp(l / T) is the sharp case."""
    sp, sig = torch.nn.functional.softplus, torch.sigmoid
    return {
        "exp(l/T)": (lambda x, p: torch.exp(x / p), lambda x, p: torch.exp(x / p) / p),
        "softplus(p l)": (lambda x, p: sp(p * x), lambda x, p: p * sig(p * x)),
        "sigmoid(p l)": (lambda x, p: sig(p * x), lambda x, p: p * sig(p * x) * (1 - sig(p * x))),
        "1 + p l^2": (lambda x, p: 1 + p * x * x, lambda x, p: 2 * p * x),
        "1.5 + cos(p l)": (lambda x, p: 1.5 + torch.cos(p * x), lambda x, p: -p * torch.sin(p * x)),
    }


def _lemma2_ascent(F, dF, gen: torch.Generator, batch: int = 16, L: int = 4, steps: int = 150):
    """Adam ascent of u^T J w / (||u|| ||w|| bound) over (l, u, w): its supremum is ||J||_2 / bound."""
    p = log_uniform(gen, batch, 0.1, 10.0)[:, None]
    x = torch.randn(batch, L, generator=gen, dtype=torch.float64).requires_grad_(True)
    u = torch.randn(batch, L, generator=gen, dtype=torch.float64).requires_grad_(True)
    w = torch.randn(batch, L, generator=gen, dtype=torch.float64).requires_grad_(True)
    opt = Adam([x, u, w], lr=0.05)
    for _ in range(steps):
        f, fp = F(x, p), dF(x, p)
        S = f.sum(-1, keepdim=True)
        J = torch.diag_embed(fp / S) - (f / S)[..., :, None] * (fp / S)[..., None, :]
        alpha, h = f / S, fp / f
        bound = torch.minimum(h.abs().amax(-1) / 2, torch.sqrt((alpha * (1 - alpha) * h * h).sum(-1) / 2))
        quot = torch.einsum("bi,bij,bj->b", u, J, w) / (u.norm(dim=-1) * w.norm(dim=-1) * bound)
        opt.zero_grad()
        (-quot.sum()).backward()
        opt.step()
    return p, x.detach()


@register("lem2", "Lemma 2 (general Jacobian)")
def check_lemma2(trials: int = 2000, seed: int = 0) -> Verdict:
    """The book's Lemma 2: ||d alpha / d l||_2 <= min{max|h|/2, sqrt(sum alpha (1-alpha) h^2 / 2)}, h = F'/F.

    Random trials (float64): five families of F (exp(l/T), softplus, sigmoid, 1 + p l^2, 1.5 + cos(p l)), p (or T)
    log-uniform in [0.05, 20], L in {2,...,32}, logits = spread * N(0, 1) with spread log-uniform in [0.01, 20];
    exact spectral norms by SVD. Adversarial: two tied top logits with the rest far below for exp(l/T) (the sharp
    case), and Adam ascent of u^T J w / (||u|| ||w|| bound) over (l, u, w) for every family at L = 4.
    """
    gen = generator(seed, 4)
    families = list(_lemma2_families().items())
    lengths = [L for L in JACOBIAN_LENGTHS if L <= 32]
    worst, violations, n_random, worst_case = 0.0, 0, 0, None
    for g, (name, (F, dF)) in enumerate(families):
        for j, L in enumerate(lengths):
            cells = len(families) * len(lengths)
            n = trials // cells + (g * len(lengths) + j < trials % cells)
            if n == 0:
                continue
            p = log_uniform(gen, n, 0.05, 20.0)[:, None]
            x = log_uniform(gen, n, 0.01, 20.0)[:, None] * torch.randn(n, L, generator=gen, dtype=torch.float64)
            J = bounds.general_jacobian(x, lambda t, p=p, F=F: F(t, p), dF=lambda t, p=p, dF=dF: dF(t, p))
            bound = bounds.general_jacobian_bound(x, lambda t, p=p, F=F: F(t, p), dF=lambda t, p=p, dF=dF: dF(t, p))
            ratio = torch.linalg.matrix_norm(J, ord=2) / bound
            violations += int((ratio > 1 + RTOL).sum())
            n_random += n
            if ratio.max().item() > worst:
                worst, worst_case = ratio.max().item(), {"F": name, "L": L}
    worst_random = worst
    n_adv = 0
    # The sharp case: exp(l / T), two tied top logits, the others 60 T below (weights ~ e^-60).
    for T in (0.01, 1.0, 100.0):
        x = torch.tensor([[0.0, 0.0] + [-60.0 * T] * 6], dtype=torch.float64)
        F = lambda t, T=T: torch.exp(t / T)  # noqa: E731
        J = bounds.general_jacobian(x, F)
        r = (torch.linalg.matrix_norm(J, ord=2) / bounds.general_jacobian_bound(x, F)).item()
        violations += int(r > 1 + RTOL)
        n_adv += 1
        if r > worst:
            worst, worst_case = r, {"F": "exp(l/T)", "construction": "two tied top logits", "T": T}
    with one_thread():
        ascents = [(name, F, dF, *_lemma2_ascent(F, dF, gen)) for name, (F, dF) in families]
    for name, F, dF, p, xd in ascents:
        B = len(xd)
        Fp, dFp = (lambda t, p=p, F=F: F(t, p)), (lambda t, p=p, dF=dF: dF(t, p))
        r = torch.linalg.matrix_norm(bounds.general_jacobian(xd, Fp, dF=dFp), ord=2) / bounds.general_jacobian_bound(
            xd, Fp, dF=dFp
        )
        violations += int((r > 1 + RTOL).sum())
        n_adv += B
        if r.max().item() > worst:
            worst, worst_case = r.max().item(), {"F": name, "ascent": True}
    return conclude(
        "Lemma 2 (general Jacobian)",
        r"$\alpha = F(l)/\sum F$: $\lVert \partial\alpha / \partial l \rVert_2 \le "
        r"\min\{\max_j \lvert h_j \rvert / 2, \sqrt{\sum_j \alpha_j (1 - \alpha_j) h_j^2 / 2}\}$, $h = F'/F$",
        trials=n_random + n_adv,
        violations=violations,
        worst=worst,
        details={
            "random_trials": n_random,
            "adversarial_trials": n_adv,
            "worst_ratio_random": worst_random,
            "worst_case": worst_case,
            "families": [name for name, _ in families],
            "ranges": "L 2..32, p or T 0.05..20, logit spread 0.01..20; adversarial: ties and Adam ascent at L = 4",
        },
    )
