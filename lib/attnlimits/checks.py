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
    for rank, n in enumerate(_dc_split(trials, len(order))):
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


def _sharp_softmax_check(name: str, statement: str, measured: str, bound_fn, T_key: str, trials: int, seed: int):
    """Shared body of the two corrected Corollary-3 checks: the cached Jacobian study against ``bound_fn(T)``."""
    s = _jacobian_norm_study(trials, seed)
    v1, w1, _ = _ratio_summary(s[measured], bound_fn(s["T"]))
    v2, w2, _ = _ratio_summary(s[f"adv_{measured}"], bound_fn(s[T_key]))
    worst = max(w1, w2)
    return Verdict(
        bound=name,
        statement=statement,
        trials=len(s[measured]) + len(s[f"adv_{measured}"]),
        violations=v1 + v2,
        worst_ratio=worst,
        verdict=_tightness_text(worst) if v1 + v2 == 0 else f"violated ({v1 + v2} trials)",
        expected="holds",
        details={"worst_ratio_random": w1, "worst_ratio_adversarial": w2, "ranges": _JACOBIAN_RANGES},
    )


@register("Corollary 3 corrected: spectral 1/(2T)")
def check_softmax_spectral(trials: int = 2000, seed: int = 0) -> Verdict:
    """The book's correction: ||diag(alpha) - alpha alpha^T||_2 / T <= 1/(2T), sharp (two tied top logits)."""
    from attnlimits import bounds

    return _sharp_softmax_check(
        "Corollary 3 corrected: spectral 1/(2T)", "softmax: ||d alpha / d l||_2 <= 1/(2T)", "norm",
        bounds.softmax_spectral_bound, "adv_T", trials, seed,
    )


@register("Corollary 3 corrected: entry 1/(4T)")
def check_softmax_entry(trials: int = 2000, seed: int = 0) -> Verdict:
    """What 1/(4T) does bound: every entry |d alpha_i / d l_j| <= 1/(4T), sharp at alpha_i = 1/2."""
    from attnlimits import bounds

    return _sharp_softmax_check(
        "Corollary 3 corrected: entry 1/(4T)", "softmax: max_ij |d alpha_i / d l_j| <= 1/(4T)", "entry",
        bounds.softmax_entry_bound, "adv_entry_T", trials, seed,
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


# ==============================================================================================================
# Distance collapse (Theorem 1) and geometric separability (Theorem 2, multi-head coverage): chapters 13 and 14.
# Random float64 trials over the documented grids below + targeted constructions (+ an Adam ascent for d_max).
# Expectations over tokens (Theorem 2, multi-head) are Monte Carlo estimates: a configuration counts as a violation
# only when the estimate exceeds the bound by more than Z_MC standard errors.
# ==============================================================================================================

#: (L, N, d) groups of the Theorem 1 random trials; weights softmax(beta g), beta ~ U[0, 8], Gaussian tokens with
#: log-normal norms.
DISTANCE_GRID = ((2, 1, 1), (4, 1, 2), (8, 2, 3), (16, 4, 8), (32, 5, 16), (64, 5, 4), (128, 16, 32), (256, 5, 8))
#: Sequence lengths of the exact (enumeration) Jensen-residual trials; N runs over 1..L-1.
RESIDUAL_LENGTHS = (3, 4, 5, 6, 7, 8, 9, 10)
#: (L, d, N) groups of the Theorem 2 trials; tokens uniform on the sphere of radius M in {0.5, 1, 3}.
SEPARABILITY_GRID = ((8, 2, 2), (16, 3, 4), (32, 8, 8), (64, 16, 16), (32, 64, 4), (128, 4, 32), (24, 256, 12))
#: Standard errors a Monte Carlo estimate must exceed a bound by before it counts as a violation.
Z_MC = 4.0


def _dc_gen(seed: int, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed) * 1_000_003 + salt)


