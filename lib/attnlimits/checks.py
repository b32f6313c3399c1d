"""Numerical checks of every bound: one function per bound, each returning a :class:`Verdict`.

The chapters call these to show a result and pytest calls the same functions to assert it (the ARENA pattern);
``attnlimits check`` runs them all. A check registers itself with :func:`register` under the bound's name, and
records what the book *claims* about the bound (``expected``: "holds" or "violated") so that the CLI can tell a
surprise from a confirmation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import torch

__all__ = ["CHECKS", "Verdict", "register", "run_all"]


@dataclass(frozen=True)
class Verdict:
    """Outcome of checking one bound numerically.

    ``worst_ratio`` is the largest measured/bound ratio seen (> 1 means a violation for an upper bound; for a
    lower bound it is bound/measured). ``verdict`` is a one-line human reading, e.g. "holds but conservative by
    a factor 3.2" or "violated: two tied top logits reach 1/(2T)". ``expected`` is what the book claims.
    """

    bound: str
    statement: str
    trials: int
    violations: int
    worst_ratio: float
    verdict: str
    expected: str  # "holds" or "violated"
    details: dict = field(default_factory=dict)

    @property
    def as_expected(self) -> bool:
        """True when the measurement agrees with the book's claim about this bound."""
        return (self.violations == 0) if self.expected == "holds" else (self.violations > 0)

    def record(self) -> dict:
        """The JSON record printed by ``attnlimits check --json``."""
        d = asdict(self)
        d.pop("details")
        return d


#: Bound name -> check function ``(trials: int, seed: int) -> Verdict``, in registration order.
CHECKS: dict[str, Callable[..., Verdict]] = {}


def register(name: str):
    """Decorator adding a check ``fn(trials, seed) -> Verdict`` to :data:`CHECKS` under ``name``."""

    def deco(fn):
        if name in CHECKS:
            raise ValueError(f"name: a check called {name!r} is already registered")
        CHECKS[name] = fn
        return fn

    return deco


def run_all(trials: int = 2000, seed: int = 0) -> list[Verdict]:
    """Run every registered check with the same budget and seed."""
    if trials < 1:
        raise ValueError(f"trials: must be >= 1, got {trials}")
    return [fn(trials=trials, seed=seed) for fn in CHECKS.values()]


# ==============================================================================================================
# Vanishing attention (Lemma 1, Corollary 1) and gradient sensitivity (Lemma 2, Corollary 3): chapters 12 and 15.
# Every check: float64 random trials over a documented range + an adversarial search (targeted constructions and
# Adam ascent on measured / bound) + the worst measured / bound ratio. A trial counts as a violation when
# measured > bound * (1 + RTOL): exact ties of the sharp bounds round to within a few ulps of 1.
# ==============================================================================================================

RTOL = 1e-9

#: Sequence lengths of the vanishing-attention checks: a log grid from 2 to 10^5.
VANISHING_LENGTHS = tuple(sorted({round(10**e) for e in torch.linspace(math.log10(2), 5, 16).tolist()}))
#: Key dimensions d, cycled over the length grid.
VANISHING_DIMS = (1, 2, 3, 4, 8, 16, 32, 64)
#: Sequence lengths of the Jacobian checks (exact spectral norms; the L x L SVD of the general normaliser).
JACOBIAN_LENGTHS = (2, 3, 4, 6, 8, 16, 32, 64)


