"""Numerical checks of every bound: one function per bound, each returning a :class:`Verdict`.

The chapters call these to show a result and pytest calls the same functions to assert it; ``attnlimits check``
runs them all (``--only ID`` runs one). A check registers itself with :func:`register` under a stable short id
and the bound's display name, and records what the book *claims* about the bound (``expected``: "holds" or
"violated") so that the command line can tell a surprise from a confirmation.

- :mod:`attnlimits.theory.checks.registry`      :class:`Verdict`, :func:`register`, :data:`CHECKS` (id -> check),
                                         :data:`NAMES` (id -> display name), :func:`run_all`, and the table of
                                         verdicts a page shows (:func:`bounds_table`, :func:`show_bounds`);
- :mod:`attnlimits.theory.checks.search`        tolerances, the optimiser of the adversarial ascents, the seeding;
- :mod:`attnlimits.theory.checks.vanishing`     chapter 12: ``cor1``, ``lem1``;
- :mod:`attnlimits.theory.checks.distance` (chapter 13): ``thm1-dmax-reconstructed``, ``thm1-dmax-sharp``,
  ``thm1-residual-sign``, ``thm1-residual-bound``, ``cor2-expectation-linear``, ``cor2-expectation-bounded``;
- :mod:`attnlimits.theory.checks.separability` (chapter 14): ``thm2-lower``, ``thm2-upper-reconstructed``,
  ``thm2-upper``, ``multihead``;
- :mod:`attnlimits.theory.checks.gradient` (chapter 15): ``cor3-printed``, ``cor3-spectral``, ``cor3-entry``,
  ``lem2``.

The checks run (and ``attnlimits check`` prints them) in the order they were first published: chapters 12 and
15, then 13 and 14; the import order below keeps that order, so the report's rows do not move.
"""

from __future__ import annotations

from attnlimits.theory.checks.registry import (
    CHECKS,
    NAMES,
    UnknownCheckError,
    Verdict,
    bounds_table,
    id_of,
    register,
    run_all,
    select,
    show_bounds,
)
from attnlimits.theory.checks.search import RTOL, Z_MC

# The import order below is the registration order: chapters 12 and 15, then 13 and 14.
# isort: off
from attnlimits.theory.checks.vanishing import VANISHING_DIMS, VANISHING_LENGTHS, check_corollary1, check_lemma1
from attnlimits.theory.checks.gradient import (
    JACOBIAN_LENGTHS,
    check_corollary3_printed,
    check_lemma2,
    check_softmax_entry,
    check_softmax_spectral,
    jacobian_norm_study,
)
from attnlimits.theory.checks.distance import (
    DISTANCE_GRID,
    EXPECTATION_LENGTHS,
    LINEAR_LENGTHS,
    RESIDUAL_LENGTHS,
    check_expectation_bounded,
    check_expectation_linear,
    check_jensen_residual_bound,
    check_jensen_residual_sign,
    check_theorem1_dmax,
    check_theorem1_dmax_sharp,
)
from attnlimits.theory.checks.separability import (
    FIXED_RADIUS_COUNTEREXAMPLE,
    SEPARABILITY_GRID,
    UPPER_RADIUS_FACTORS,
    check_multihead,
    check_theorem2_lower,
    check_theorem2_upper,
    check_theorem2_upper_reconstructed,
    fixed_radius_counterexample,
    upper_bound_radii,
)
# isort: on

__all__ = [
    "CHECKS",
    "DISTANCE_GRID",
    "EXPECTATION_LENGTHS",
    "FIXED_RADIUS_COUNTEREXAMPLE",
    "JACOBIAN_LENGTHS",
    "LINEAR_LENGTHS",
    "NAMES",
    "RESIDUAL_LENGTHS",
    "RTOL",
    "SEPARABILITY_GRID",
    "UPPER_RADIUS_FACTORS",
    "VANISHING_DIMS",
    "VANISHING_LENGTHS",
    "Z_MC",
    "UnknownCheckError",
    "Verdict",
    "bounds_table",
    "check_corollary1",
    "check_corollary3_printed",
    "check_expectation_bounded",
    "check_expectation_linear",
    "check_jensen_residual_bound",
    "check_jensen_residual_sign",
    "check_lemma1",
    "check_lemma2",
    "check_multihead",
    "check_softmax_entry",
    "check_softmax_spectral",
    "check_theorem1_dmax",
    "check_theorem1_dmax_sharp",
    "check_theorem2_lower",
    "check_theorem2_upper",
    "check_theorem2_upper_reconstructed",
    "fixed_radius_counterexample",
    "id_of",
    "jacobian_norm_study",
    "register",
    "run_all",
    "select",
    "show_bounds",
    "upper_bound_radii",
]
