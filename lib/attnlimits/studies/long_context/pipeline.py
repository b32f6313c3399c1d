"""The long contexts' place in the book's results pipeline (:mod:`attnlimits.reporting.book_results`): chapter 35's
runs of both offline models (:func:`attnlimits.studies.long_context.book_results`) at the reduced preset. Outside
the study's results-cache key, as :mod:`.report` is: the study does not import this module."""

from __future__ import annotations

from attnlimits.infra.pipeline import Study, one_part, where

__all__ = ["STUDY"]


def _presets() -> list[str]:
    from attnlimits.studies.long_context import study

    return list(study.PRESETS)


def _reduced() -> str:
    return "reduced"


def _long_context(preset: str, *, inputs, n_jobs: int, progress) -> str:
    from attnlimits.studies.long_context import study

    runs = study.book_results(preset, progress=progress)
    models = ", ".join(r.label for r in runs.results) or "no model"
    return models + "".join(f"; not run: {why}" for why in runs.not_run)


STUDY = Study(
    "long-context",
    "both offline models from 1,024 tokens up (reduced: to 8,192; full: the whole context) on a sample of "
    "query rows (chapter 35)",
    _presets,
    _reduced,
    one_part("long-context", 200.0, _long_context),
    where,
)
