"""Closed forms of every bound in the paper (and of the book's corrections), one function per bound.

Each function is batched over leading dimensions, works in float32 and float64, and raises ``ValueError`` naming
the argument on invalid input. Proofs are in the Theory chapters; numerical checks in :mod:`attnlimits.checks`.
"""

from __future__ import annotations
