"""The registry of numerical checks and the verdict type.

A check is a function ``(trials: int, seed: int) -> Verdict`` registered with :func:`register` under a stable
short id (``cor3-printed``, ``thm2-upper-reconstructed``...) and a display name (the bound's name as the book
writes it). :data:`CHECKS` maps id -> check in registration order; :data:`NAMES` maps id -> display name.
``attnlimits check --only ID`` runs one; :func:`run_all` runs them all (or the chosen ids). :func:`bounds_table`
sets verdicts out one row per bound, and :func:`show_bounds` is that table as a page shows it (the theory chapters
their own checks, the reproducibility report every check).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace

import pandas as pd

from attnlimits.infra.verdicts import HOLDS

__all__ = [
    "CHECKS",
    "ID_PATTERN",
    "NAMES",
    "UnknownCheckError",
    "Verdict",
    "bounds_table",
    "id_of",
    "register",
    "run_all",
    "select",
    "show_bounds",
]

#: What a check id looks like: lower-case words and digits joined by hyphens.
ID_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Verdict:
    """Outcome of checking one bound numerically.

    ``worst_ratio`` is the largest measured/bound ratio seen (> 1 means a violation for an upper bound; for a
    lower bound it is bound/measured). ``verdict`` is a one-line human reading, e.g. "holds but conservative by
    a factor 3.2" or "violated: two tied top logits reach 1/(2T)". ``expected`` is what the book claims: "holds"
    or "violated" (:data:`attnlimits.infra.verdicts.EXPECTATIONS`).
    """

    bound: str
    statement: str
    trials: int
    violations: int
    worst_ratio: float
    verdict: str
    expected: str
    details: dict = field(default_factory=dict)
    #: The check's stable id (filled in by the registry).
    id: str = ""

    @property
    def as_expected(self) -> bool:
        """True when the measurement agrees with the book's claim about this bound."""
        return (self.violations == 0) if self.expected == HOLDS else (self.violations > 0)

    def record(self) -> dict:
        """The verdict as a flat dict without ``details`` and ``id`` (``attnlimits check --json`` puts the id first)."""
        d = asdict(self)
        d.pop("details")
        d.pop("id")
        return d


#: Check id -> check function ``(trials: int, seed: int) -> Verdict``, in registration order.
CHECKS: dict[str, Callable[..., Verdict]] = {}
#: Check id -> display name (the ``bound`` of its verdicts).
NAMES: dict[str, str] = {}


class UnknownCheckError(ValueError):
    """An id that names no registered check."""


def register(check_id: str, name: str):
    """Decorator adding a check ``fn(trials, seed) -> Verdict`` to :data:`CHECKS` under ``check_id``.

    ``name`` is the display name, the ``bound`` field of the verdicts; the returned function fills in ``id``.
    """
    if not ID_PATTERN.match(check_id):
        raise ValueError(f"check_id: {check_id!r} is not lower-case words joined by hyphens")

    def deco(fn):
        if check_id in CHECKS or name in NAMES.values():
            raise ValueError(f"check_id: a check {check_id!r} or {name!r} is already registered")

        @functools.wraps(fn)
        def check(trials: int = 2000, seed: int = 0) -> Verdict:
            return replace(fn(trials=trials, seed=seed), id=check_id)

        CHECKS[check_id] = check
        NAMES[check_id] = name
        return check

    return deco


def id_of(name: str) -> str:
    """The id of the check whose display name is ``name``."""
    for check_id, display in NAMES.items():
        if display == name:
            return check_id
    raise UnknownCheckError(f"no check is named {name!r}; the names are {list(NAMES.values())}")


def select(ids: Iterable[str] | None = None) -> list[str]:
    """The registered ids to run: all of them (``None``), else ``ids`` in registration order, duplicates dropped.

    Raises :class:`UnknownCheckError` listing the valid ids when one is unknown.
    """
    if ids is None:
        return list(CHECKS)
    wanted = list(ids)
    unknown = [i for i in wanted if i not in CHECKS]
    if unknown:
        raise UnknownCheckError(f"unknown check id(s) {', '.join(map(repr, unknown))}; valid ids: {', '.join(CHECKS)}")
    return [i for i in CHECKS if i in wanted]


def run_all(trials: int = 2000, seed: int = 0, *, only: Iterable[str] | None = None) -> list[Verdict]:
    """Run every registered check (or those in ``only``, by id) with the same budget and seed."""
    if trials < 1:
        raise ValueError(f"trials: must be >= 1, got {trials}")
    return [CHECKS[i](trials=trials, seed=seed) for i in select(only)]


def bounds_table(verdicts: Iterable[Verdict]) -> pd.DataFrame:
    """``verdicts`` one row per bound: its trials and violations, the worst measured/bound ratio, what the book
    claims after proving it (``expected``), whether the measurement agrees ("yes" or "NO", so a disagreement stands
    out) and the verdict."""
    return pd.DataFrame(
        [
            {
                "bound": v.bound,
                "trials": v.trials,
                "violations": v.violations,
                "worst ratio": v.worst_ratio,
                "expected": v.expected,
                "agrees": "yes" if v.as_expected else "NO",
                "verdict": v.verdict,
            }
            for v in verdicts
        ]
    )


def show_bounds(verdicts: Iterable[Verdict]):
    """:func:`bounds_table` as a page shows it: without the index, the worst ratio to 4 significant digits and the
    trials with thousands separators (a pandas ``Styler``)."""
    table = bounds_table(verdicts)
    return table.style.format({"worst ratio": "{:.4g}", "trials": "{:,}"}).hide(axis="index")