def _dc_split(trials: int, groups: int) -> list[int]:
    return [trials // groups + (1 if g < trials % groups else 0) for g in range(groups)]


def _ratio_max(measured: torch.Tensor, bound: torch.Tensor) -> float:
    ok = bound > 0
    return float((measured[ok] / bound[ok]).max()) if ok.any() else 0.0


def _theorem1_constructions() -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """Selected tokens all equal to u, the others on the ray -c u: the sharp bound is attained exactly."""
    from attnlimits import synthetic

    out = []
    u = torch.tensor([0.6, -0.8, 0.0], dtype=torch.float64)
    for L, N in ((2, 1), (5, 2), (16, 3), (64, 8)):
        for abar in (N / L, 0.5 * (1 + N / L), 0.99, 1.0):
            alpha = synthetic.two_level_weights(L, N, 1 - abar)
            for c in (0.0, 0.5, 2.0):
                x = torch.cat([u.expand(N, 3), (-c * u).expand(L - N, 3)])
                out.append((alpha, x, N))
    return out


def _theorem1_ascent(gen: torch.Generator, batch: int = 16, L: int = 8, N: int = 2, d: int = 3, steps: int = 40):
    """Adam ascent on d~ / d_max_sharp over logits and tokens; returns the final (alpha, x)."""
    from attnlimits import bounds, selection

    logits = (2 * torch.randn(batch, L, generator=gen, dtype=torch.float64)).requires_grad_()
    x = torch.randn(batch, L, d, generator=gen, dtype=torch.float64).requires_grad_()
    opt = torch.optim.Adam([logits, x], lr=0.1)
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

    gen = _dc_gen(seed, 13)
    parts = {"random": [], "adversarial": []}
    for (L, N, d), count in zip(DISTANCE_GRID, _dc_split(trials, len(DISTANCE_GRID)), strict=True):
        if count == 0:
            continue
        beta = 8 * torch.rand(count, 1, generator=gen, dtype=torch.float64)
        alpha = torch.softmax(beta * torch.randn(count, L, generator=gen, dtype=torch.float64), dim=-1)
        x = torch.randn(count, L, d, generator=gen, dtype=torch.float64)
        x = x * torch.exp(torch.randn(count, L, 1, generator=gen, dtype=torch.float64))
        parts["random"].append((alpha, x, N))
    parts["adversarial"] = _theorem1_constructions()
    with _one_thread():
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
        bound=bound, statement=statement, trials=len(dt), violations=violations, worst_ratio=worst,
        verdict=_tightness_text(worst) if violations == 0 else f"violated ({violations} trials)", expected="holds",
        details={
            "random_trials": len(rnd[0]), "adversarial_trials": len(study["adversarial"][0]),
            "worst_ratio_random": _ratio_max(rnd[0], rnd[which]),
            "median_ratio_random": float((rnd[0][ok] / rnd[which][ok]).median()),
            "ranges": "(L, N, d) in " + str(DISTANCE_GRID) + "; alpha = softmax(beta g), beta ~ U[0, 8]; "
            "adversarial: x_I = u, x_out = -c u constructions and Adam ascent on d~/d_max_sharp (L = 8, N = 2)",
        },
    )


@register("Theorem 1 d_max (as reconstructed)")
def check_theorem1_dmax(trials: int = 2000, seed: int = 0) -> Verdict:
    """Theorem 1 with fixed I_N, in the reconstructed form of the spec."""
    return _theorem1_verdict(
        trials, seed, 1, "Theorem 1 d_max (as reconstructed)",
        "d~ <= (1 - abar_N) d1 + [(1 - abar_N) + (L - N) abar_N] max_{j in I_N} ||x_j||")


@register("Theorem 1 d_max sharp (book)")
def check_theorem1_dmax_sharp(trials: int = 2000, seed: int = 0) -> Verdict:
    """The book's sharp Theorem 1 (smaller by 2 (1 - abar_N) max ||x_j||)."""
    return _theorem1_verdict(
        trials, seed, 2, "Theorem 1 d_max sharp (book)",
        "d~ <= (1 - abar_N) d1 + [(L - N) abar_N - (1 - abar_N)] max_{j in I_N} ||x_j||")


@lru_cache(maxsize=4)
def _residual_study(trials: int, seed: int) -> dict:
    """Exact E (enumeration), main term and the residual bound on random trials and constructions."""
    from attnlimits import bounds, selection

    gen = _dc_gen(seed, 17)
    groups = [(L, N) for L in RESIDUAL_LENGTHS for N in range(1, L)]
    E, main, rb = [], [], []
    for g, ((L, N), count) in enumerate(zip(groups, _dc_split(trials, len(groups)), strict=True)):
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


