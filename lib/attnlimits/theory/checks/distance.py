"""Checks of chapter 13, distance collapse: Theorem 1's d_max (as reconstructed and sharp), the Jensen residual,
and Corollary 2 (i) for the expected distance (linear growth as printed, refuted; the book's bound in its place).

Random float64 trials over the documented grids below + targeted constructions + an Adam ascent for d_max.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from attnlimits.core import bounds, selection, validation
from attnlimits.infra.profiling import one_thread
from attnlimits.infra.verdicts import VIOLATED
from attnlimits.theory import synthetic
from attnlimits.theory.checks.registry import Verdict, register
from attnlimits.theory.checks.search import RTOL, WIDE, Adam, conclude, generator, split, tightness_text

__all__ = [
    "DISTANCE_GRID",
    "EXPECTATION_LENGTHS",
    "LINEAR_LENGTHS",
    "RESIDUAL_LENGTHS",
    "check_expectation_bounded",
    "check_expectation_linear",
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
#: Row lengths l of the exact (enumeration) trials of the bound on E_{I_N}[d~]; N runs over 1..l-1, and every
#: other row counts masked positions as tokens of weight 0.
EXPECTATION_LENGTHS = (2, 3, 4, 5, 6, 7, 8, 9, 10)
#: The two lengths (l0, l1) at which the printed linear growth of E_{I_N}[d~] is tested (N = 1, 2; exact).
LINEAR_LENGTHS = (8, 32)


def _ratio_max(measured: torch.Tensor, bound: torch.Tensor) -> float:
    """Largest measured/bound over the entries where the bound is positive (0 when there are none)."""
    ok = bound > 0
    return float((measured[ok] / bound[ok]).max()) if ok.any() else 0.0


def _theorem1_constructions() -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """Selected tokens all equal to u, the others on the ray -c u: the sharp bound is attained exactly."""
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
    return conclude(
        bound,
        statement,
        trials=len(dt),
        violations=violations,
        worst=worst,
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
        r"$\tilde d \le (1 - \bar\alpha_N)\, d_1 + [(1 - \bar\alpha_N) + (L - N)\, \bar\alpha_N] "
        r"\max_{j \in I_N} \lVert x_j \rVert$",
    )


@register("thm1-dmax-sharp", "Theorem 1 d_max sharp (book)")
def check_theorem1_dmax_sharp(trials: int = 2000, seed: int = 0) -> Verdict:
    """The book's sharp Theorem 1 (smaller by 2 (1 - abar_N) max ||x_j||)."""
    return _theorem1_verdict(
        trials,
        seed,
        2,
        "Theorem 1 d_max sharp (book)",
        r"$\tilde d \le (1 - \bar\alpha_N)\, d_1 + [(L - N)\, \bar\alpha_N - (1 - \bar\alpha_N)] "
        r"\max_{j \in I_N} \lVert x_j \rVert$",
    )


