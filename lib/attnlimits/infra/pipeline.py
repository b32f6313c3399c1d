"""The book's results pipeline as data: a :class:`Study` is one entry of it, made of independent :class:`Part` s and
a step that collects what they computed.

Each study declares its own entry (``STUDY`` in the ``pipeline`` module beside its code: the experiments', each
study package's, the claims table's); :mod:`attnlimits.reporting.book_results` puts them in order and runs them
(``attnlimits results``, ``make results``). A declaration is kept out of its study's results-cache key: the study
does not import it, it imports the study.

The parts and collect steps receive ``inputs``, the default model and text of the run (``inputs.model``,
``inputs.text``, each loaded on first use: :class:`attnlimits.reporting.book_results.Inputs`, which lives above
the models room that loads them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from attnlimits.infra.shipping import Shard

__all__ = ["Part", "Study", "one_part", "places", "where"]


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
    ``parts``), what is left to compute, and where the study's results lie. ``shards(preset)``: what the book
    ships of it (:class:`attnlimits.infra.shipping.Shard` s, written from the results cache after the collect
    step); None for a study that ships nothing yet (its chapters read the results cache)."""

    name: str
    description: str
    presets: Callable[[], Sequence[str]]
    default: Callable[[], str]
    parts: Callable[[str], Sequence[Part]]
    collect: Callable[[str, list, Any, int, bool | str], str]
    shards: Callable[[str], Sequence[Shard]] | None = None

    def preset(self, name: str | None = None) -> str:
        """``name`` when the study has that preset, the study's default when ``name`` is None; ValueError else."""
        if name is None:
            return self.default()
        if name not in self.presets():
            raise ValueError(f"{self.name} has no preset {name!r} (its presets: {', '.join(self.presets())})")
        return name


def one_part(label: str, seconds: float, fn: Callable) -> Callable[[str], list[Part]]:
    """``parts`` of a study computed by ``fn`` alone (its value: where the results lie, for :func:`where`)."""
    return lambda preset: [Part(label, seconds, fn)]


def where(preset: str, values: list, inputs, n_jobs: int, progress) -> str:
    """The collect step of a study whose parts say where their results lie."""
    return "; ".join(values)


def places(*paths) -> str:
    """The paths, comma-separated, as :func:`attnlimits.infra.provenance.portable` names them (what a part says
    about where its results lie)."""
    from attnlimits.infra.provenance import portable

    return ", ".join(portable(str(p)) for p in paths)