@contextmanager
def _one_thread():
    """Run many tiny tensor ops (Adam ascents) on one thread: thread hand-offs cost more than they save there,
    and far more on a busy machine. The previous setting is restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class _Adam:
    """Plain Adam (Kingma & Ba) for the adversarial ascents. Written out because importing ``torch.optim`` pulls in
    torch._dynamo and costs seconds, more than all the ascents together."""

    def __init__(self, params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.params, self.lr, self.betas, self.eps, self.t = list(params), lr, betas, eps, 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.m, self.v, strict=True):
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            step = self.lr * (m / (1 - b1**self.t)) / ((v / (1 - b2**self.t)).sqrt() + self.eps)
            p.sub_(step)


def _log_uniform(gen: torch.Generator, n: int, lo: float, hi: float) -> torch.Tensor:
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    return torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))


def _tightness_text(worst: float) -> str:
    if worst >= 1 - 1e-6:
        return f"holds, sharp (attained: worst measured/bound {worst:.6f})"
    if worst >= 0.99:
        return f"holds, tight (worst measured/bound {worst:.4f}; attained only in a limit)"
    return f"holds but conservative by a factor {1 / worst:.3g} (worst measured/bound {worst:.3g})"


def _vanishing_groups(trials: int, gen: torch.Generator) -> list[tuple[int, int, int]]:
    """(L, d, number of trials) per group: trials are dealt round-robin over a seeded shuffle of the length grid."""
    order = torch.randperm(len(VANISHING_LENGTHS), generator=gen).tolist()
    counts = [0] * len(order)
    for t in range(trials):
        counts[order[t % len(order)]] += 1
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

    opt = _Adam([q, w], lr=0.05)
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


@register("Corollary 1")
def check_corollary1(trials: int = 2000, seed: int = 0) -> Verdict:
    """Corollary 1: every softmax weight lies in (1/L) exp(-+2 Delta / T), Delta = ||q|| max ||k_i||.

    Random trials (float64): L on a log grid 2..10^5, d in 1..64, keys with directions uniform on the sphere and
    norms uniform in [0, 1] (or all 1: every other group), a random query direction, T log-uniform in [0.1, 10]
    and ||q|| set so that Delta / T is log-uniform in [1e-3, 8] (from near-uniform to very concentrated weights).
    Adversarial: the extremal keys (one parallel, all others antiparallel to q, all of norm max ||k||) over the
    length grid and Delta / T in {1e-4, 0.1, 1, 4}, plus Adam ascent of log(alpha_1 / upper) and
    log(lower / alpha_1) over q, k for L <= 16.
    """
    from attnlimits import bounds

    gen = torch.Generator().manual_seed(seed)
    worst, violations, n_random, per_length = 0.0, 0, 0, {}
    worst_case = None
    for g, (L, d, n) in enumerate(_vanishing_groups(trials, gen)):
        k = torch.randn(L, d, generator=gen, dtype=torch.float64)
        k = k / torch.linalg.vector_norm(k, dim=-1, keepdim=True)
        if g % 2:
            k = k * torch.rand(L, 1, generator=gen, dtype=torch.float64)
        q_dir = torch.randn(n, d, generator=gen, dtype=torch.float64)
        q_dir = q_dir / torch.linalg.vector_norm(q_dir, dim=-1, keepdim=True)
        T = _log_uniform(gen, n, 0.1, 10.0)
        rho = _log_uniform(gen, n, 1e-3, 8.0)
        k_max = torch.linalg.vector_norm(k, dim=-1).max()
        q = q_dir * (rho * T / k_max)[:, None]
        delta = bounds.corollary1_delta(q, k)
        lower, upper = bounds.corollary1_band(L, delta, T)
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
            lower, upper = bounds.corollary1_band(L, rho * T, T)
            r = max((alpha.max() / upper).item(), (lower / alpha.min()).item())
            violations += int(r > 1 + RTOL)
            ratios.append(r)
        construction[rho] = ratios
        if max(ratios) > worst:
            worst = max(ratios)
            worst_case = {"construction": "one key parallel, L-1 antiparallel", "delta_over_T": rho,
                          "L": VANISHING_LENGTHS[ratios.index(max(ratios))]}

    # Adam ascent over (q, k) for small L: can the band be beaten anywhere?
    n_ascent = 0
    with _one_thread():
        ascents = [_corollary1_ascent(L, gen) for L in (2, 3, 8, 16)]
    for L, qn, k in ascents:
        B = len(qn)
        with torch.no_grad():
            alpha = torch.softmax(torch.einsum("bd,bld->bl", qn, k), dim=-1)
            lower, upper = bounds.corollary1_band(L, bounds.corollary1_delta(qn, k), 1.0)
            r = torch.maximum(alpha.amax(-1) / upper, lower / alpha.amin(-1))
        violations += int((r > 1 + RTOL).sum())
        n_ascent += B
        if r.max().item() > worst:
            worst, worst_case = r.max().item(), {"ascent": True, "L": L}
    n_construction = len(construction) * len(VANISHING_LENGTHS)
    return Verdict(
        bound="Corollary 1",
        statement="softmax: (1/L) exp(-2 Delta/T) <= alpha_i <= (1/L) exp(2 Delta/T), Delta = ||q|| max_i ||k_i||",
        trials=n_random + n_construction + n_ascent,
        violations=violations,
        worst_ratio=worst,
        verdict=(f"holds; approached only as L -> inf or Delta -> 0 (worst measured/bound {worst:.9f} at "
                 f"L = {worst_case.get('L')}); at finite L the sharp band 1/(1 + (L-1) e^(+-2 Delta/T)) is attained")
        if violations == 0 else f"violated ({violations} trials)",
        expected="holds",
        details={
            "random_trials": n_random, "construction_trials": n_construction, "ascent_trials": n_ascent,
            "worst_ratio_random": worst_random, "worst_case": worst_case,
            "lengths": list(VANISHING_LENGTHS), "worst_ratio_random_by_L": per_length,
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


@register("Lemma 1")
def check_lemma1(trials: int = 2000, seed: int = 0) -> Verdict:
    """Lemma 1: for logits in [-a, a] and a positive F independent of L, C1/L <= alpha_i <= C2/L with
    C1 = min F / max F and C2 = max F / min F on [-a, a].

    Random trials (float64): five families of F (exp, softplus, sigmoid, 1 + p l^2, 1.5 + cos(p l)) with p
    log-uniform in [0.1, 5], a log-uniform in [0.1, 5], L on the log grid 2..10^5, logits uniform in [-a, a].
    Adversarial: the extremal logits (one at argmax F, the rest at argmin F, and the reverse) for every family,
    length and a in {0.1, 1, 5}: they attain the sharp band of :func:`attnlimits.bounds.lemma1_band_sharp`.
    """
    from attnlimits import bounds

    gen = torch.Generator().manual_seed(seed + 1)
    families = list(_lemma1_families().items())
    worst, violations, n_random, worst_case = 0.0, 0, 0, None
    for g, (L, _d, n) in enumerate(_vanishing_groups(trials, gen)):
        name, (F, extremes) = families[g % len(families)]
        a = _log_uniform(gen, n, 0.1, 5.0)
        p = _log_uniform(gen, n, 0.1, 5.0)
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
    return Verdict(
        bound="Lemma 1",
        statement="logits in [-a, a], F > 0 independent of L: (min F / max F)/L <= alpha_i <= (max F / min F)/L",
        trials=n_random + n_construction,
        violations=violations,
        worst_ratio=worst,
        verdict=(f"holds; approached only as L -> inf (worst measured/bound {worst:.9f} at L = "
                 f"{worst_case.get('L')}); at finite L the sharp band f_min/(f_min + (L-1) f_max) ... is attained")
        if violations == 0 else f"violated ({violations} trials)",
        expected="holds",
        details={
            "random_trials": n_random, "construction_trials": n_construction,
            "worst_ratio_random": worst_random, "worst_case": worst_case,
            "families": [name for name, _ in families],
            "ranges": "L 2..1e5 (log grid), a 0.1..5, p 0.1..5, logits uniform in [-a, a]",
        },
    )


def _softmax_jacobian_samples(trials: int, seed: int):
    """Random softmax logits for the Corollary-3 checks, padded with -inf to a common length (masked = absent).

    float64; L from :data:`JACOBIAN_LENGTHS`; T log-uniform in [0.01, 100]; logits = T * sigma * N(0, 1) with the
    spread sigma log-uniform in [0.01, 20] (near-uniform to one-hot weights); a quarter of the rows get their two
    largest logits tied (the critical case), so concentration covers the whole simplex.
    """
    gen = torch.Generator().manual_seed(seed + 2)
    Lmax = max(JACOBIAN_LENGTHS)
    lengths = torch.tensor(JACOBIAN_LENGTHS)[torch.randint(len(JACOBIAN_LENGTHS), (trials,), generator=gen)]
    T = _log_uniform(gen, trials, 0.01, 100.0)
    sigma = _log_uniform(gen, trials, 0.01, 20.0)
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
    opt = _Adam([z, x], lr=0.1)
    for _ in range(steps):
        alpha = torch.softmax(z, dim=-1)
        var = (alpha * x * x).sum(-1) - (alpha * x).sum(-1) ** 2
        opt.zero_grad()
        (-(var / (x * x).sum(-1)).sum()).backward()
        opt.step()
    return z.detach()


@lru_cache(maxsize=4)
def _jacobian_norm_study(trials: int, seed: int):
    """Shared by the three Corollary-3 checks: exact T ||J||_2 and T max|J_ij| on random + adversarial logits."""
    from attnlimits import bounds

    z, T, lengths = _softmax_jacobian_samples(trials, seed)
    norm = bounds.softmax_jacobian_norm(z, T)
    alpha = bounds._softmax_bt(z, T)
    top2 = alpha.topk(2, dim=-1).values
    entry = torch.maximum((alpha * (1 - alpha)).amax(-1), top2[:, 0] * top2[:, 1]) / T
    gen = torch.Generator().manual_seed(seed + 3)
    Lmax = max(JACOBIAN_LENGTHS)
    with _one_thread():
        ascents = [_rayleigh_ascent(L, 16, gen) for L in (2, 3, 8, 32)]
    adv_z = torch.cat([
        torch.nn.functional.pad(z, (0, Lmax - z.shape[-1]), value=-math.inf) for z in ascents
    ])
    T_grid = torch.tensor([0.01, 0.1, 0.25, 1.0, 4.0, 100.0], dtype=torch.float64)
    adv_T = T_grid.repeat_interleave(len(adv_z) // len(T_grid) + 1)[: len(adv_z)]
    adv_norm = bounds.softmax_jacobian_norm(adv_z * adv_T[:, None], adv_T)
    tied = torch.tensor([[0.0, 0.0, -math.inf, -math.inf]], dtype=torch.float64) * T_grid[:, None]
    tied_norm = bounds.softmax_jacobian_norm(tied, T_grid)
    half = torch.zeros(len(T_grid), 8, dtype=torch.float64)
    half[:, 0] = math.log(7.0)  # alpha_1 = 7 / 14 = 1/2: the largest entry alpha_1 (1 - alpha_1) = 1/4
    half_alpha = torch.softmax(half, dim=-1)
    half_entry = (half_alpha * (1 - half_alpha)).amax(-1) / T_grid
    return {
        "T": T, "norm": norm, "entry": entry, "max_alpha": alpha.amax(-1), "lengths": lengths,
        "adv_T": torch.cat([adv_T, T_grid]), "adv_norm": torch.cat([adv_norm, tied_norm]),
        "adv_entry_T": T_grid, "adv_entry": half_entry, "T_grid": T_grid, "tied_norm": tied_norm,
    }


_JACOBIAN_RANGES = ("L in {2,...,64}, T 0.01..100 (log-uniform), logit spread / T 0.01..20 (log-uniform), "
                    "25% rows with tied top two; adversarial: Adam ascent of the Rayleigh quotient, "
                    "two tied top logits, alpha_1 = 1/2")


def _ratio_summary(measured: torch.Tensor, bound: torch.Tensor):
    ratio = measured / bound
    i = int(ratio.argmax())
    return int((ratio > 1 + RTOL).sum()), ratio[i].item(), i


@register("Corollary 3 (as printed)")
def check_corollary3_printed(trials: int = 2000, seed: int = 0) -> Verdict:
    """Corollary 3 as printed: ||grad_l alpha||_2 <= min{1/(4T), sqrt(2)} for softmax with temperature T.

    The book claims this is violated: two tied top logits with all other weights 0 give exactly 1/(2T).
    Same trials as the corrected bounds (see :func:`_softmax_jacobian_samples`).
    """
    from attnlimits import bounds

    s = _jacobian_norm_study(trials, seed)
    v1, w1, _ = _ratio_summary(s["norm"], bounds.corollary3_printed(s["T"]))
    v2, w2, i = _ratio_summary(s["adv_norm"], bounds.corollary3_printed(s["adv_T"]))
    T_c = 1.0
    logits, _ = _two_tied_counterexample(T_c)
    measured = bounds.softmax_jacobian_norm(logits, T_c).item()
    printed = bounds.corollary3_printed(T_c).item()
    violations = v1 + v2 + int(measured > printed * (1 + RTOL))
    worst = max(w1, w2, measured / printed)
    return Verdict(
        bound="Corollary 3 (as printed)",
        statement="softmax: ||d alpha / d l||_2 <= min{1/(4T), sqrt(2)}",
        trials=len(s["norm"]) + len(s["adv_norm"]) + 1,
        violations=violations,
        worst_ratio=worst,
        verdict=(f"violated: two tied top logits, others -inf give ||J||_2 = 1/(2T) = {measured:.4g} > "
                 f"{printed:.4g} at T = 1 (worst ratio {worst:.3g} at T = {s['adv_T'][i].item():g})")
        if violations else "no violation found",
        expected="violated",
        details={
            "random_violations": v1, "worst_ratio_random": w1, "adversarial_violations": v2,
            "counterexample": {"logits": logits.tolist(), "T": T_c, "spectral_norm": measured, "printed": printed},
            "ranges": _JACOBIAN_RANGES,
        },
    )


@register("Corollary 3 corrected: spectral 1/(2T)")
def check_softmax_spectral(trials: int = 2000, seed: int = 0) -> Verdict:
    """The book's correction: ||diag(alpha) - alpha alpha^T||_2 / T <= 1/(2T), sharp (two tied top logits)."""
    from attnlimits import bounds

    s = _jacobian_norm_study(trials, seed)
    v1, w1, _ = _ratio_summary(s["norm"], bounds.softmax_spectral_bound(s["T"]))
    v2, w2, _ = _ratio_summary(s["adv_norm"], bounds.softmax_spectral_bound(s["adv_T"]))
    worst = max(w1, w2)
    return Verdict(
        bound="Corollary 3 corrected: spectral 1/(2T)",
        statement="softmax: ||d alpha / d l||_2 <= 1/(2T)",
        trials=len(s["norm"]) + len(s["adv_norm"]),
        violations=v1 + v2,
        worst_ratio=worst,
        verdict=_tightness_text(worst) if v1 + v2 == 0 else f"violated ({v1 + v2} trials)",
        expected="holds",
        details={"worst_ratio_random": w1, "worst_ratio_adversarial": w2, "ranges": _JACOBIAN_RANGES},
    )


