"""What every check shares: the tolerances, the one optimiser, the one seeding scheme, trial bookkeeping.

- :data:`RTOL`, :data:`Z_MC`          when a trial (or a Monte Carlo estimate) counts as a violation;
- :class:`Adam`                       the optimiser of every adversarial ascent;
- :func:`generator`                   the random stream of one check: ``seed * stride + salt``;
- :func:`split`, :func:`log_uniform`  dealing trials over groups, log-uniform draws;
- :func:`tightness_text`              the verdict text of a bound that holds;
- :func:`conclude`                    a check's :class:`Verdict` from its counts, in the book's words.
"""

from __future__ import annotations

import math

import torch

from attnlimits.infra.verdicts import EXPECTATIONS, HOLDS, NO_VIOLATION, VIOLATED
from attnlimits.theory.checks.registry import Verdict

__all__ = ["RTOL", "WIDE", "Z_MC", "Adam", "conclude", "generator", "log_uniform", "split", "tightness_text"]

#: A trial counts as a violation when measured > bound * (1 + RTOL): exact ties of the sharp bounds round to
#: within a few ulps of 1.
RTOL = 1e-9
#: Standard errors a Monte Carlo estimate must exceed a bound by before it counts as a violation.
Z_MC = 4.0
#: The stride of :func:`generator` for the checks of chapters 13 and 14 (seeds s and s + 1 never share a stream).
WIDE = 1_000_003


def generator(seed: int, salt: int, *, stride: int = 1) -> torch.Generator:
    """The random stream of one check: a CPU generator seeded with ``seed * stride + salt``.

    Each check has its own ``salt``. The checks of chapters 12 and 15 use ``stride=1`` (salts 0 to 4), those of
    chapters 13 and 14 ``stride=WIDE`` (salts 13 to 31); a common stride would change every random draw, so every
    worst ratio the book prints, and is left for a release that may change numbers. The value is taken modulo
    2**64, the range torch accepts, so every seed in [0, 2**63) works; below 2**64 nothing changes.
    """
    return torch.Generator().manual_seed((int(seed) * stride + salt) % 2**64)


def split(trials: int, groups: int) -> list[int]:
    """Deal ``trials`` over ``groups`` as evenly as possible, the first groups getting one more."""
    return [trials // groups + (1 if g < trials % groups else 0) for g in range(groups)]


class Adam:
    """Plain Adam (Kingma & Ba) for the adversarial ascents. Written out because importing ``torch.optim`` pulls in
    torch._dynamo and costs seconds, more than all the ascents together."""

    def __init__(self, params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.params, self.lr, self.betas, self.eps, self.t = list(params), lr, betas, eps, 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        """Forget the gradients of the parameters."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step on every parameter from its ``.grad``."""
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.m, self.v, strict=True):
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            step = self.lr * (m / (1 - b1**self.t)) / ((v / (1 - b2**self.t)).sqrt() + self.eps)
            p.sub_(step)


def log_uniform(gen: torch.Generator, n: int, lo: float, hi: float) -> torch.Tensor:
    """``n`` float64 draws log-uniform in [lo, hi]."""
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    return torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))


def tightness_text(worst: float) -> str:
    """One-line reading of the worst measured/bound ratio of a bound that holds (sharp, tight or conservative).

    A ratio of 0 (every trial measured 0, as happens with a handful of Monte Carlo trials) says the bound held but
    nothing about how tight it is, and the text says so instead of a factor 1/0.
    """
    if not worst > 0:
        return f"holds, tightness unknown (worst measured/bound {worst:.3g}: every trial measured 0; run more trials)"
    if worst >= 1 - 1e-6:
        return f"holds, sharp (attained: worst measured/bound {worst:.6f})"
    if worst >= 0.99:
        return f"holds, tight (worst measured/bound {worst:.4f}; attained only in a limit)"
    return f"holds but conservative by a factor {1 / worst:.3g} (worst measured/bound {worst:.3g})"


def conclude(
    bound: str,
    statement: str,
    *,
    trials: int,
    violations: int,
    worst: float,
    details: dict,
    expected: str = HOLDS,
    held: str | None = None,
    violated: str | None = None,
    unit: str = "trials",
) -> Verdict:
    """The :class:`Verdict` of a check that counted ``violations`` in ``trials`` (``unit`` names what it counted)
    with ``worst`` the largest measured/bound ratio.

    The reading is ``held`` when nothing violated the bound, ``violated`` when something did. By default, a bound
    the book proves (``expected="holds"``) reads :func:`tightness_text` or "violated (n trials)", and a bound the
    book refutes (``expected="violated"``) reads "no violation found" when it held: its ``violated`` text says how
    it fails.
    """
    if expected not in EXPECTATIONS:
        raise ValueError(f"expected: must be one of {EXPECTATIONS}, got {expected!r}")
    if violations:
        reading = violated if violated is not None else f"{VIOLATED} ({violations} {unit})"
    elif held is not None:
        reading = held
    else:
        reading = tightness_text(worst) if expected == HOLDS else NO_VIOLATION
    return Verdict(
        bound=bound,
        statement=statement,
        trials=trials,
        violations=violations,
        worst_ratio=worst,
        verdict=reading,
        expected=expected,
        details=details,
    )
