"""attnlimits: the library behind the book "The Limits of Softmax Attention".

Chapters do ``import attnlimits as al`` and reach the library by its rooms, each a layer that imports only the
rooms below it (the results cache keys a study on the modules it imports, so the layering keeps a study's key to
what it computes with):

============  ======================================================================================
``core``      the paper's objects in torch, no I/O: normalisers, selection, bounds, per-row kernels
``infra``     cache, presets, provenance, statistics, progress, plotting theme
``models``    where attention comes from: loading, texts, the capture, arrays, TransformerLens
``theory``    Part 1 (chapters 11-15): synthetic heads, sweeps, the registry of numerical checks
``experiments`` Part 2 (chapters 21-25): Algorithms 1-5, their presets, figures and claims
``studies``   Part 3 (chapters 32-35): training, alternative normalisers, several models, long context
``reporting`` across studies: the book's claims table and the one-page report of a run
``cli``       the ``attnlimits`` command
============  ======================================================================================

The paper's objects are also at the top level (``al.normalizers``, ``al.selection``, ``al.bounds``) and so are the
texts (``al.texts``). Rooms and modules are imported on first use, so importing the package stays fast and a
chapter that never touches a pretrained model never imports transformers. The module paths of earlier releases
(``attnlimits.training``, ``attnlimits.reproduction``...) still import, with a DeprecationWarning naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__version__ = "0.1.0"

#: The rooms, from the bottom up (each imports only rooms before it in this tuple).
ROOMS = ("core", "infra", "models", "theory", "experiments", "studies", "reporting", "cli")
#: Short names for the modules a reader calls most.
SHORTCUTS = {
    "normalizers": "attnlimits.core.normalizers",
    "selection": "attnlimits.core.selection",
    "bounds": "attnlimits.core.bounds",
    "texts": "attnlimits.models.texts",
}
#: The module paths of earlier releases and where each module lives now (imported with a DeprecationWarning).
MOVED = {
    "attnlimits.rowstats": "attnlimits.core.rowstats",
    "attnlimits.validation": "attnlimits.core.validation",
    "attnlimits.cache": "attnlimits.infra.cache",
    "attnlimits.presets": "attnlimits.infra.presets",
    "attnlimits.provenance": "attnlimits.infra.provenance",
    "attnlimits.uncertainty": "attnlimits.infra.statistics",
    "attnlimits.profiling": "attnlimits.infra.profiling",
    "attnlimits.plotting": "attnlimits.infra.plotting",
    "attnlimits.lens": "attnlimits.models.lens",
    "attnlimits.experiments.windows": "attnlimits.models.windows",
    "attnlimits.experiments.arrays": "attnlimits.models.arrays",
    "attnlimits.synthetic": "attnlimits.theory.synthetic",
    "attnlimits.sweeps": "attnlimits.theory.sweeps",
    "attnlimits.checks": "attnlimits.theory.checks",
    "attnlimits.figures": "attnlimits.experiments.figures",
    "attnlimits.reproduction": "attnlimits.experiments.paper_claims",
    "attnlimits.training": "attnlimits.studies.training",
    "attnlimits.alternatives": "attnlimits.studies.alternatives",
    "attnlimits.alternatives_report": "attnlimits.studies.alternatives.report",
    "attnlimits.comparison": "attnlimits.studies.several_models",
    "attnlimits.longcontext": "attnlimits.studies.long_context",
    "attnlimits.report": "attnlimits.reporting.book_claims",
    "attnlimits.runreport": "attnlimits.reporting.run_page",
}
__all__ = [*ROOMS, *SHORTCUTS]


def _target(name: str) -> str | None:
    """The current module of an old path (``attnlimits.checks.registry`` -> ``attnlimits.theory.checks.registry``)."""
    for old in sorted(MOVED, key=len, reverse=True):
        if name == old or name.startswith(old + "."):
            return MOVED[old] + name[len(old) :]
    return SHORTCUTS.get(name.removeprefix("attnlimits."))


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as the module at its new path (the same module object, not a copy)."""

    def find_spec(self, name, path=None, target=None):
        new = _target(name) if name.startswith("attnlimits.") and name not in sys.modules else None
        return importlib.util.spec_from_loader(name, self) if new else None

    def create_module(self, spec):
        new = _target(spec.name)
        if spec.name.removeprefix("attnlimits.") not in SHORTCUTS:
            warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        sys.modules[spec.name] = module
        return module

    def exec_module(self, module):
        pass  # the module at the new path has run already


sys.meta_path.append(_Alias())


def __getattr__(name: str):
    if name in ROOMS:
        return importlib.import_module(f"attnlimits.{name}")
    if name in SHORTCUTS:
        return importlib.import_module(SHORTCUTS[name])
    if f"attnlimits.{name}" in MOVED:
        return importlib.import_module(f"attnlimits.{name}")  # through _Alias: warns once
    raise AttributeError(f"module 'attnlimits' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(__all__))


def lazy(package: str, modules=(), names: dict[str, str] | None = None):
    """``__getattr__`` and ``__dir__`` for a package's ``__init__`` that imports nothing itself: its submodules
    ``modules`` and its public ``names`` (name -> the module defining it) are imported on first use.

    A package's ``__init__`` runs whenever one of its modules is imported, so the results cache counts it in every
    study's code (:func:`attnlimits.infra.cache.dependencies`); naming instead of importing keeps a study's key to
    the modules it computes with."""
    names = dict(names or {})

    def getattr_(name: str):
        if name in modules:
            return importlib.import_module(f"{package}.{name}")
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def dir_():
        return sorted(set(sys.modules[package].__dict__) | set(modules) | set(names))

    return getattr_, dir_