@register("Corollary 3 corrected: entry 1/(4T)")
def check_softmax_entry(trials: int = 2000, seed: int = 0) -> Verdict:
    """What 1/(4T) does bound: every entry |d alpha_i / d l_j| <= 1/(4T), sharp at alpha_i = 1/2."""
    from attnlimits import bounds

    s = _jacobian_norm_study(trials, seed)
    v1, w1, _ = _ratio_summary(s["entry"], bounds.softmax_entry_bound(s["T"]))
    v2, w2, _ = _ratio_summary(s["adv_entry"], bounds.softmax_entry_bound(s["adv_entry_T"]))
    worst = max(w1, w2)
    return Verdict(
        bound="Corollary 3 corrected: entry 1/(4T)",
        statement="softmax: max_ij |d alpha_i / d l_j| <= 1/(4T)",
        trials=len(s["entry"]) + len(s["adv_entry"]),
        violations=v1 + v2,
        worst_ratio=worst,
        verdict=_tightness_text(worst) if v1 + v2 == 0 else f"violated ({v1 + v2} trials)",
        expected="holds",
        details={"worst_ratio_random": w1, "worst_ratio_adversarial": w2, "ranges": _JACOBIAN_RANGES},
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
    p = _log_uniform(gen, batch, 0.1, 10.0)[:, None]
    x = torch.randn(batch, L, generator=gen, dtype=torch.float64).requires_grad_(True)
    u = torch.randn(batch, L, generator=gen, dtype=torch.float64).requires_grad_(True)
    w = torch.randn(batch, L, generator=gen, dtype=torch.float64).requires_grad_(True)
    opt = _Adam([x, u, w], lr=0.05)
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


@register("Lemma 2 (general Jacobian)")
def check_lemma2(trials: int = 2000, seed: int = 0) -> Verdict:
    """The book's Lemma 2: ||d alpha / d l||_2 <= min{max|h|/2, sqrt(sum alpha (1-alpha) h^2 / 2)}, h = F'/F.

    Random trials (float64): five families of F (exp(l/T), softplus, sigmoid, 1 + p l^2, 1.5 + cos(p l)), p (or T)
    log-uniform in [0.05, 20], L in {2,...,32}, logits = spread * N(0, 1) with spread log-uniform in [0.01, 20];
    exact spectral norms by SVD. Adversarial: two tied top logits with the rest far below for exp(l/T) (the sharp
    case), and Adam ascent of u^T J w / (||u|| ||w|| bound) over (l, u, w) for every family at L = 4.
    """
    from attnlimits import bounds

    gen = torch.Generator().manual_seed(seed + 4)
    families = list(_lemma2_families().items())
    lengths = [L for L in JACOBIAN_LENGTHS if L <= 32]
    worst, violations, n_random, worst_case = 0.0, 0, 0, None
    for g, (name, (F, dF)) in enumerate(families):
        for j, L in enumerate(lengths):
            cells = len(families) * len(lengths)
            n = trials // cells + (g * len(lengths) + j < trials % cells)
            if n == 0:
                continue
            p = _log_uniform(gen, n, 0.05, 20.0)[:, None]
            x = _log_uniform(gen, n, 0.01, 20.0)[:, None] * torch.randn(n, L, generator=gen, dtype=torch.float64)
            J = bounds.general_jacobian(x, lambda t, p=p, F=F: F(t, p), lambda t, p=p, dF=dF: dF(t, p))
            bound = bounds.general_jacobian_bound(x, lambda t, p=p, F=F: F(t, p), lambda t, p=p, dF=dF: dF(t, p))
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
    with _one_thread():
        ascents = [(name, F, dF, *_lemma2_ascent(F, dF, gen)) for name, (F, dF) in families]
    for name, F, dF, p, xd in ascents:
        B = len(xd)
        Fp, dFp = (lambda t, p=p, F=F: F(t, p)), (lambda t, p=p, dF=dF: dF(t, p))
        r = torch.linalg.matrix_norm(bounds.general_jacobian(xd, Fp, dFp), ord=2) / bounds.general_jacobian_bound(
            xd, Fp, dFp
        )
        violations += int((r > 1 + RTOL).sum())
        n_adv += B
        if r.max().item() > worst:
            worst, worst_case = r.max().item(), {"F": name, "ascent": True}
    return Verdict(
        bound="Lemma 2 (general Jacobian)",
        statement="alpha = F(l)/sum F: ||d alpha/d l||_2 <= min{max|h|/2, sqrt(sum alpha(1-alpha) h^2 / 2)}, h = F'/F",
        trials=n_random + n_adv,
        violations=violations,
        worst_ratio=worst,
        verdict=_tightness_text(worst) if violations == 0 else f"violated ({violations} trials)",
        expected="holds",
        details={
            "random_trials": n_random, "adversarial_trials": n_adv, "worst_ratio_random": worst_random,
            "worst_case": worst_case, "families": [name for name, _ in families],
            "ranges": "L 2..32, p or T 0.05..20, logit spread 0.01..20; adversarial: ties and Adam ascent at L = 4",
        },
    )
