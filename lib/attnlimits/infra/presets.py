"""One preset system for every study: a frozen dataclass per study, registered by name.

Every study (:mod:`attnlimits.experiments`, :mod:`attnlimits.studies.alternatives`, :mod:`attnlimits.studies.training`,
and the
several-models comparison that runs the experiments) describes its grids by a subclass of :class:`StudyPreset`
and keeps its presets in a :class:`Registry`. The names mean the same thing everywhere they apply:

- ``paper``   the paper's grids (Algorithms 1-5 at L up to 1,024 on 4 windows);
- ``reduced`` what the book's build computes where the paper's grids would not fit its time (the default of the
  Beyond chapters 32-34);
- ``quick``   a tiny grid for tests and smoke runs (seconds);
- ``full``    the larger grids of the Beyond chapters, for a longer run outside the book's build.

A preset is plain data: :meth:`StudyPreset.as_dict` is what the results cache keys on and what
``provenance.json`` records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["NAMES", "Registry", "StudyPreset"]

#: The preset names, and what each means in every study that has it.
NAMES = {
    "paper": "the paper's grids",
    "reduced": "the grids the book's build computes",
    "quick": "a tiny grid for tests and smoke runs",
    "full": "larger grids, for a run outside the book's build",
}


@dataclass(frozen=True)
class StudyPreset:
    """Base of every study's preset: a name and the grids (fields of the subclass)."""

    name: str

    def as_dict(self) -> dict:
        """The preset as plain JSON-able data (what the results cache keys on)."""
        return dataclasses.asdict(self)

    def replace(self, **changes) -> StudyPreset:
        """A copy with some fields changed (keep ``name`` unless the grids still mean the named preset)."""
        return dataclasses.replace(self, **changes)


P = TypeVar("P", bound=StudyPreset)


class Registry(Mapping[str, P], Generic[P]):
    """A study's presets by name; :meth:`get` accepts a name or a preset of the study's class."""

    def __init__(self, study: str, kind: type[P], *presets: P):
        unknown = [p.name for p in presets if p.name not in NAMES]
        if unknown:
            raise ValueError(f"{study}: preset names must be among {list(NAMES)}, got {unknown}")
        if any(not isinstance(p, kind) for p in presets):
            raise TypeError(f"{study}: every preset must be a {kind.__name__}")
        self.study, self.kind = study, kind
        self._presets = {p.name: p for p in presets}

    def __getitem__(self, name: str) -> P:
        return self._presets[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._presets)

    def __len__(self) -> int:
        return len(self._presets)

    def get(self, preset: str | P) -> P:  # type: ignore[override]
        """The preset named ``preset``, or ``preset`` itself when it already is one; a clear error otherwise."""
        if isinstance(preset, self.kind):
            return preset
        if isinstance(preset, str) and preset in self._presets:
            return self._presets[preset]
        raise ValueError(
            f"preset: must be one of the {self.study} presets {list(self._presets)} or a {self.kind.__name__}, "
            f"got {preset!r}"
        )
