"""Checks of chapter 13, distance collapse: Theorem 1's d_max (as reconstructed and sharp) and the Jensen residual.

Random float64 trials over the documented grids below + targeted constructions + an Adam ascent for d_max.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from attnlimits.checks.registry import Verdict, register
from attnlimits.checks.search import RTOL, WIDE, Adam, generator, split, tightness_text
from attnlimits.profiling import one_thread

__all__ = [
    "DISTANCE_GRID",
    "RESIDUAL_LENGTHS",
    "check_jensen_residual_bound",
    "check_jensen_residual_sign",
    "check_theorem1_dmax",
    "check_theorem1_dmax_sharp",
]

#: (L, N, d) groups of the Theorem 1 random trials; weights softmax(beta g), beta ~ U[0, 8], Gaussian tokens with
#: log-normal norms.
DISTANCE_GRID = ((2, 1, 1), (4, 1, 2), (8, 2, 3), (16, 4, 8), (32, 5, 16), (64, 5, 4), (128, 16, 32), (256, 5, 8))
#: Sequence lengths of the exact (enumeration) Jensen-residual trials; N runs over 1..L-1.
RESIDUAL_LENGTHS = (3, 4, 5, 6, 7, 8, 9, 10)


def _ratio_max(measured: torch.Tensor, bound: torch.Tensor) -> float:
    """Largest measured/bound over the entries where the bound is positive (0 when there are none)."""
    ok = bound > 0
    return float((measured[ok] / bound[ok]).max()) if ok.any() else 0.0


def _theorem1_constructions() -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """Selected tokens all equal to u, the others on the ray -c u: the sharp bound is attained exactly."""
    from attnlimits import synthetic

    out = []
    u = torch.tensor([0.6, -0.8, 0.0], dtype=torch.float64)
    for L, N in ((2, 1), (5, 2), (16, 3), (64, 8)):
        for abar in (N / L, 0.5 * (1 + N / L), 0.99, 1.0):
            alpha = synthetic.two_level_weights(L, N, eta=1 - abar)
            for c in (0.0, 0.5, 2.0):
                x = torch.cat([u.expand(N, 3), (-c * u).expand(L - N, 3)])
                out.append((alpha, x, N))
    return out


def _theorem1_ascent(gen: torch.Generator, batch: int = 16, L: int = 8, N: int = 2, d: int = 3, steps: int = 40):
    """Adam ascent on d~ / d_max_sharp over logits and tokens; returns the final (alpha, x)."""
    from attnlimits import bounds, selection

    logits = (2 * torch.randn(batch, L, generator=gen, dtype=torch.float64)).requires_grad_()
    x = torch.randn(batch, L, d, generator=gen, dtype=torch.float64).requires_grad_()
    opt = Adam([logits, x], lr=0.1)
    for _ in range(steps):
        alpha = torch.softmax(logits, dim=-1)
        ratio = selection.cumulative_distance(alpha, x, N) / bounds.theorem1_dmax_sharp(alpha, x, N)
        opt.zero_grad()
        (-ratio.sum()).backward()
        opt.step()
    return torch.softmax(logits.detach(), dim=-1), x.detach()


@lru_cache(maxsize=4)
def _theorem1_study(trials: int, seed: int) -> dict:
    """d~, the reconstructed and the sharp d_max on random trials, constructions and an ascent."""
    from attnlimits import bounds, selection

    gen = generator(seed, 13, stride=WIDE)
    parts = {"random": [], "adversarial": []}
    for (L, N, d), count in zip(DISTANCE_GRID, split(trials, len(DISTANCE_GRID)), strict=True):
        if count == 0:
            continue
        beta = 8 * torch.rand(count, 1, generator=gen, dtype=torch.float64)
        alpha = torch.softmax(beta * torch.randn(count, L, generator=gen, dtype=torch.float64), dim=-1)
        x = torch.randn(count, L, d, generator=gen, dtype=torch.float64)
        x = x * torch.exp(torch.randn(count, L, 1, generator=gen, dtype=torch.float64))
        parts["random"].append((alpha, x, N))
    parts["adversarial"] = _theorem1_constructions()
    with one_thread():
        parts["adversarial"].append((*_theorem1_ascent(gen), 2))
    out = {}
    for kind, items in parts.items():
        dt, rec, sharp = [], [], []
        for alpha, x, N in items:
            dt.append(selection.cumulative_distance(alpha, x, N).reshape(-1))
            rec.append(bounds.theorem1_dmax(alpha, x, N).reshape(-1))
            sharp.append(bounds.theorem1_dmax_sharp(alpha, x, N).reshape(-1))
        out[kind] = tuple(torch.cat(v) for v in (dt, rec, sharp))
    return out


def _theorem1_verdict(trials: int, seed: int, which: int, bound: str, statement: str) -> Verdict:
    study = _theorem1_study(int(trials), int(seed))
    dt = torch.cat([study["random"][0], study["adversarial"][0]])
    b = torch.cat([study["random"][which], study["adversarial"][which]])
    violations = int((dt > b * (1 + RTOL) + 1e-12).sum())
    worst = _ratio_max(dt, b)
    rnd = study["random"]
    ok = rnd[which] > 0
    return Verdict(
        bound=bound,
        statement=statement,
        trials=len(dt),
        violations=violations,
        worst_ratio=worst,
        verdict=tightness_text(worst) if violations == 0 else f"violated ({violations} trials)",
        expected="holds",
        details={
            "random_trials": len(rnd[0]),
            "adversarial_trials": len(study["adversarial"][0]),
            "worst_ratio_random": _ratio_max(rnd[0], rnd[which]),
            "median_ratio_random": float((rnd[0][ok] / rnd[which][ok]).median()),
            "ranges": "(L, N, d) in " + str(DISTANCE_GRID) + "; alpha = softmax(beta g), beta ~ U[0, 8]; "
            "adversarial: x_I = u, x_out = -c u constructions and Adam ascent on d~/d_max_sharp (L = 8, N = 2)",
        },
    )


@register("thm1-dmax-reconstructed", "Theorem 1 d_max (as reconstructed)")
def check_theorem1_dmax(trials: int = 2000, seed: int = 0) -> Verdict:
    """Theorem 1 with fixed I_N, in the book's reconstructed form."""
    return _theorem1_verdict(
        trials,
        seed,
        1,
        "Theorem 1 d_max (as reconstructed)",
        "d~ <= (1 - abar_N) d1 + [(1 - abar_N) + (L - N) abar_N] max_{j in I_N} ||x_j||",
    )


