"""The book's results pipeline as data: every study whose numbers the chapters read from the results cache, in the
order ``attnlimits results`` (and so ``make results``) computes them.

Each :class:`Study` has a name, a one-line description, the presets it accepts, the preset it computes by default
(what the book's build reads) and the call that computes it into the cache, or reads it back when the cache is
current (a no-op then). The order matters: the claims table reads the experiments' results, so it comes after them.

The studies of one run share one :class:`Inputs`: the default model and text, loaded once on first use. The tables
are those of loading them anew for each study (a capture leaves the model as it found it).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["PRESET_VARIABLE", "STUDIES", "Inputs", "Study", "select"]

#: The environment variable that chooses the preset of chapters 32 and 33 (what those chapters read).
PRESET_VARIABLE = "ATTNLIMITS_PRESET"


class Inputs:
    """The default model and text (:func:`attnlimits.models.load`, :func:`attnlimits.models.texts.load`), each
    loaded on first use and then shared by every study of one run."""

    @functools.cached_property
    def model(self):
        from attnlimits import models

        return models.load()

    @functools.cached_property
    def text(self):
        from attnlimits.models import texts

        return texts.load()


@dataclass(frozen=True)
class Study:
    """One study of the pipeline. ``presets()``: the names it accepts; ``default()``: the preset the book's build
    computes (a ValueError naming the environment variable when that names no preset); ``compute(preset, inputs,
    n_jobs, progress)``: computes it into the results cache (or reads it back) and says where it lies."""

    name: str
    description: str
    presets: Callable[[], Sequence[str]]
    default: Callable[[], str]
    compute: Callable[[str, Inputs, int, bool | str], str]

    def preset(self, name: str | None = None) -> str:
        """``name`` when the study has that preset, the study's default when ``name`` is None; ValueError else."""
        if name is None:
            return self.default()
        if name not in self.presets():
            raise ValueError(f"{self.name} has no preset {name!r} (its presets: {', '.join(self.presets())})")
        return name

    def run(self, preset: str | None = None, inputs: Inputs | None = None, *, n_jobs: int = 1, progress="lines"):
        """Compute the study with ``preset`` (default: :meth:`default`); returns where its results lie."""
        return self.compute(self.preset(preset), inputs or Inputs(), n_jobs, progress)


def _portable(*paths) -> str:
    from attnlimits.infra.provenance import portable

    return ", ".join(portable(str(p)) for p in paths)


# ----------------------------------------------------------------------------------------------------------------
# the presets each study accepts, and its default
# ----------------------------------------------------------------------------------------------------------------
def _experiments_presets() -> list[str]:
    from attnlimits import experiments

    return list(experiments.PRESETS)


def _book_preset() -> str:
    from attnlimits import experiments

    return experiments.book_preset().name


def _training_presets() -> list[str]:
    from attnlimits.studies.training import study

    return list(study.PRESETS)


def _alternatives_presets() -> list[str]:
    from attnlimits.studies.alternatives import study

    return list(study.PRESETS)


def _long_context_presets() -> list[str]:
    from attnlimits.studies.long_context import study

    return list(study.PRESETS)


def _chapter_preset() -> str:
    """``$ATTNLIMITS_PRESET``, else ``reduced``: the preset chapters 32 and 33 read, valid for both studies."""
    name = os.environ.get(PRESET_VARIABLE, "reduced")
    allowed = [n for n in _training_presets() if n in _alternatives_presets()]
    if name not in allowed:
        raise ValueError(f"{PRESET_VARIABLE}: must be one of {allowed}, got {name!r}")
    return name


def _reduced() -> str:
    return "reduced"


# ----------------------------------------------------------------------------------------------------------------
# the studies
# ----------------------------------------------------------------------------------------------------------------
def _experiments(preset: str, inputs: Inputs, n_jobs: int, progress) -> str:
    """Algorithms 1-5 with and without the attention sink, from one capture of the windows (taken only when an
    entry is missing), the second run borrowing Algorithm 5 and the sink weights from the first."""
    from attnlimits import experiments

    m, t, p = inputs.model, inputs.text, experiments.get_preset(preset)
    caps = functools.cache(lambda: experiments.capture_windows(m, t, length=p.max_length, count=p.windows))
    opts = dict(captures=caps, n_jobs=n_jobs, progress=progress)
    res = experiments.results(m, t, p, **opts)
    experiments.results(m, t, p, exclude_sink=True, shared=res, **opts)
    return _portable(*(experiments.results_folder(m, t, p, exclude_sink=sink) for sink in (False, True)))


