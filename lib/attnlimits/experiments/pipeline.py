"""The experiments' place in the book's results pipeline (:mod:`attnlimits.reporting.book_results`): Algorithms 1-5
on the default model and text, with and without the attention sink, at :func:`~attnlimits.experiments.book_preset`.
Outside the experiments' results-cache key: nothing the experiments compute with imports this module."""

from __future__ import annotations

import functools

from attnlimits import experiments
from attnlimits.infra.pipeline import Study, one_part, places, where

__all__ = ["STUDY"]


def _presets() -> list[str]:
    from attnlimits.experiments.presets import PRESETS

    return list(PRESETS)


def _default() -> str:
    from attnlimits.experiments.presets import book_preset

    return book_preset().name


def _experiments(preset: str, *, inputs, n_jobs: int, progress) -> str:
    """Algorithms 1-5 with and without the attention sink, from one capture of the windows (taken only when an
    entry is missing), the second run borrowing Algorithm 5 and the sink weights from the first."""
    m, t, p = inputs.model, inputs.text, experiments.get_preset(preset)
    caps = functools.cache(lambda: experiments.capture_windows(m, t, length=p.max_length, count=p.windows))
    opts = dict(captures=caps, n_jobs=n_jobs, progress=progress)
    res = experiments.results(m, t, p, **opts)
    experiments.results(m, t, p, exclude_sink=True, shared=res, **opts)
    return places(*(experiments.results_folder(m, t, p, exclude_sink=sink) for sink in (False, True)))


STUDY = Study(
    "experiments",
    "Algorithms 1-5 on the default model and text, with and without the attention sink (chapters 21-25)",
    _presets,
    _default,
    one_part("experiments", 1000.0, _experiments),
    where,
)
