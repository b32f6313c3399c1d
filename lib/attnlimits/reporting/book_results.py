"""The book's results pipeline run: every study whose numbers the chapters read from the results cache, in the
order ``attnlimits results`` (and so ``make results``) reports them (:data:`STUDIES`).

Each study declares its own place in the pipeline (``STUDY``, an :class:`attnlimits.infra.pipeline.Study`, in the
``pipeline`` module beside its code): its presets, the preset it computes by default (what the book's build reads),
its independent parts and the step that collects what they computed (and computes what needs another study's
results: the claims table reads the experiments', so it comes after them). A part computes its entries into the
cache, or reads them back when the cache is current (a no-op then). Adding a study is one package with such a
declaration and one line in :data:`STUDIES`.

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
from collections.abc import Sequence

import torch

from attnlimits import models
from attnlimits.experiments import pipeline as experiments_pipeline
from attnlimits.infra.pipeline import Part, Study
from attnlimits.infra.progress import check_jobs
from attnlimits.models import texts
from attnlimits.reporting import claims_pipeline
from attnlimits.studies.alternatives import pipeline as alternatives_pipeline
from attnlimits.studies.long_context import pipeline as long_context_pipeline
from attnlimits.studies.several_models import pipeline as several_models_pipeline
from attnlimits.studies.training import pipeline as training_pipeline

__all__ = ["STUDIES", "Inputs", "most_influential", "run", "select", "shards"]

#: The pipeline, in the order its studies are reported (and their collect steps run): each study's own declaration.
STUDIES = {
    s.name: s
    for s in (
        experiments_pipeline.STUDY,
        training_pipeline.STUDY,
        alternatives_pipeline.STUDY,
        several_models_pipeline.STUDY,
        long_context_pipeline.STUDY,
        claims_pipeline.STUDY,
    )
}


class Inputs:
    """The default model and text (:func:`attnlimits.models.load`, :func:`attnlimits.models.texts.load`), each
    loaded on first use and then shared by every study of one run. It lives here rather than beside
    :class:`~attnlimits.infra.pipeline.Study`: loading them needs :mod:`attnlimits.models`, a room above
    :mod:`attnlimits.infra`."""

    @functools.cached_property
    def model(self):
        return models.load()

    @functools.cached_property
    def text(self):
        return texts.load()


def run(
    chosen: Sequence[tuple[Study, str]], *, n_jobs: int = 1, progress="lines", say=None, inputs: Inputs | None = None
) -> list[tuple]:
    """Compute the studies of ``chosen`` (``(study, preset)`` pairs, in the pipeline's order): every part first,
    longest first, then each study's collect step in order. Returns ``(study, preset, where, seconds)`` per study,
    its seconds those of its parts (summed) and of its collect step.

    ``n_jobs`` (an integer >= 1, or -1 for one per core): with more than one and more than one part, the parts run
    in that many worker processes (joblib's loky), each with its share of the cores' threads and one job inside
    (the windows one after the other); one part alone runs here with ``n_jobs`` workers for its windows. The
    results do not depend on it. ``say(line)`` is told when each part ends (with ``progress``). ``inputs``: the
    default model and text of the parts run here and of the collect steps (a new :class:`Inputs` when None)."""
    n_jobs = check_jobs(n_jobs)
    inputs = Inputs() if inputs is None else inputs
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


def shards(chosen: Sequence[tuple[Study, str]] | None = None) -> list:
    """The shards the book ships of the studies of ``chosen`` (``(study, preset)`` pairs; None: every study at its
    default preset), in the pipeline's order (:attr:`attnlimits.infra.pipeline.Study.shards`)."""
    chosen = [(s, s.preset()) for s in STUDIES.values()] if chosen is None else chosen
    return [shard for study, preset in chosen if study.shards is not None for shard in study.shards(preset)]


def most_influential() -> list[str]:
    """The shards every audit recomputes beside its random draw: the window whose leaving out moves an experimental
    claim's value the most, in units of that claim's interval width (on the shipped run of the default text, with
    token 0); ``[]`` where it is not shipped."""
    from attnlimits.experiments import paper_claims, shipped
    from attnlimits.experiments.presets import book_preset

    p = book_preset()
    res = shipped.load(shipped.DEFAULT_TEXT, p)
    if res is None or len(res.windows) < 3:
        return []
    base = paper_claims.claims(res).set_index("key")
    width = (base.value_hi - base.value_lo).abs().where(lambda w: w > 0)
    influence = {}
    for window in res.windows:
        left = paper_claims.claims(res.without(window)).set_index("key")
        moved = ((left.value - base.value).abs() / width).dropna()
        influence[window] = float(moved.max()) if len(moved) else 0.0
    return [shipped.shard_name(shipped.DEFAULT_TEXT, p, False, max(influence, key=influence.get))]


def select(names: Sequence[str] | None = None) -> list[Study]:
    """The studies named (every study when ``names`` is None), in the pipeline's order, each once; ValueError
    naming an unknown study and the known ones."""
    if names is None:
        return list(STUDIES.values())
    unknown = [n for n in names if n not in STUDIES]
    if unknown:
        raise ValueError(f"no study {', '.join(map(repr, unknown))}; the studies are {', '.join(STUDIES)}")
    return [s for name, s in STUDIES.items() if name in names]
