"""The claims table's place in the book's results pipeline (:mod:`attnlimits.reporting.book_results`): every theory
check's verdict, then the introduction's claims table (:func:`attnlimits.reporting.book_claims.write_include`) from
those, the experiments' results at the experiments' presets and chapter 34's other trained models. It comes last in
the pipeline: its collect step reads the experiments' results and chapter 34's."""

from __future__ import annotations

from attnlimits import experiments as e
from attnlimits.experiments import pipeline as experiments
from attnlimits.experiments import shipped
from attnlimits.infra.pipeline import Study, one_part, places

__all__ = ["STUDY"]


def _checks(preset: str, *, inputs, n_jobs: int, progress) -> None:
    """Every theory check's verdict, into the results cache (what the claims table reads)."""
    from attnlimits.reporting import book_claims

    book_claims.check_verdicts()


def _claims(preset: str, values: list, inputs, n_jobs: int, progress) -> str:
    """The introduction's claims table from every check's verdict, the experiments' run at ``preset`` (the shipped
    one where the book ships it, else computed window by window first), chapter 34's other trained models and
    untrained controls, and chapter 32's tests of the guidelines."""
    from attnlimits.reporting import book_claims as r

    res = shipped.summaries_of(inputs.model, inputs.text, e.get_preset(preset))
    others, controls = r.chapter34(res)
    table = r.claims(r.check_verdicts(), res, others, r.training_guidelines(), controls)
    return places(r.write_include(table))


STUDY = Study(
    "claims",
    "the introduction's claims table (chapters/_generated/claims.md) from every check's verdict and the "
    "experiments' results",
    experiments.STUDY.presets,
    experiments.STUDY.default,
    one_part("checks", 20.0, _checks),
    _claims,
)