@lru_cache(maxsize=4)
def _residual_study(trials: int, seed: int) -> dict:
    """Exact E (enumeration), main term and the residual bound on random trials and constructions."""
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
    return conclude(
        "Theorem 1 residual eps >= 0",
        r"$I_N$ uniform: $E_{I_N}[\tilde d] = \frac{L-N}{L} \sum_i \lVert \alpha_i x_i - \frac{N}{L-1} "
        r"\sum_{j \ne i} \alpha_j x_j \rVert + \varepsilon$, $\varepsilon \ge 0$",
        trials=len(E),
        violations=violations,
        worst=worst,
        held=tightness_text(worst) + "; eps = 0 iff each a_i x_i - s stays on one ray over the subsets without i "
        "(e.g. when every subset gives the same s)",
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
    return conclude(
        "Theorem 1 residual bound (book)",
        r"$\varepsilon \le \frac{L-N}{L} \sum_i \sqrt{\frac{N (L-1-N)}{L-2} \sigma_i^2}$, $\sigma_i^2$ the "
        r"variance of $\{\alpha_j x_j\}_{j \ne i}$",
        trials=len(eps),
        violations=violations,
        worst=worst,
        details={
            "random_trials": st["n_random"],
            "ranges": f"exact enumeration, L in {RESIDUAL_LENGTHS}, N in 1..L-1, d in 1..5, beta ~ U[0, 8]",
        },
    )


# ----------------------------------------------------------------------------------------------------------------
# Corollary 2 (i) for the expected distance: E_{I_N}[d~] over a uniformly random N-subset of the l tokens
# ----------------------------------------------------------------------------------------------------------------
def expectation_bounds(alpha, x, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """E_{I_N}[d~] (exact, by enumeration) and the book's two bounds on it, each of shape ``(...)``.

    Returns ``(E, middle, top)``: ``middle = sum_i ||alpha_i x_i|| + (l - n) E_{I_N}[||s||]`` (the triangle
    inequality on each dropped term) and ``top = (1 + n) max_i ||x_i||`` (since E||s|| <= (n / l) sum_j ||alpha_j
    x_j|| and the weights sum to one): E <= middle <= top at every length l. Every position of the row is a token,
    so masked positions passed with weight 0 are counted (their x enter the maximum).
    """
    E = selection.random_selection_exact(alpha, x, n)
    a, xt = validation.weights(alpha, x)
    norms = torch.linalg.vector_norm(xt, dim=-1)
    length = a.shape[-1]
    middle = (a * norms).sum(dim=-1) + (length - n) * selection.random_context_norm_exact(alpha, x, n)
    top = (1 + n) * norms.amax(dim=-1)
    return E, middle.expand(E.shape), top.expand(E.shape)


def _masked_rows(gen: torch.Generator, count: int, length: int, d: int, masked: bool):
    """``count`` random rows of length ``length``: softmax(beta g) weights, beta ~ U[0, 8], Gaussian tokens with
    log-normal norms; with ``masked``, a trailing block of 1..length-1 positions gets weight 0 (a causal row whose
    masked positions are counted as tokens)."""
    beta = 8 * torch.rand(count, 1, generator=gen, dtype=torch.float64)
    logits = beta * torch.randn(count, length, generator=gen, dtype=torch.float64)
    if masked and length > 1:
        visible = torch.randint(1, length, (count, 1), generator=gen)
        logits = logits.masked_fill(torch.arange(length) >= visible, -torch.inf)
    x = torch.randn(count, length, d, generator=gen, dtype=torch.float64)
    return torch.softmax(logits, dim=-1), x * torch.exp(
        torch.randn(count, length, 1, generator=gen, dtype=torch.float64)
    )


def _unit_rows(gen: torch.Generator, count: int, length: int, d: int):
    """Random rows as :func:`_masked_rows` (no masked positions) with unit tokens, so max_i ||x_i|| = 1 at every
    length: the token distribution does not change with l."""
    alpha, x = _masked_rows(gen, count, length, d, False)
    return alpha, x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def _one_hot(length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All weight on token 0, a unit token there and zero tokens elsewhere: E_{I_N}[d~] = (1 + N)(l - N)/l, which
    approaches the bound (1 + N) max ||x_i|| as l grows and stays below it."""
    alpha = torch.zeros(1, length, dtype=torch.float64)
    alpha[0, 0] = 1
    x = torch.zeros(1, length, 2, dtype=torch.float64)
    x[0, 0, 0] = 1
    return alpha, x


#: (l, N) of the one-hot constructions of both Corollary 2 (i) checks (exact enumeration).
_ONE_HOT = ((8, 1), (8, 3), (32, 1), (32, 2), (128, 1), (400, 1))


@lru_cache(maxsize=4)
def _expectation_study(trials: int, seed: int) -> dict:
    """E_{I_N}[d~] and its two bounds on random rows (with and without masked positions) and the constructions."""
    gen = generator(seed, 19, stride=WIDE)
    groups = [(length, n) for length in EXPECTATION_LENGTHS for n in range(1, length)]
    parts = {"random": [], "masked": [], "adversarial": []}
    for g, ((length, n), count) in enumerate(zip(groups, split(trials, len(groups)), strict=True)):
        for kind, share in (("random", (count + 1) // 2), ("masked", count // 2)):
            if share:
                alpha, x = _masked_rows(gen, share, length, (1, 2, 3, 5)[g % 4], kind == "masked")
                parts[kind].append(expectation_bounds(alpha, x, n))
    for length, n in _ONE_HOT:
        parts["adversarial"].append(expectation_bounds(*_one_hot(length), n))
    study = {kind: tuple(torch.cat(v) for v in zip(*items, strict=True)) for kind, items in parts.items() if items}
    study["counts"] = {kind: sum(len(e) for e, _, _ in items) for kind, items in parts.items()}
    return study


def _exact_in_chunks(alpha: torch.Tensor, x: torch.Tensor, n: int, chunk: int = 32) -> torch.Tensor:
    """E_{I_N}[d~] by enumeration, ``chunk`` rows at a time (bounds the (rows, subsets, l, d) intermediate)."""
    return torch.cat(
        [
            selection.random_selection_exact(alpha[i : i + chunk], x[i : i + chunk], n)
            for i in range(0, len(alpha), chunk)
        ]
    )


@lru_cache(maxsize=4)
def _linear_study(trials: int, seed: int) -> dict:
    """E_{I_N}[d~] at l0 and l1 (:data:`LINEAR_LENGTHS`) on random rows, and the one-hot constructions."""
    gen = generator(seed, 23, stride=WIDE)
    l0, l1 = LINEAR_LENGTHS
    groups = [(n, d) for n in (1, 2) for d in (1, 2, 3, 5)]
    ratio = []
    for (n, d), count in zip(groups, split(trials, len(groups)), strict=True):
        if count == 0:
            continue
        e0, e1 = (_exact_in_chunks(*_unit_rows(gen, count, length, d), n) for length in (l0, l1))
        ratio.append(0.5 * e0 * (l1 - n) / (l0 - n) / e1)  # > 1: E(l1) below half of linear growth from l0
    one_hot = []
    for length, n in _ONE_HOT:
        e = float(expectation_bounds(*_one_hot(length), n)[0])
        one_hot.append({"l": length, "N": n, "E": e, "E/(1 + N)": e / (1 + n)})
    return {"ratio": torch.cat(ratio), "one_hot": one_hot}


@register("cor2-expectation-linear", "Corollary 2 (i) as printed: E linear in L")
def check_expectation_linear(trials: int = 2000, seed: int = 0) -> Verdict:
    """Corollary 2 (i) read for the expected distance: at fixed N, E_{I_N}[d~] grows about linearly in l.

    Tested as E(l1) >= (1/2) E(l0) (l1 - N)/(l0 - N), at least half the linear growth from l0 to l1, on random
    rows with unit tokens (exact expectations). The book claims it is violated: E is bounded by (1 + N) max_i ||x_i||
    at every l (:func:`check_expectation_bounded`), and the one-hot row gives E = (1 + N)(l - N)/l.
    """
    study = _linear_study(int(trials), int(seed))
    ratio = study["ratio"]
    violations = int((ratio > 1 + RTOL).sum())
    l0, l1 = LINEAR_LENGTHS
    return conclude(
        "Corollary 2 (i) as printed: E linear in L",
        rf"$N$ fixed, $I_N$ uniform: $E_{{I_N}}[\tilde d](\ell_1) \ge \tfrac12 E(\ell_0)\, "
        rf"(\ell_1 - N)/(\ell_0 - N)$, $\ell_0 = {l0}$, $\ell_1 = {l1}$",
        trials=len(ratio),
        violations=violations,
        worst=float(ratio.max()),
        expected=VIOLATED,
        violated=f"violated: E at l = {l1} is below half the linear growth from l = {l0} in {violations} of "
        f"{len(ratio)} random rows (median shortfall x{float(ratio.median()):.2f}); one-hot weights give "
        "E = (1 + N)(l - N)/l < 1 + N at every l",
        details={
            "median_ratio": float(ratio.median()),
            "one_hot": study["one_hot"],
            "ranges": f"exact enumeration at l = {l0} and {l1}, N in (1, 2), d in (1, 2, 3, 5), beta ~ U[0, 8], unit "
            "tokens",
        },
    )


@register("cor2-expectation-bounded", "Corollary 2 (i) corrected: E bounded (book)")
def check_expectation_bounded(trials: int = 2000, seed: int = 0) -> Verdict:
    """The book's Corollary 2 (i) for the expected distance: E_{I_N}[d~] <= sum_i ||alpha_i x_i|| + (l - N)
    E||s|| <= (1 + N) max_i ||x_i||, bounded at every length l (exact expectations by enumeration)."""
    study = _expectation_study(int(trials), int(seed))
    E, middle, top = (torch.cat([study[k][i] for k in study if k != "counts"]) for i in range(3))
    tol = 1e-12 * (1 + top)
    violations = int(((E > middle * (1 + RTOL) + tol) | (middle > top * (1 + RTOL) + tol)).sum())
    worst = _ratio_max(E, top)
    return conclude(
        "Corollary 2 (i) corrected: E bounded (book)",
        r"$I_N$ uniform: $E_{I_N}[\tilde d] \le \sum_i \lVert \alpha_i x_i \rVert + (\ell - N)\, E \lVert s \rVert "
        r"\le (1 + N) \max_i \lVert x_i \rVert$ at every $\ell$",
        trials=len(E),
        violations=violations,
        worst=worst,
        held=tightness_text(worst) + "; approached by one-hot weights, E = (1 + N)(l - N)/l, as l -> inf",
        details={
            **{f"{kind}_trials": count for kind, count in study["counts"].items()},
            "worst_ratio_middle": _ratio_max(E, middle),
            "ranges": f"exact enumeration, l in {EXPECTATION_LENGTHS}, N in 1..l-1, d in 1..5, beta ~ U[0, 8]; "
            "every other row with a trailing block of weight-0 (masked) positions counted as tokens; one-hot "
            f"constructions at (l, N) in {_ONE_HOT}",
        },
    )