@register("Theorem 1 residual eps >= 0")
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
        trials=len(E), violations=violations, worst_ratio=worst,
        verdict=(_tightness_text(worst) + "; eps = 0 exactly when every subset gives the same s")
        if violations == 0 else f"violated ({violations} trials)",
        expected="holds",
        details={"random_trials": st["n_random"], "min_eps": float(eps.min()),
                 "median_eps_over_main": float((eps / main.clamp_min(1e-300)).median()),
                 "ranges": f"exact enumeration, L in {RESIDUAL_LENGTHS}, N in 1..L-1, d in 1..5, beta ~ U[0, 8]"},
    )


@register("Theorem 1 residual bound (book)")
def check_jensen_residual_bound(trials: int = 2000, seed: int = 0) -> Verdict:
    """eps <= ((L-N)/L) sum_i sqrt(tr Cov(s | i not in I_N)), the book's upper bound on the Jensen residual."""
    st = _residual_study(int(trials), int(seed))
    eps = st["E"] - st["main"]
    violations = int((eps > st["bound"] * (1 + 1e-9) + 1e-12).sum())
    worst = _ratio_max(eps, st["bound"])
    return Verdict(
        bound="Theorem 1 residual bound (book)",
        statement="eps <= ((L-N)/L) sum_i sqrt(N (L-1-N)/(L-2) sigma_i^2), sigma_i^2 = variance of {a_j x_j}_{j!=i}",
        trials=len(eps), violations=violations, worst_ratio=worst,
        verdict=_tightness_text(worst) if violations == 0 else f"violated ({violations} trials)",
        expected="holds",
        details={"random_trials": st["n_random"],
                 "ranges": f"exact enumeration, L in {RESIDUAL_LENGTHS}, N in 1..L-1, d in 1..5, beta ~ U[0, 8]"},
    )


def _separability_group(L, d, N, count, gen, M=None, alpha=None):
    """One Theorem 2 group: ``count`` draws, each with its own weights (softmax(beta g), beta ~ U[0, 6]) unless
    ``alpha`` is given, tokens uniform on the sphere of radius M."""
    from attnlimits import synthetic

    if alpha is None:
        beta = 6 * torch.rand(count, generator=gen, dtype=torch.float64)
        alpha = synthetic.concentrated_weights((count,), L, beta, gen)
    if M is None:
        M = (0.5, 1.0, 3.0)[int(torch.randint(3, (1,), generator=gen))]
    seed = int(torch.randint(2**31 - 1, (1,), generator=gen))
    return alpha, synthetic.separability_samples(alpha, N, d, 1 if alpha.dim() > 1 else count, M, seed=seed), M


@register("Theorem 2 lower bound")
def check_theorem2_lower(trials: int = 2000, seed: int = 0) -> Verdict:
    """N_s / N >= 1 - (1/(N r)) sum_i xi_i at the default radius, checked draw by draw (it holds pathwise)."""
    gen = _dc_gen(seed, 21)
    frac, low, sharp = [], [], []
    for (L, d, N), count in zip(SEPARABILITY_GRID, _dc_split(trials, len(SEPARABILITY_GRID)), strict=True):
        if count:
            _, res, _ = _separability_group(L, d, N, count, gen)
            frac.append(res["frac"].reshape(-1))
            low.append(res["lower"].reshape(-1))
            sharp.append(res["lower_sharp"].reshape(-1))
    n_random = sum(len(f) for f in frac)
    # constructions: selected tokens clustered in a tiny cap (delta ~ 0, xi_i ~ ||s - a_i x_i||), the rest opposite
    for L, N, eps in ((8, 1, 0.0), (8, 3, 1e-3), (32, 4, 1e-2), (32, 16, 1e-3)):
        alpha = torch.tensor([1.0] * N + [1e-3] * (L - N), dtype=torch.float64)
        alpha = alpha / alpha.sum()
        u = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
        x = u + eps * torch.randn(L, 3, generator=gen, dtype=torch.float64)
        x[N:] = -u + eps * torch.randn(L - N, 3, generator=gen, dtype=torch.float64)
        x = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        from attnlimits import bounds, selection, synthetic

        dist, mask = selection.token_distances(alpha, x, N)
        r = torch.where(mask, torch.inf, dist).amin()
        delta = synthetic.min_separation(x)
        frac.append(selection.distinguishable_fraction(alpha, x, N).reshape(1))
        low.append(bounds.theorem2_lower(alpha, N, r, 1.0, delta).reshape(1))
        sharp.append(bounds.theorem2_lower(alpha, N, r, 1.0, delta, sharp=True).reshape(1))
    frac, low, sharp = torch.cat(frac), torch.cat(low), torch.cat(sharp)
    violations = int((frac < low - 1e-12).sum())
    pos = frac > 0
    worst = float((low[pos] / frac[pos]).max()) if pos.any() else 0.0
    return Verdict(
        bound="Theorem 2 lower bound",
        statement="N_s/N >= (1/N) #{i: xi_i <= r} >= 1 - (1/(N r)) sum_i xi_i, r = min_{j not in I_N} ||s - a_j x_j||",
        trials=len(frac), violations=violations, worst_ratio=worst,
        verdict=_tightness_text(worst) if violations == 0 else f"violated ({violations} trials)", expected="holds",
        details={"random_trials": n_random, "sharp_form_violations": int((frac < sharp - 1e-12).sum()),
                 "worst_ratio_random": float((low[:n_random][pos[:n_random]] / frac[:n_random][pos[:n_random]]).max()),
                 "fraction_vacuous": float((low <= 0).double().mean()),
                 "ranges": "(L, d, N) in " + str(SEPARABILITY_GRID) + ", M in {0.5, 1, 3}, beta ~ U[0, 6], "
                 "delta = realised min separation; pathwise"},
    )


