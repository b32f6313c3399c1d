"""The several models' place in the book's results pipeline (:mod:`attnlimits.reporting.book_results`): chapter 34's
models, one part each (with its controls, in a process of its own under ``--jobs``), then their manifest, at the
reduced preset. Outside the study's results-cache key: the study does not import this module."""

from __future__ import annotations

from attnlimits.infra import provenance
from attnlimits.infra.pipeline import Part, Study, places

__all__ = ["STUDY"]

#: About what each model's part takes on 2 cores from an empty cache with the reduced preset, in seconds (measured
#: with `make results`; another model counts 0): they only order the parts, longest first.
_SECONDS = {"SmolLM2-135M": 800.0, "Gemma-3-270M": 380.0}


def _presets() -> list[str]:
    from attnlimits.studies.several_models import study

    return list(study.PRESETS)


def _reduced() -> str:
    return "reduced"


def _parts(preset: str) -> list[Part]:
    """One part per model of :data:`~attnlimits.studies.several_models.MODELS` (with its controls), none when the
    manifest of ``preset`` is current."""
    from attnlimits.studies.several_models import study

    try:
        study.SeveralModels.load(provenance.results_root(), preset)
        return []
    except (FileNotFoundError, ValueError, KeyError):
        return [Part(f"models: {name}", _SECONDS.get(name, 0.0), _model, (name,)) for name in study.MODELS]


def _model(preset: str, name: str, *, inputs, n_jobs: int, progress) -> list[dict]:
    from attnlimits.studies.several_models import study

    return study.model_entries(name, preset, text=inputs.text, progress=progress, n_jobs=n_jobs)


def _collect(preset: str, values: list, inputs, n_jobs: int, progress) -> str:
    """The manifest of the models' entries (written when the parts computed them), read back."""
    from attnlimits.studies.several_models import study

    if values:
        entries = [e for model in values for e in model]
        seconds = sum(e.get("load_seconds", 0) + e.get("run_seconds", 0) for e in entries)
        study.write_manifest(entries, preset, text=inputs.text, seconds=seconds)
    study.results(preset, progress=progress, n_jobs=n_jobs)
    return places(study.manifest_path(preset))


STUDY = Study(
    "models",
    "Algorithms 1-5 on every model that loads and on its four controls (chapter 34)",
    _presets,
    _reduced,
    _parts,
    _collect,
)
