"""The training sweep's place in the book's results pipeline (:mod:`attnlimits.reporting.book_results`): chapter 32's
sweep at the chapters' preset (:func:`attnlimits.studies.book_preset`). Outside the study's results-cache key, as
:mod:`.report` is: the study does not import this module."""

from __future__ import annotations

import functools

from attnlimits.infra import provenance, shipping
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


def _shards(preset: str) -> list[shipping.Shard]:
    """What the book ships of the sweep: each piece's results-cache entry whole (its runs' histories and final
    states; the ``seconds`` column records the machine's time, not a result)."""
    from attnlimits.studies.training import study

    p = study.get_preset(preset)
    return [
        shipping.entry_shard(
            f"training/{p.name}/{name}",
            (study.__name__,),
            {"preset": p.as_dict(), "job": name},
            functools.partial(_compute, p.name, name),
            seconds=10.0,
            records=("seconds",),
        )
        for name, _, _ in study.jobs(p)
    ]


def _compute(preset: str, name: str, root) -> None:
    from attnlimits.studies.training import study

    study.job_results(preset, name, root=root)


STUDY = Study(
    "training",
    "training a selection task at low temperature, the paper's normalisers (chapter 32)",
    _presets,
    book_preset,
    one_part("training", 60.0, _training),
    where,
    _shards,
)