def _mc_exceeds(samples: torch.Tensor, bound: torch.Tensor | float) -> tuple[bool, float]:
    """(mean of samples exceeds bound by more than Z_MC standard errors, mean / bound)."""
    diff = samples - bound
    se = diff.std() / math.sqrt(len(diff)) if len(diff) > 1 else torch.tensor(math.inf)
    mean_b = float(torch.as_tensor(bound, dtype=torch.float64).mean())
    return bool(diff.mean() - Z_MC * se > 0), float(samples.mean()) / mean_b if mean_b > 0 else math.inf


def _upper_configs(gen):
    """Theorem 2 upper-bound configurations: the random grid (one alpha per group) and two targeted ones (uniform
    weights on I_N, zero elsewhere, high dimension), where the reconstructed bound fails."""
    from attnlimits import synthetic

    configs = []
    for L, d, N in SEPARABILITY_GRID:
        beta = float(6 * torch.rand(1, generator=gen, dtype=torch.float64))
        configs.append((synthetic.concentrated_weights((), L, beta, gen), d, N, "random"))
    configs.append((synthetic.two_level_weights(24, 12, 0.0), 1024, 12, "targeted"))
    configs.append((synthetic.two_level_weights(32, 8, 0.0), 256, 8, "targeted"))
    return configs


@register("Theorem 2 upper bound (as reconstructed)")
def check_theorem2_upper_reconstructed(trials: int = 2000, seed: int = 0) -> Verdict:
    """E[N_s]/N <= (1/N) sum_i exp(-(xi_i - r)_+^2 / (2 M^2)) at the default radius (Algorithm 4's evaluation)."""
    from attnlimits import synthetic

    gen = _dc_gen(seed, 23)
    configs = _upper_configs(gen)
    violations, worst, cases = 0, 0.0, []
    for (alpha, d, N, kind), count in zip(configs, _dc_split(trials, len(configs)), strict=True):
        res = synthetic.separability_samples(alpha, N, d, max(count, 2), 1.0, seed=int(gen.initial_seed()) + N)
        bad, ratio = _mc_exceeds(res["frac"], res["upper_rec"])
        violations += int(bad)
        worst = max(worst, ratio)
        if bad:
            cases.append({"L": alpha.shape[-1], "d": d, "N": N, "kind": kind, "E[N_s]/N": float(res["frac"].mean()),
                          "bound": float(res["upper_rec"].mean())})
    return Verdict(
        bound="Theorem 2 upper bound (as reconstructed)",
        statement="E[N_s]/N <= (1/N) sum_i exp(-(xi_i - r)_+^2 / (2 M^2)), r = min_{j not in I_N} ||s - a_j x_j||",
        trials=trials, violations=violations, worst_ratio=worst,
        verdict=(f"violated: E[N_s]/N = {cases[0]['E[N_s]/N']:.4f} > bound {cases[0]['bound']:.4f} "
                 f"(L={cases[0]['L']}, d={cases[0]['d']}, N={cases[0]['N']}, uniform weights on I_N)")
        if cases else _tightness_text(worst),
        expected="violated",
        details={"configurations": len(configs), "violating": cases, "z": Z_MC,
                 "ranges": "grid " + str(SEPARABILITY_GRID) + " with one alpha each + 2 targeted; M = 1"},
    )


