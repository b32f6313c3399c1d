"""The several models' place in the book's results pipeline (:mod:`attnlimits.reporting.book_results`): chapter 34's
models, one part each (its own run and its controls', window by window into the results cache, in a process of its
own under ``--jobs``), at the reduced preset; what ships of it: :func:`attnlimits.studies.several_models.shards`.
Outside the study's results-cache key: the study does not import this module."""

from __future__ import annotations

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
    """One part per model the book ships the run of (with its controls)."""
    from attnlimits.studies.several_models import runs

    return [Part(f"models: {name}", _SECONDS.get(name, 0.0), _model, (name,)) for name in runs.SHIPPED_MODELS]


def _model(preset: str, name: str, *, inputs, n_jobs: int, progress) -> None:
    """Every window of the model's runs into the results cache (what its shards are then written from)."""
    from attnlimits.experiments import runs as experiments
    from attnlimits.experiments import shipped
    from attnlimits.studies.several_models import runs

    for run in runs.run_labels([name]):
        try:
            model, text, shuffle = runs.inputs(run, preset, 0, inputs.text)
        except NotImplementedError:
            continue  # the second text is not installed: the manifest says so
        for window in range(runs.get_preset(preset).windows):
            experiments.window_results(
                model, text, preset, window, precision=shipped.PRECISION, shuffle=shuffle, progress=progress
            )


def _collect(preset: str, values: list, inputs, n_jobs: int, progress) -> str:
    from attnlimits.studies.several_models import runs

    return places(runs.study_folder(preset))


def _shards(preset: str):
    from attnlimits.studies.several_models import runs

    return runs.shards(preset)


STUDY = Study(
    "models",
    "Algorithms 1-5 on every offline model and on its four controls, window by window (chapter 34)",
    _presets,
    _reduced,
    _parts,
    _collect,
    _shards,
)