def _training(preset: str, inputs: Inputs, n_jobs: int, progress) -> str:
    from attnlimits.infra import provenance
    from attnlimits.studies import training

    training.results(preset, progress=bool(progress), n_jobs=n_jobs)
    return _portable(provenance.results_root() / "training" / preset)


def _alternatives(preset: str, inputs: Inputs, n_jobs: int, progress) -> str:
    from attnlimits.infra import provenance
    from attnlimits.studies import alternatives

    alternatives.results(preset=preset, progress=progress)
    alternatives.results(inputs.model, inputs.text, preset, progress=progress)
    recent = alternatives.RECENT_PRESETS[preset]  # chapter 36: the normalisers proposed after the paper
    alternatives.results(inputs.model, inputs.text, recent, progress=progress)
    return _portable(provenance.results_root() / "alternatives")


def _models(preset: str, inputs: Inputs, n_jobs: int, progress) -> str:
    from attnlimits.studies import several_models

    several_models.results(preset, progress=progress, n_jobs=n_jobs)
    return _portable(several_models.manifest_path(preset))


def _long_context(preset: str, inputs: Inputs, n_jobs: int, progress) -> str:
    from attnlimits.studies import long_context

    runs = long_context.book_results(preset, progress=progress)
    models = ", ".join(r.label for r in runs.results) or "no model"
    return models + "".join(f"; not run: {why}" for why in runs.not_run)


def _claims(preset: str, inputs: Inputs, n_jobs: int, progress) -> str:
    """The introduction's claims table from every check's verdict and the experiments' results of ``preset``
    (computed first when missing: ``n_jobs`` and ``progress`` change only how)."""
    from attnlimits import experiments
    from attnlimits.reporting import book_claims as r

    res = experiments.results(
        inputs.model, inputs.text, experiments.get_preset(preset), n_jobs=n_jobs, progress=progress
    )
    return _portable(r.write_include(r.claims(r.check_verdicts(), res)))


#: The pipeline, in the order it runs.
STUDIES = {
    s.name: s
    for s in (
        Study(
            "experiments",
            "Algorithms 1-5 on the default model and text, with and without the attention sink (chapters 21-25)",
            _experiments_presets,
            _book_preset,
            _experiments,
        ),
        Study(
            "training",
            "training a selection task at low temperature, the paper's normalisers (chapter 32)",
            _training_presets,
            _chapter_preset,
            _training,
        ),
        Study(
            "alternatives",
            "the alternative normalisers on synthetic heads and on the model's heads: the paper's (chapter 33) and "
            "those proposed after it (chapter 36)",
            _alternatives_presets,
            _chapter_preset,
            _alternatives,
        ),
        Study(
            "models",
            "Algorithms 1-5 on every model that loads and on its four controls (chapter 34)",
            _experiments_presets,
            _reduced,
            _models,
        ),
        Study(
            "long-context",
            "both offline models from 1,024 tokens up (reduced: to 8,192; full: the whole context) on a sample of "
            "query rows (chapter 35)",
            _long_context_presets,
            _reduced,
            _long_context,
        ),
        Study(
            "claims",
            "the introduction's claims table (chapters/_generated/claims.md) from every check's verdict and the "
            "experiments' results",
            _experiments_presets,
            _book_preset,
            _claims,
        ),
    )
}


def select(names: Sequence[str] | None = None) -> list[Study]:
    """The studies named (every study when ``names`` is None), in the pipeline's order, each once; ValueError
    naming an unknown study and the known ones."""
    if names is None:
        return list(STUDIES.values())
    unknown = [n for n in names if n not in STUDIES]
    if unknown:
        raise ValueError(f"no study {', '.join(map(repr, unknown))}; the studies are {', '.join(STUDIES)}")
    return [s for name, s in STUDIES.items() if name in names]
