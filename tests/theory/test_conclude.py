"""The one ending of every check: :func:`attnlimits.theory.checks.search.conclude` turns its counts into a Verdict in
the book's words, reading a bound the book proves and one it refutes each their own way."""

from __future__ import annotations

import pytest

from attnlimits.infra.verdicts import HOLDS, NO_VIOLATION, VIOLATED
from attnlimits.theory.checks.search import conclude, tightness_text


def _verdict(violations, **options):
    return conclude("Bound", "$x \\le 1$", trials=10, violations=violations, worst=0.5, details={"k": 1}, **options)


def test_a_bound_the_book_proves_reads_its_tightness_or_its_violations():
    held = _verdict(0)
    assert held.verdict == tightness_text(0.5) and held.expected == HOLDS and held.as_expected
    assert _verdict(0, held="holds, as shown").verdict == "holds, as shown"
    broken = _verdict(3)
    assert broken.verdict == "violated (3 trials)" and not broken.as_expected
    assert _verdict(3, unit="configurations").verdict == "violated (3 configurations)"
    assert _verdict(3, violated="violated: here").verdict == "violated: here"


def test_a_bound_the_book_refutes_reads_how_it_fails_or_that_nothing_failed():
    refuted = _verdict(2, expected=VIOLATED, violated="violated: a counterexample")
    assert refuted.verdict == "violated: a counterexample" and refuted.as_expected
    survived = _verdict(0, expected=VIOLATED, violated="violated: a counterexample")
    assert survived.verdict == NO_VIOLATION and not survived.as_expected
    assert _verdict(0, expected=VIOLATED, held=tightness_text(0.5)).verdict == tightness_text(0.5)


def test_the_record_keeps_every_field_in_its_place():
    v = _verdict(1)
    assert v.record() == {
        "bound": "Bound",
        "statement": "$x \\le 1$",
        "trials": 10,
        "violations": 1,
        "worst_ratio": 0.5,
        "verdict": "violated (1 trials)",
        "expected": HOLDS,
    }
    assert v.details == {"k": 1} and v.id == ""


def test_an_unknown_expectation_is_refused():
    with pytest.raises(ValueError, match="expected: must be one of"):
        _verdict(0, expected="fine")