@register("thm1-dmax-sharp", "Theorem 1 d_max sharp (book)")
def check_theorem1_dmax_sharp(trials: int = 2000, seed: int = 0) -> Verdict:
    """The book's sharp Theorem 1 (smaller by 2 (1 - abar_N) max ||x_j||)."""
    return _theorem1_verdict(
        trials,
        seed,
        2,
        "Theorem 1 d_max sharp (book)",
        "d~ <= (1 - abar_N) d1 + [(L - N) abar_N - (1 - abar_N)] max_{j in I_N} ||x_j||",
    )


@lru_cache(maxsize=4)
def _residual_study(trials: int, seed: int) -> dict:
    """Exact E (enumeration), main term and the residual bound on random trials and constructions."""
    from attnlimits import bounds, selection

    gen = generator(seed, 17, stride=WIDE)
    groups = [(L, N) for L in RESIDUAL_LENGTHS for N in range(1, L)]
    E, main, rb = [], [], []
    for g, ((L, N), count) in enumerate(zip(groups, split(trials, len(groups)), strict=True)):
        if count == 0:
            continue
        beta = 8 * torch.rand(count, 1, generator=gen, dtype=torch.float64)
        alpha = torch.softmax(beta * torch.randn(count, L, generator=gen, dtype=torch.float64), dim=-1)
        x = torch.randn(count, L, (1, 2, 3, 5)[g % 4], generator=gen, dtype=torch.float64)
        E.append(selection.random_selection_exact(alpha, x, N))
        main.append(selection.random_selection_expectation(alpha, x, N))
        rb.append(bounds.jensen_residual_bound(alpha, x, N))
    n_random = sum(len(e) for e in E)
    for L in (3, 6, 10):  # equal scaled tokens y_i = alpha_i x_i = u: s is the same for every subset, eps = 0
        alpha = torch.softmax(torch.randn(4, L, generator=gen, dtype=torch.float64), dim=-1)
        x = torch.ones(4, L, 2, dtype=torch.float64) / alpha.unsqueeze(-1)
        for N in (1, L // 2):
            E.append(selection.random_selection_exact(alpha, x, N))
            main.append(selection.random_selection_expectation(alpha, x, N))
            rb.append(bounds.jensen_residual_bound(alpha, x, N))
    E, main, rb = torch.cat(E), torch.cat(main), torch.cat(rb)
    return {"E": E, "main": main, "bound": rb, "n_random": n_random}


@register("thm1-residual-sign", "Theorem 1 residual eps >= 0")
def check_jensen_residual_sign(trials: int = 2000, seed: int = 0) -> Verdict:
    """Random I_N: the exact expectation is never below the closed-form main term (Jensen)."""
    st = _residual_study(int(trials), int(seed))
    E, main = st["E"], st["main"]
    violations = int((E < main - 1e-10 * (1 + main.abs())).sum())
    worst = _ratio_max(main, E)
    eps = E - main
    return Verdict(
        bound="Theorem 1 residual eps >= 0",
        statement="E_{I_N uniform}[d~] = ((L-N)/L) sum_i ||a_i x_i - (N/(L-1)) sum_{j!=i} a_j x_j|| + eps, eps >= 0",
        trials=len(E),
        violations=violations,
        worst_ratio=worst,
        verdict=(
            tightness_text(worst) + "; eps = 0 iff each a_i x_i - s stays on one ray over the subsets without i "
            "(e.g. when every subset gives the same s)"
        )
        if violations == 0
        else f"violated ({violations} trials)",
        expected="holds",
        details={
            "random_trials": st["n_random"],
            "min_eps": float(eps.min()),
            "median_eps_over_main": float((eps / main.clamp_min(1e-300)).median()),
            "ranges": f"exact enumeration, L in {RESIDUAL_LENGTHS}, N in 1..L-1, d in 1..5, beta ~ U[0, 8]",
        },
    )


@register("thm1-residual-bound", "Theorem 1 residual bound (book)")
def check_jensen_residual_bound(trials: int = 2000, seed: int = 0) -> Verdict:
    """eps <= ((L-N)/L) sum_i sqrt(tr Cov(s | i not in I_N)), the book's upper bound on the Jensen residual."""
    st = _residual_study(int(trials), int(seed))
    eps = st["E"] - st["main"]
    violations = int((eps > st["bound"] * (1 + 1e-9) + 1e-12).sum())
    worst = _ratio_max(eps, st["bound"])
    return Verdict(
        bound="Theorem 1 residual bound (book)",
        statement="eps <= ((L-N)/L) sum_i sqrt(N (L-1-N)/(L-2) sigma_i^2), sigma_i^2 = variance of {a_j x_j}_{j!=i}",
        trials=len(eps),
        violations=violations,
        worst_ratio=worst,
        verdict=tightness_text(worst) if violations == 0 else f"violated ({violations} trials)",
        expected="holds",
        details={
            "random_trials": st["n_random"],
            "ranges": f"exact enumeration, L in {RESIDUAL_LENGTHS}, N in 1..L-1, d in 1..5, beta ~ U[0, 8]",
        },
    )
