"""The alternative normalisers' place in the book's results pipeline (:mod:`attnlimits.reporting.book_results`):
chapter 33's synthetic and model heads and chapter 36's later normalisers, at the chapters' preset
(:func:`attnlimits.studies.book_preset`). Outside the study's results-cache key, as :mod:`.report` is: the study
does not import this module."""

from __future__ import annotations

from attnlimits.infra import provenance
from attnlimits.infra.pipeline import Study, one_part, places, where
from attnlimits.studies.presets import book_preset

__all__ = ["STUDY"]


def _presets() -> list[str]:
    from attnlimits.studies.alternatives import study

    return list(study.PRESETS)


def _alternatives(preset: str, *, inputs, n_jobs: int, progress) -> str:
    from attnlimits.studies.alternatives import study

    study.results(preset=preset, progress=progress)
    study.results(inputs.model, inputs.text, preset, progress=progress)
    recent = study.RECENT_PRESETS[preset]  # chapter 36: the normalisers proposed after the paper
    study.results(inputs.model, inputs.text, recent, progress=progress)
    return places(provenance.results_root() / "alternatives")


STUDY = Study(
    "alternatives",
    "the alternative normalisers on synthetic heads and on the model's heads: the paper's (chapter 33) and "
    "those proposed after it (chapter 36)",
    _presets,
    book_preset,
    one_part("alternatives", 100.0, _alternatives),
    where,
)
