"""The experiments' place in the book's results pipeline (:mod:`attnlimits.reporting.book_results`): Algorithms 1-5
on the shipped model, window by window, on the default text with and without the attention sink and on the second
text, at :func:`~attnlimits.experiments.book_preset`; what ships of them (:mod:`attnlimits.experiments.shipped`).
Outside the experiments' results-cache key: nothing the experiments compute with imports this module."""

from __future__ import annotations

import functools

from attnlimits import experiments
from attnlimits.infra.pipeline import Part, Study, places

__all__ = ["STUDY", "compute_windows", "window_shard"]


def _presets() -> list[str]:
    from attnlimits.experiments.presets import PRESETS

    return list(PRESETS)


def _default() -> str:
    from attnlimits.experiments.presets import book_preset

    return book_preset().name


def _parts(preset: str) -> list[Part]:
    """One part per window of the design (:data:`attnlimits.experiments.shipped.RUNS`): on the default text with
    and without token 0 from one capture; on the second text where it can be read here."""
    from attnlimits.experiments import shipped

    p = experiments.get_preset(preset)
    out = [Part(f"window {w} of {p.windows}", 90.0, _window_part, (w, None)) for w in range(p.windows)]
    if shipped.readable(shipped.SECOND_TEXT):
        out += [
            Part(f"window {w} of {p.windows}, {shipped.SECOND_TEXT}", 60.0, _window_part, (w, shipped.SECOND_TEXT))
            for w in range(p.windows)
        ]
    return out


def _window_part(preset: str, window: int, text: str | None, *, inputs, n_jobs: int, progress) -> str:
    folders = window_shard(preset, window, text=text, no_sink=text is None, progress=False)
    return places(*folders)


def _collect(preset: str, values: list, inputs, n_jobs: int, progress) -> str:
    """Where the windows' entries lie: how many, and the first's folders."""
    return f"{len(values)} windows computed, the first in {values[0]}"


def _shards(preset: str):
    from attnlimits.experiments import shipped

    return shipped.shards(preset)


def window_shard(preset, window: int, *, text: str | None = None, no_sink: bool = True, progress=None) -> list[str]:
    """One window of the experiments' design, computed into the results cache (or read back when current): the
    default model on ``text`` (a name of :func:`attnlimits.models.texts.load`; None: the default text), with the
    attention sink and, with ``no_sink``, without it, from one capture of the window, the second run borrowing
    Algorithm 5 and the sink weights from the first. Loads its own model and text, so it runs the same in a worker
    process. Returns the entries' folders."""
    from attnlimits.experiments import shipped

    m, t = shipped.model(), shipped.text(text or shipped.DEFAULT_TEXT)
    p = experiments.get_preset(preset)
    caps = functools.cache(
        lambda: experiments.capture_windows(m, t, length=p.max_length, count=1, first_window=window, total=p.windows)
    )
    opts = {"captures": caps, "progress": progress, "precision": shipped.PRECISION}
    res = experiments.window_results(m, t, p, window, **opts)
    folders = [experiments.window_folder(m, t, p, window, precision=shipped.PRECISION)]
    if no_sink:
        experiments.window_results(m, t, p, window, exclude_sink=True, shared=res, **opts)
        folders.append(experiments.window_folder(m, t, p, window, exclude_sink=True, precision=shipped.PRECISION))
    return [str(f) for f in folders]


def compute_windows(preset, *, text: str | None = None, no_sink: bool = True, windows=None, n_jobs: int = -1):
    """:func:`window_shard` for every window of ``preset`` (or the window numbers ``windows``), in ``n_jobs``
    worker processes of one thread each (-1: one per core), the later windows first; returns their folders."""
    import joblib

    from attnlimits.infra.progress import check_jobs

    p = experiments.get_preset(preset)
    chosen = list(range(p.windows)) if windows is None else list(windows)
    jobs = min(check_jobs(n_jobs), len(chosen))
    task = joblib.delayed(_one_thread_shard)
    done = joblib.Parallel(n_jobs=jobs, backend="loky", batch_size=1)(
        task(p, w, text, no_sink) for w in reversed(chosen)
    )
    return [f for folders in done for f in folders]


def _one_thread_shard(p, window: int, text, no_sink: bool) -> list[str]:
    import torch

    torch.set_num_threads(1)
    return window_shard(p, window, text=text, no_sink=no_sink, progress=False)


STUDY = Study(
    "experiments",
    "Algorithms 1-5 on the default model and text, with and without the attention sink (chapters 21-25)",
    _presets,
    _default,
    _parts,
    _collect,
    _shards,
)
