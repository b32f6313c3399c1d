"""The training sweep's place in the book's results pipeline (:mod:`attnlimits.reporting.book_results`): chapter 32's
sweep at the chapters' preset (:func:`attnlimits.studies.book_preset`). Outside the study's results-cache key, as
:mod:`.report` is: the study does not import this module."""

from __future__ import annotations

from attnlimits.infra import provenance
from attnlimits.infra.pipeline import Study, one_part, places, where
from attnlimits.studies.presets import book_preset

__all__ = ["STUDY"]


def _presets() -> list[str]:
    from attnlimits.studies.training import study

    return list(study.PRESETS)


def _training(preset: str, *, inputs, n_jobs: int, progress) -> str:
    from attnlimits.studies.training import study

    study.results(preset, progress=bool(progress), n_jobs=n_jobs)
    return places(provenance.results_root() / "training" / preset)


STUDY = Study(
    "training",
    "training a selection task at low temperature, the paper's normalisers (chapter 32)",
    _presets,
    book_preset,
    one_part("training", 60.0, _training),
    where,
)
