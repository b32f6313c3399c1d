"""Numerical checks of every bound: one function per bound, each returning a :class:`Verdict`.

The chapters call these to show a result and pytest calls the same functions to assert it (the ARENA pattern);
``attnlimits check`` runs them all. A check registers itself with :func:`register` under the bound's name, and
records what the book *claims* about the bound (``expected``: "holds" or "violated") so that the CLI can tell a
surprise from a confirmation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

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
