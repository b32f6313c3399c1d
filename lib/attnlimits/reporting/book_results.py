"""The book's results pipeline as data: every study whose numbers the chapters read from the results cache, in the
order ``attnlimits results`` (and so ``make results``) reports them.

Each :class:`Study` has a name, a one-line description, the presets it accepts, the preset it computes by default
(what the book's build reads), its independent :class:`Part` s and the step that collects what they computed (and
computes what needs another study's results: the claims table reads the experiments', so it comes after them).
A part computes its entries into the cache, or reads them back when the cache is current (a no-op then).

:func:`run` computes the parts of every chosen study first, longest first, in worker processes when given more
than one job (each part loads its own model and text, and runs on its share of the cores), then each study's
collect step in the pipeline's order in this process. The parts of one process share one :class:`Inputs`: the
default model and text, loaded once on first use. The tables are those of loading them anew for each study (a
capture leaves the model as it found it), so they do not depend on the number of jobs.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["PRESET_VARIABLE", "STUDIES", "Inputs", "Part", "Study", "run", "select"]

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
class Part:
    """An independent piece of a study: ``fn(preset, *args, inputs=, n_jobs=, progress=)``, a module-level function
    that computes its entries into the results cache (or reads them back) and returns what the study's collect
    step needs. It reads the default model and text from ``inputs`` and loads anything else itself, so it runs the
    same in another process. ``seconds``: about what it takes on 2 cores from an empty cache with the book's
    presets, used only to start the longest parts first."""

    label: str
    seconds: float
    fn: Callable
    args: tuple = ()


@dataclass(frozen=True)
class Study:
    """One study of the pipeline. ``presets()``: the names it accepts; ``default()``: the preset the book's build
    computes (a ValueError naming the environment variable when that names no preset); ``parts(preset)``: its
    :class:`Part` s; ``collect(preset, values, inputs, n_jobs, progress)``: from the parts' values (in the order of
    ``parts``), what is left to compute, and where the study's results lie."""

    name: str
    description: str
    presets: Callable[[], Sequence[str]]
    default: Callable[[], str]
    parts: Callable[[str], Sequence[Part]]
    collect: Callable[[str, list, Inputs, int, bool | str], str]

    def preset(self, name: str | None = None) -> str:
        """``name`` when the study has that preset, the study's default when ``name`` is None; ValueError else."""
        if name is None:
            return self.default()
        if name not in self.presets():
            raise ValueError(f"{self.name} has no preset {name!r} (its presets: {', '.join(self.presets())})")
        return name

    def run(self, preset: str | None = None, inputs: Inputs | None = None, *, n_jobs: int = 1, progress="lines"):
        """Compute the study with ``preset`` (default: :meth:`default`) in this process; returns where its results
        lie."""
        preset, inputs = self.preset(preset), inputs or Inputs()
        values = [p.fn(preset, *p.args, inputs=inputs, n_jobs=n_jobs, progress=progress) for p in self.parts(preset)]
        return self.collect(preset, values, inputs, n_jobs, progress)


def run(chosen: Sequence[tuple[Study, str]], *, n_jobs: int = 1, progress="lines", say=None) -> list[tuple]:
    """Compute the studies of ``chosen`` (``(study, preset)`` pairs, in the pipeline's order): every part first,
    longest first, then each study's collect step in order. Returns ``(study, preset, where, seconds)`` per study,
    its seconds those of its parts (summed) and of its collect step.

    ``n_jobs`` (an integer >= 1, or -1 for one per core): with more than one and more than one part, the parts run
    in that many worker processes (joblib's loky), each with its share of the cores' threads and one job inside
    (the windows one after the other); one part alone runs here with ``n_jobs`` workers for its windows. The
    results do not depend on it. ``say(line)`` is told when each part ends (with ``progress``)."""
    from attnlimits.infra.progress import check_jobs

    n_jobs = check_jobs(n_jobs)
    inputs = Inputs()
    items = [(i, preset, part) for i, (study, preset) in enumerate(chosen) for part in study.parts(preset)]
    order = sorted(range(len(items)), key=lambda k: -items[k][2].seconds)  # stable: the pipeline's order among equals
    got = dict(zip(order, _run_parts([items[k] for k in order], inputs, n_jobs, progress, say), strict=True))
    out = []
    for i, (study, preset) in enumerate(chosen):
        mine = [k for k, item in enumerate(items) if item[0] == i]
        t0 = time.perf_counter()
        where = study.collect(preset, [got[k][0] for k in mine], inputs, n_jobs, progress)
        out.append((study, preset, where, sum(got[k][1] for k in mine) + time.perf_counter() - t0))
    return out


