"""Checks of chapter 12, vanishing attention: Corollary 1 (softmax band) and Lemma 1 (general normaliser band).

Every check: float64 random trials over a documented range + an adversarial search (targeted constructions and
Adam ascent on measured / bound) + the worst measured / bound ratio.
"""

from __future__ import annotations

import math

import torch

from attnlimits.core import bounds
from attnlimits.infra.profiling import one_thread
from attnlimits.theory.checks.registry import Verdict, register
from attnlimits.theory.checks.search import RTOL, Adam, conclude, generator, log_uniform, split

__all__ = ["VANISHING_DIMS", "VANISHING_LENGTHS", "check_corollary1", "check_lemma1"]

#: Sequence lengths of the vanishing-attention checks: a log grid from 2 to 10^5.
VANISHING_LENGTHS = tuple(sorted({round(10**e) for e in torch.linspace(math.log10(2), 5, 16).tolist()}))
#: Key dimensions d, cycled over the length grid.
VANISHING_DIMS = (1, 2, 3, 4, 8, 16, 32, 64)


def _vanishing_groups(trials: int, gen: torch.Generator) -> list[tuple[int, int, int]]:
    """(L, d, number of trials) per group: trials are dealt round-robin over a seeded shuffle of the length grid."""
    order = torch.randperm(len(VANISHING_LENGTHS), generator=gen).tolist()
    counts = [0] * len(order)
    for rank, n in enumerate(split(trials, len(order))):
        counts[order[rank]] = n
    return [
        (L, VANISHING_DIMS[i % len(VANISHING_DIMS)], n)
        for i, (L, n) in enumerate(zip(VANISHING_LENGTHS, counts, strict=True))
        if n
    ]