@register("Theorem 2 upper bound (book, fixed r)")
def check_theorem2_upper(trials: int = 2000, seed: int = 0) -> Verdict:
    """E[N_s(r)]/N <= (1/N) sum_i min(1, exp(-(mu_i - r)_+^2 / (2 M^2 S2_i))) at a fixed radius r (McDiarmid)."""
    from attnlimits import bounds, synthetic

    gen = _dc_gen(seed, 29)
    configs = _upper_configs(gen)
    violations, worst, n = 0, 0.0, 0
    groups = [(c, f) for c in configs for f in (0.7, 1.0)]
    for ((alpha, d, N, _), factor), count in zip(groups, _dc_split(trials, len(groups)), strict=True):
        r = factor * float(bounds.theorem2_mean_lower(alpha, N, 1.0, d).mean().clamp_min(1e-3))
        res = synthetic.separability_samples(alpha, N, d, max(count, 2), 1.0, r=r,
                                             seed=int(torch.randint(2**31 - 1, (1,), generator=gen)))
        bad, ratio = _mc_exceeds(res["frac"], res["upper_book"])
        violations += int(bad)
        worst = max(worst, ratio)
        n += max(count, 2)
    return Verdict(
        bound="Theorem 2 upper bound (book, fixed r)",
        statement="E[N_s(r)]/N <= (1/N) sum_i min(1, exp(-(mu_i - r)_+^2/(2 M^2 S2_i))), x iid uniform on the sphere",
        trials=n, violations=violations, worst_ratio=worst,
        verdict=_tightness_text(worst) if violations == 0 else f"violated ({violations} configurations)",
        expected="holds",
        details={"configurations": len(groups), "z": Z_MC,
                 "ranges": "the reconstructed-bound configurations at r = 0.7, 1.0 x mean mu_i; M = 1"},
    )


@register("Multi-head coverage")
def check_multihead(trials: int = 2000, seed: int = 0) -> Verdict:
    """H independent heads: mean coverage <= 1 - (1 - p)^H with p = E[N_s]/N (= when every p_i is equal)."""
    from attnlimits import bounds, synthetic

    gen = _dc_gen(seed, 31)
    grid = ((16, 2, 4, 0.0), (32, 8, 8, 1.0), (32, 3, 4, 3.0), (64, 16, 8, 0.5))
    heads = (1, 2, 3, 5)
    violations, worst, rows = 0, 0.0, 0
    for (L, d, N, beta), count in zip(grid, _dc_split(trials, len(grid)), strict=True):
        samples = max(count // (1 + max(heads)), 8)
        alpha = synthetic.concentrated_weights((), L, beta, gen)
        df = synthetic.multihead_simulation(alpha, N, d, heads, samples, seed=int(torch.randint(2**31 - 1, (1,),
                                                                                                    generator=gen)))
        p_se = math.sqrt(max(df.p[0] * (1 - df.p[0]), 1e-12) / (samples * N))
        for row in df.itertuples():
            slack = Z_MC * (row.sd + row.H * (1 - row.p) ** (row.H - 1) * p_se)
            violations += int(row.simulated > row.paper + slack)
            worst = max(worst, row.simulated / (row.paper + slack))  # estimate / (bound + its MC allowance)
        rows += samples * (1 + max(heads))
    return Verdict(
        bound="Multi-head coverage",
        statement="H independent heads cover a selected token w.p. 1 - (1 - p_i)^H; on average <= 1 - (1 - p)^H",
        trials=rows, violations=violations, worst_ratio=worst,
        verdict=("holds within Monte Carlo error (equality at H = 1 and when all p_i are equal); "
                 f"p = 0.8 needs H = {int(bounds.heads_needed(0.8, 0.99))} for 99 %")
        if violations == 0 else f"violated ({violations} configurations)",
        expected="holds",
        details={"grid (L, d, N, beta)": grid, "heads": heads, "z": Z_MC,
                 "worst_ratio": "simulated / (1 - (1 - p)^H + Z_MC standard errors of both estimates)"},
    )