def _run_parts(items, inputs: Inputs, n_jobs: int, progress, say) -> list[tuple]:
    """``(value, seconds)`` of each part of ``items`` (``(study index, preset, part)``), started in that order:
    here with ``n_jobs`` jobs inside when there is one job or one part, else in ``n_jobs`` worker processes."""
    if n_jobs == 1 or len(items) <= 1:
        done = []
        for _, preset, part in items:
            done.append(_timed_part(part, preset, inputs, n_jobs, progress))
            _said(say, progress, part, preset, done[-1][1])
        return done
    import joblib

    env = {k: v for k, v in os.environ.items() if k.startswith(_OWN_VARIABLES)}
    threads = max(1, joblib.cpu_count() // n_jobs)
    task = joblib.delayed(_in_worker)
    tasks = (task(k, part, preset, env, threads, progress) for k, (_, preset, part) in enumerate(items))
    workers = min(n_jobs, len(items))
    parallel = joblib.Parallel(n_jobs=workers, backend="loky", batch_size=1, return_as="generator_unordered")
    done = [None] * len(items)
    for k, value, took in parallel(tasks):
        done[k] = (value, took)
        _said(say, progress, items[k][2], items[k][1], took)
    return done


#: The environment variables a worker process takes from the pipeline's at each part (a reused worker was started
#: with the environment of an earlier run): the results cache's, the presets' and the library's others.
_OWN_VARIABLES = ("ATTNLIMITS_",)


def _in_worker(k: int, part: Part, preset: str, env: dict, threads: int, progress) -> tuple:
    """A part in a worker process: with the pipeline's ``ATTNLIMITS_*`` variables, ``threads`` torch threads, its
    own :class:`Inputs` and one job; ``(k, value, seconds)``."""
    import torch

    for name in [v for v in os.environ if v.startswith(_OWN_VARIABLES) and v not in env]:
        del os.environ[name]
    os.environ.update(env)
    torch.set_num_threads(threads)
    return (k, *_timed_part(part, preset, Inputs(), 1, progress))


def _timed_part(part: Part, preset: str, inputs: Inputs, n_jobs: int, progress) -> tuple:
    """``(value, seconds)`` of one part; an exception it raises names the part."""
    t0 = time.perf_counter()
    try:
        value = part.fn(preset, *part.args, inputs=inputs, n_jobs=n_jobs, progress=progress)
    except Exception as err:
        err.add_note(f"in the part {part.label!r} ({preset}) of the results pipeline")
        raise
    return value, time.perf_counter() - t0


def _said(say, progress, part: Part, preset: str, seconds: float) -> None:
    if say is not None and progress:
        say(f"[attnlimits] results: {part.label} ({preset}) done in {seconds:.1f} s")


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
def _experiments(preset: str, *, inputs: Inputs, n_jobs: int, progress) -> str:
    """Algorithms 1-5 with and without the attention sink, from one capture of the windows (taken only when an
    entry is missing), the second run borrowing Algorithm 5 and the sink weights from the first."""
    from attnlimits import experiments

    m, t, p = inputs.model, inputs.text, experiments.get_preset(preset)
    caps = functools.cache(lambda: experiments.capture_windows(m, t, length=p.max_length, count=p.windows))
    opts = dict(captures=caps, n_jobs=n_jobs, progress=progress)
    res = experiments.results(m, t, p, **opts)
    experiments.results(m, t, p, exclude_sink=True, shared=res, **opts)
    return _portable(*(experiments.results_folder(m, t, p, exclude_sink=sink) for sink in (False, True)))


def _training(preset: str, *, inputs: Inputs, n_jobs: int, progress) -> str:
    from attnlimits.infra import provenance
    from attnlimits.studies import training

    training.results(preset, progress=bool(progress), n_jobs=n_jobs)
    return _portable(provenance.results_root() / "training" / preset)


def _alternatives(preset: str, *, inputs: Inputs, n_jobs: int, progress) -> str:
    from attnlimits.infra import provenance
    from attnlimits.studies import alternatives

    alternatives.results(preset=preset, progress=progress)
    alternatives.results(inputs.model, inputs.text, preset, progress=progress)
    recent = alternatives.RECENT_PRESETS[preset]  # chapter 36: the normalisers proposed after the paper
    alternatives.results(inputs.model, inputs.text, recent, progress=progress)
    return _portable(provenance.results_root() / "alternatives")


def _model_parts(preset: str) -> list[Part]:
    """One part per model of chapter 34 (with its controls), none when the manifest of ``preset`` is current."""
    from attnlimits.studies import several_models

    try:
        several_models.SeveralModels.load(_results_root(), preset)
        return []
    except (FileNotFoundError, ValueError, KeyError):
        return [Part(f"models: {name}", _SECONDS.get(name, 0.0), _model, (name,)) for name in several_models.MODELS]


def _model(preset: str, name: str, *, inputs: Inputs, n_jobs: int, progress) -> list[dict]:
    from attnlimits.studies import several_models

    return several_models.model_entries(name, preset, text=inputs.text, progress=progress, n_jobs=n_jobs)


def _collect_models(preset: str, values: list, inputs: Inputs, n_jobs: int, progress) -> str:
    """The manifest of the models' entries (written when the parts computed them), read back."""
    from attnlimits.studies import several_models

    if values:
        entries = [e for model in values for e in model]
        seconds = sum(e.get("load_seconds", 0) + e.get("run_seconds", 0) for e in entries)
        several_models.write_manifest(entries, preset, text=inputs.text, seconds=seconds)
    several_models.results(preset, progress=progress, n_jobs=n_jobs)
    return _portable(several_models.manifest_path(preset))


def _long_context(preset: str, *, inputs: Inputs, n_jobs: int, progress) -> str:
    from attnlimits.studies import long_context

    runs = long_context.book_results(preset, progress=progress)
    models = ", ".join(r.label for r in runs.results) or "no model"
    return models + "".join(f"; not run: {why}" for why in runs.not_run)


def _checks(preset: str, *, inputs: Inputs, n_jobs: int, progress) -> None:
    """Every theory check's verdict, into the results cache (what the claims table reads)."""
    from attnlimits.reporting import book_claims

    book_claims.check_verdicts()


def _claims(preset: str, values: list, inputs: Inputs, n_jobs: int, progress) -> str:
    """The introduction's claims table from every check's verdict and the experiments' results of ``preset``
    (computed first when missing: ``n_jobs`` and ``progress`` change only how)."""
    from attnlimits import experiments
    from attnlimits.reporting import book_claims as r

    res = experiments.results(
        inputs.model, inputs.text, experiments.get_preset(preset), n_jobs=n_jobs, progress=progress
    )
    return _portable(r.write_include(r.claims(r.check_verdicts(), res)))


def _results_root():
    from attnlimits.infra import provenance

    return provenance.results_root()


def _one_part(fn, seconds_key: str):
    """``parts`` of a study computed by ``fn`` alone (its value: where the results lie)."""
    return lambda preset: [Part(seconds_key, _SECONDS[seconds_key], fn)]


def _where(preset: str, values: list, inputs: Inputs, n_jobs: int, progress) -> str:
    """The collect step of a study whose parts say where their results lie."""
    return "; ".join(values)


#: About what each part takes on 2 cores from an empty cache, in seconds (one job in each of 2 processes, the book's
#: presets; measured with `make results`): they only order the parts, longest first.
_SECONDS = {
    "experiments": 1000.0,
    "SmolLM2-135M": 800.0,
    "Gemma-3-270M": 380.0,
    "long-context": 200.0,
    "alternatives": 100.0,
    "training": 60.0,
    "checks": 20.0,
}

#: The pipeline, in the order its studies are reported (and their collect steps run).
STUDIES = {
    s.name: s
    for s in (
        Study(
            "experiments",
            "Algorithms 1-5 on the default model and text, with and without the attention sink (chapters 21-25)",
            _experiments_presets,
            _book_preset,
            _one_part(_experiments, "experiments"),
            _where,
        ),
        Study(
            "training",
            "training a selection task at low temperature, the paper's normalisers (chapter 32)",
            _training_presets,
            _chapter_preset,
            _one_part(_training, "training"),
            _where,
        ),
        Study(
            "alternatives",
            "the alternative normalisers on synthetic heads and on the model's heads: the paper's (chapter 33) and "
            "those proposed after it (chapter 36)",
            _alternatives_presets,
            _chapter_preset,
            _one_part(_alternatives, "alternatives"),
            _where,
        ),
        Study(
            "models",
            "Algorithms 1-5 on every model that loads and on its four controls (chapter 34)",
            _experiments_presets,
            _reduced,
            _model_parts,
            _collect_models,
        ),
        Study(
            "long-context",
            "both offline models from 1,024 tokens up (reduced: to 8,192; full: the whole context) on a sample of "
            "query rows (chapter 35)",
            _long_context_presets,
            _reduced,
            _one_part(_long_context, "long-context"),
            _where,
        ),
        Study(
            "claims",
            "the introduction's claims table (chapters/_generated/claims.md) from every check's verdict and the "
            "experiments' results",
            _experiments_presets,
            _book_preset,
            _one_part(_checks, "checks"),
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