def _chunks(n: int, L: int, budget: int = 1_000_000):
    step = max(1, budget // L)
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


def _corollary1_ascent(L: int, gen: torch.Generator, batch: int = 32, steps: int = 150, rho_max: float = 2.0):
    """Adam ascent over (q, k), ||q|| < rho_max, ||k_i|| < 1, T = 1: half the batch maximises log(alpha_1 / upper),
    half log(lower / alpha_1). Returns (L, q, k) at the end of the ascent."""
    d = 3
    q = torch.randn(batch, d, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(batch, L, d, generator=gen, dtype=torch.float64, requires_grad=True)
    up = torch.arange(batch) % 2 == 0

    def params():
        k = w / (1 + torch.linalg.vector_norm(w, dim=-1, keepdim=True))
        return rho_max * q / (1 + torch.linalg.vector_norm(q, dim=-1, keepdim=True)), k

    opt = Adam([q, w], lr=0.05)
    for _ in range(steps):
        qn, k = params()
        log_alpha = torch.log_softmax(torch.einsum("bd,bld->bl", qn, k), dim=-1)[:, 0]
        two_delta = 2 * torch.linalg.vector_norm(qn, dim=-1) * torch.linalg.vector_norm(k, dim=-1).amax(-1)
        log_ratio = torch.where(up, log_alpha + math.log(L) - two_delta, -two_delta - math.log(L) - log_alpha)
        opt.zero_grad()
        (-log_ratio.sum()).backward()
        opt.step()
    with torch.no_grad():
        qn, k = params()
    return L, qn, k


@register("cor1", "Corollary 1")
def check_corollary1(trials: int = 2000, seed: int = 0) -> Verdict:
    """Corollary 1: every softmax weight lies in (1/L) exp(-+2 Delta / T), Delta = ||q|| max ||k_i||.

    Random trials (float64): L on a log grid 2..10^5, d in 1..64, keys with directions uniform on the sphere and
    norms uniform in [0, 1] (or all 1: every other group), a random query direction, T log-uniform in [0.1, 10]
    and ||q|| set so that Delta / T is log-uniform in [1e-3, 8] (from near-uniform to very concentrated weights).
    Adversarial: the extremal keys (one parallel, all others antiparallel to q, all of norm max ||k||) over the
    length grid and Delta / T in {1e-4, 0.1, 1, 4}, plus Adam ascent of log(alpha_1 / upper) and
    log(lower / alpha_1) over q, k for L <= 16.
    """
    gen = generator(seed, 0)
    worst, violations, n_random, per_length = 0.0, 0, 0, {}
    worst_case = None
    for g, (L, d, n) in enumerate(_vanishing_groups(trials, gen)):
        k = torch.randn(L, d, generator=gen, dtype=torch.float64)
        k = k / torch.linalg.vector_norm(k, dim=-1, keepdim=True)
        if g % 2:
            k = k * torch.rand(L, 1, generator=gen, dtype=torch.float64)
        q_dir = torch.randn(n, d, generator=gen, dtype=torch.float64)
        q_dir = q_dir / torch.linalg.vector_norm(q_dir, dim=-1, keepdim=True)
        T = log_uniform(gen, n, 0.1, 10.0)
        rho = log_uniform(gen, n, 1e-3, 8.0)
        k_max = torch.linalg.vector_norm(k, dim=-1).max()
        q = q_dir * (rho * T / k_max)[:, None]
        delta = bounds.corollary1_delta(q, k)
        lower, upper = bounds.corollary1_band(L, delta, T=T)
        group_worst = 0.0
        for sl in _chunks(n, L):
            z = (q[sl] @ k.T) / T[sl, None]
            # the largest and smallest softmax weights, exp(z_max - lse) and exp(z_min - lse), in one pass
            lse = torch.logsumexp(z, dim=-1)
            a_max, a_min = torch.exp(z.amax(-1) - lse), torch.exp(z.amin(-1) - lse)
            ratio = torch.maximum(a_max / upper[sl], lower[sl] / a_min)
            violations += int((ratio > 1 + RTOL).sum())
            i = int(ratio.argmax())
            if ratio[i].item() > worst:
                worst = ratio[i].item()
                worst_case = {"L": L, "d": d, "T": T[sl][i].item(), "delta_over_T": rho[sl][i].item()}
            group_worst = max(group_worst, ratio.max().item())
        per_length[L] = group_worst
        n_random += n
    worst_random = worst

    # Targeted construction: alpha_1 = 1 / (1 + (L-1) e^{-2 rho}) (largest), the others the smallest possible.
    construction = {}
    for rho in (1e-4, 0.1, 1.0, 4.0):
        T = 1.0
        ratios = []
        for L in VANISHING_LENGTHS:
            logits = torch.full((L,), -rho * T, dtype=torch.float64)
            logits[0] = rho * T
            alpha = torch.softmax(logits / T, dim=-1)
            lower, upper = bounds.corollary1_band(L, rho * T, T=T)
            r = max((alpha.max() / upper).item(), (lower / alpha.min()).item())
            violations += int(r > 1 + RTOL)
            ratios.append(r)
        construction[rho] = ratios
        if max(ratios) > worst:
            worst = max(ratios)
            worst_case = {
                "construction": "one key parallel, L-1 antiparallel",
                "delta_over_T": rho,
                "L": VANISHING_LENGTHS[ratios.index(max(ratios))],
            }

    # Adam ascent over (q, k) for small L: can the band be beaten anywhere?
    n_ascent = 0
    with one_thread():
        ascents = [_corollary1_ascent(L, gen) for L in (2, 3, 8, 16)]
    for L, qn, k in ascents:
        B = len(qn)
        with torch.no_grad():
            alpha = torch.softmax(torch.einsum("bd,bld->bl", qn, k), dim=-1)
            lower, upper = bounds.corollary1_band(L, bounds.corollary1_delta(qn, k), T=1.0)
            r = torch.maximum(alpha.amax(-1) / upper, lower / alpha.amin(-1))
        violations += int((r > 1 + RTOL).sum())
        n_ascent += B
        if r.max().item() > worst:
            worst, worst_case = r.max().item(), {"ascent": True, "L": L}
    n_construction = len(construction) * len(VANISHING_LENGTHS)
    return conclude(
        "Corollary 1",
        r"softmax: $\frac1L e^{-2\Delta/T} \le \alpha_i \le \frac1L e^{2\Delta/T}$, "
        r"$\Delta = \lVert q \rVert \max_i \lVert k_i \rVert$",
        trials=n_random + n_construction + n_ascent,
        violations=violations,
        worst=worst,
        held=f"holds; approached only as L -> inf or Delta -> 0 (worst measured/bound {worst:.9f} at "
        f"L = {worst_case.get('L')}); at finite L the sharp band 1/(1 + (L-1) e^(+-2 Delta/T)) is attained",
        details={
            "random_trials": n_random,
            "construction_trials": n_construction,
            "ascent_trials": n_ascent,
            "worst_ratio_random": worst_random,
            "worst_case": worst_case,
            "lengths": list(VANISHING_LENGTHS),
            "worst_ratio_random_by_L": per_length,
            "construction_ratio_by_rho": construction,
            "ranges": "L 2..1e5 (log grid), d 1..64, T 0.1..10, Delta/T 1e-3..8, ||k|| in [0, 1]",
        },
    )


def _lemma1_families():
    """Positive F on [-a, a] with exact extremes: name, F(l, p), (argmin, argmax) as functions of (a, p)."""
    sp = torch.nn.functional.softplus
    return {
        "exp(p l)": (lambda x, p: torch.exp(p * x), lambda a, p: (-a, a)),
        "softplus(p l)": (lambda x, p: sp(p * x), lambda a, p: (-a, a)),
        "sigmoid(p l)": (lambda x, p: torch.sigmoid(p * x), lambda a, p: (-a, a)),
        "1 + p l^2": (lambda x, p: 1 + p * x * x, lambda a, p: (torch.zeros_like(a), a)),
        "1.5 + cos(p l)": (
            lambda x, p: 1.5 + torch.cos(p * x),
            lambda a, p: (torch.where(p * a >= math.pi, math.pi / p, a), torch.zeros_like(a)),
        ),
    }


@register("lem1", "Lemma 1")
def check_lemma1(trials: int = 2000, seed: int = 0) -> Verdict:
    """Lemma 1: for logits in [-a, a] and a positive F independent of L, C1/L <= alpha_i <= C2/L with
    C1 = min F / max F and C2 = max F / min F on [-a, a].

    Random trials (float64): five families of F (exp, softplus, sigmoid, 1 + p l^2, 1.5 + cos(p l)) with p
    log-uniform in [0.1, 5], a log-uniform in [0.1, 5], L on the log grid 2..10^5, logits uniform in [-a, a].
    Adversarial: the extremal logits (one at argmax F, the rest at argmin F, and the reverse) for every family,
    length and a in {0.1, 1, 5}: they attain the sharp band of :func:`attnlimits.core.bounds.lemma1_band_sharp`.
    """
    gen = generator(seed, 1)
    families = list(_lemma1_families().items())
    worst, violations, n_random, worst_case = 0.0, 0, 0, None
    for g, (L, _d, n) in enumerate(_vanishing_groups(trials, gen)):
        name, (F, extremes) = families[g % len(families)]
        a = log_uniform(gen, n, 0.1, 5.0)
        p = log_uniform(gen, n, 0.1, 5.0)
        x_min, x_max = extremes(a, p)
        lower, upper = bounds.lemma1_band(L, F(x_min, p), F(x_max, p))
        for sl in _chunks(n, L):
            logits = a[sl, None] * (2 * torch.rand(sl.stop - sl.start, L, generator=gen, dtype=torch.float64) - 1)
            f = F(logits, p[sl, None])
            alpha = f / f.sum(-1, keepdim=True)
            ratio = torch.maximum(alpha.amax(-1) / upper[sl], lower[sl] / alpha.amin(-1))
            violations += int((ratio > 1 + RTOL).sum())
            if ratio.max().item() > worst:
                worst, worst_case = ratio.max().item(), {"F": name, "L": L}
        n_random += n
    worst_random = worst
    n_construction = 0
    for name, (F, extremes) in families:
        for a_val in (0.1, 1.0, 5.0):
            a, p = torch.tensor([a_val], dtype=torch.float64), torch.tensor([2.0], dtype=torch.float64)
            x_min, x_max = extremes(a, p)
            f_min, f_max = F(x_min, p), F(x_max, p)
            for L in VANISHING_LENGTHS:
                lower, upper = bounds.lemma1_band(L, f_min, f_max)
                for top, rest in ((x_max, x_min), (x_min, x_max)):
                    logits = torch.cat([top, rest.expand(L - 1)])
                    f = F(logits, p)
                    alpha = f / f.sum()
                    r = max((alpha.max() / upper).item(), (lower / alpha.min()).item())
                    violations += int(r > 1 + RTOL)
                    n_construction += 1
                    if r > worst:
                        worst, worst_case = r, {"F": name, "L": L, "a": a_val, "construction": True}
    return conclude(
        "Lemma 1",
        r"logits in $[-a, a]$, $F > 0$ independent of $L$: $\frac{\min F / \max F}{L} \le \alpha_i \le "
        r"\frac{\max F / \min F}{L}$",
        trials=n_random + n_construction,
        violations=violations,
        worst=worst,
        held=f"holds; approached only as L -> inf (worst measured/bound {worst:.9f} at L = "
        f"{worst_case.get('L')}); at finite L the sharp band f_min/(f_min + (L-1) f_max) ... is attained",
        details={
            "random_trials": n_random,
            "construction_trials": n_construction,
            "worst_ratio_random": worst_random,
            "worst_case": worst_case,
            "families": [name for name, _ in families],
            "ranges": "L 2..1e5 (log grid), a 0.1..5, p 0.1..5, logits uniform in [-a, a]",
        },
    )
