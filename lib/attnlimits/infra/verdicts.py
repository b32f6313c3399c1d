"""The book's verdicts: every word a check, a claim or a report gives as its verdict, and the rule that decides an
interval against a band.

The checks of the bounds (:mod:`attnlimits.theory.checks`), the paper's experimental claims
(:mod:`attnlimits.experiments.paper_claims`), the studies' claims (the long-context study's) and the book's claims
table (:mod:`attnlimits.reporting.book_claims`) all speak these words, and only these, so that a reader meets one
vocabulary and a word means the same thing on every page:

====================================================  ==================================================================
word                                                  what it means
====================================================  ==================================================================
:data:`REPRODUCED` "reproduced"                       the measurement bears the paper's claim out: the 95 % interval
                                                      lies inside the band the claim's rule names (or the rule's exact
                                                      test passes)
:data:`NOT_REPRODUCED` "not reproduced"               the measurement contradicts the claim: the interval lies wholly
                                                      outside the band, or the claim's shape fails
:data:`INCONCLUSIVE` "inconclusive"                   the interval straddles an edge of the band (or an end is unknown):
                                                      the windows measured do not decide
:data:`CORRECTED` "corrected"                         the paper's statement fails and the book proves a replacement that
                                                      holds
:data:`PREMISE_NOT_MET` "premise not met"             the conclusion of a proved statement fails on the data, so its
                                                      premise does not hold there (Lemma 1 on a model whose logits grow
                                                      with L): the data are outside the statement, not against it
:data:`NOT_MEASURED` "not measured"                   the run has no number for the claim (e.g. attention given without
                                                      its logits has no Algorithm 5 table)
:data:`NOT_TESTABLE` "not testable here"              nothing this book computes decides the claim (advice, or results
                                                      computed before the claim existed)
:data:`DEPENDS_ON_READING` "depends on the reading"   the paper's formula has several readings (Eq. (10)'s expectation:
                                                      E, E_mc, E_full, E_perm) and the claim's rule, applied to each,
                                                      gives different verdicts; each reading's verdict is shown
:data:`HINGES` "hinges on one passage"                leaving out one window (one passage of the text) gives the claim
                                                      another verdict: the run does not decide it, and the page names
                                                      the window and the verdict without it
:data:`DEPENDS_ON_MODEL` "depends on the model"       the claim is measured on several trained models, and one model
                                                      reproduces it where another does not; each model's verdict is
                                                      shown (:func:`across_models`)
:data:`RECONSTRUCTION` "(the book's reconstruction)"  follows the verdict on a formula the paper does not print in full:
                                                      what was checked is the book's reading of it
:data:`HOLDS` "holds"                                 a bound: no trial (random or adversarial) exceeds it; also what
                                                      the book expects of a bound it proves
:data:`VIOLATED` "violated"                           a bound: some trial exceeds it; also what the book expects of a
                                                      bound it refutes
:data:`NO_VIOLATION` "no violation found"             a bound the book expects to fail held in every trial of the budget
                                                      run
====================================================  ==================================================================

A claim of the paper's experiments also has a kind (:data:`CLAIM_KINDS`): :data:`REPRODUCTION` "reproduction", a
rule that can fail on the data (its verdict among :data:`CLAIM_VERDICTS`), or :data:`SANITY_CHECK` "sanity check", a
statement that holds by proof or by construction (a proved bound), whose verdict is :data:`HOLDS` or
:data:`VIOLATED` and which is never counted as a reproduction.

:func:`decide` is the rule of every claim decided on an interval, and :func:`combine` the rule that gives a claim
one verdict from several (the parts of its rule, its readings, its measurements). The resampling behind those
intervals (how many draws, which seed) is :data:`attnlimits.infra.statistics.RESAMPLES` and
:data:`attnlimits.infra.statistics.SEED`.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "CLAIM_KINDS",
    "CLAIM_VERDICTS",
    "CORRECTED",
    "DEPENDS_ON_MODEL",
    "DEPENDS_ON_READING",
    "EXPECTATIONS",
    "HINGES",
    "HOLDS",
    "INCONCLUSIVE",
    "NOT_MEASURED",
    "NOT_REPRODUCED",
    "NOT_TESTABLE",
    "NO_VIOLATION",
    "PREMISE_NOT_MET",
    "RECONSTRUCTION",
    "REPRODUCED",
    "REPRODUCTION",
    "SANITY_CHECK",
    "VIOLATED",
    "WORDS",
    "across_models",
    "combine",
    "decide",
]

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
CORRECTED = "corrected"
PREMISE_NOT_MET = "premise not met"
NOT_MEASURED = "not measured"
NOT_TESTABLE = "not testable here"
DEPENDS_ON_READING = "depends on the reading"
DEPENDS_ON_MODEL = "depends on the model"
HINGES = "hinges on one passage"
#: Appended to the verdict of a claim whose formula the paper does not print in full.
RECONSTRUCTION = " (the book's reconstruction)"
HOLDS = "holds"
VIOLATED = "violated"
NO_VIOLATION = "no violation found"

#: The verdicts of a claim of the paper (an experiment's, a study's, a row of the book's claims table).
CLAIM_VERDICTS = (
    REPRODUCED,
    NOT_REPRODUCED,
    INCONCLUSIVE,
    HINGES,
    CORRECTED,
    NOT_MEASURED,
    NOT_TESTABLE,
    DEPENDS_ON_READING,
    DEPENDS_ON_MODEL,
    PREMISE_NOT_MET,
)
#: What the book expects of a bound it checks (:attr:`attnlimits.theory.checks.Verdict.expected`).
EXPECTATIONS = (HOLDS, VIOLATED)
#: The kinds of a claim: a rule that can fail on the data, or a statement true by proof or construction (its verdict
#: :data:`HOLDS` or :data:`VIOLATED`, never counted as a reproduction).
REPRODUCTION = "reproduction"
SANITY_CHECK = "sanity check"
CLAIM_KINDS = (REPRODUCTION, SANITY_CHECK)
#: Every word of the vocabulary.
WORDS = (*CLAIM_VERDICTS, RECONSTRUCTION, *EXPECTATIONS, NO_VIOLATION)


def decide(lo: float, hi: float, band: tuple[float, float]) -> str:
    """The verdict of an interval ``[lo, hi]`` against ``band``: "reproduced" when it lies inside the band (its
    edges included), "not reproduced" when it lies wholly outside, "inconclusive" otherwise (also when an end is
    NaN)."""
    low, high = band
    if not low <= high:
        raise ValueError(f"band: must be (low, high) with low <= high, got {band!r}")
    if low <= lo and hi <= high:
        return REPRODUCED
    if hi < low or lo > high:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def combine(verdicts: Iterable[str], *, readings: bool = False) -> str:
    """One verdict of a claim from several verdicts of it: their common verdict when they agree.

    When they differ, over the parts of a rule that must all hold or over several measurements of the claim (the
    default): the first of "not reproduced", "violated", "inconclusive", "hinges on one passage", "depends on
    the reading" and "depends on the model" among them,
    else "not reproduced" (verdicts that differ otherwise never add up to a reproduction; so does no verdict at
    all). Over the readings of a formula the paper does not print in full (``readings=True``): "depends on the
    reading"; a reading "not measured" is left out, and the verdict is "not measured" when no reading is measured.
    """
    found = set(verdicts)
    if readings:
        found.discard(NOT_MEASURED)
        if not found:
            return NOT_MEASURED
    if len(found) == 1:
        return found.pop()
    if readings:
        return DEPENDS_ON_READING
    for word in (NOT_REPRODUCED, VIOLATED, INCONCLUSIVE, HINGES, DEPENDS_ON_READING, DEPENDS_ON_MODEL):
        if word in found:
            return word
    return NOT_REPRODUCED


def across_models(verdicts: Iterable[str]) -> str:
    """One verdict of a claim measured on several trained models, from each model's verdict: their common verdict
    when they agree; :data:`DEPENDS_ON_MODEL` when one model reproduces the claim and another refutes it (one says
    "reproduced", another "not reproduced"), so that neither model's verdict speaks for the claim; otherwise
    :func:`combine`'s (a model that does not decide leaves the claim undecided)."""
    found = set(verdicts)
    if {REPRODUCED, NOT_REPRODUCED} <= found:
        return DEPENDS_ON_MODEL
    return combine(found)
