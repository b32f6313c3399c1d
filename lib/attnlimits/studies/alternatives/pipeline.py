"""The alternative normalisers' place in the book's results pipeline (:mod:`attnlimits.reporting.book_results`):
chapter 33's synthetic and model heads and chapter 36's later normalisers, at the chapters' preset
(:func:`attnlimits.studies.book_preset`). Outside the study's results-cache key, as :mod:`.report` is: the study
does not import this module."""

from __future__ import annotations

import functools

from attnlimits.infra import provenance, shipping
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


def _shards(preset: str) -> list[shipping.Shard]:
    """What the book ships of chapters 33 and 36: each results-cache entry whole, the synthetic heads' and the
    shipped model's heads on the default text, at ``preset`` and at its later normalisers' preset. Each entry's
    ``seconds`` table records the machine's time, not a result."""
    from attnlimits.experiments import shipped
    from attnlimits.studies.alternatives import study

    p, recent = study.get_preset(preset), study.get_preset(study.RECENT_PRESETS[preset])
    data = {"model": shipped.model_key(), "text": shipped.text_key()}
    return [_shard(p, "synthetic", {}), _shard(p, "model", data), _shard(recent, "model", data)]


def _shard(p, heads: str, data: dict) -> shipping.Shard:
    """The entry of the preset ``p`` (a :class:`~attnlimits.studies.alternatives.AlternativesPreset`, of the
    paper's normalisers or of the later ones: its ``family``) on the synthetic heads or the model's."""
    from attnlimits.studies.alternatives import study

    name, key = f"alternatives/{p.name}-{p.family or 'paper'}/{heads}", {"preset": p.as_dict(), **data}
    compute = functools.partial(_compute, p, heads == "model")
    return shipping.entry_shard(name, (study.__name__,), key, compute, records=("seconds",))


def _compute(p, on_model: bool, root) -> None:
    from attnlimits.experiments import shipped
    from attnlimits.studies.alternatives import study

    if on_model:
        study.results(shipped.model(), shipped.text(shipped.DEFAULT_TEXT), p, root=root)
    else:
        study.results(preset=p, root=root)


STUDY = Study(
    "alternatives",
    "the alternative normalisers on synthetic heads and on the model's heads: the paper's (chapter 33) and "
    "those proposed after it (chapter 36)",
    _presets,
    book_preset,
    one_part("alternatives", 100.0, _alternatives),
    where,
    _shards,
)
