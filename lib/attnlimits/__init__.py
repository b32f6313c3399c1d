"""attnlimits: the library behind the book "The Limits of Softmax Attention".

Chapters do ``import attnlimits as al`` and reach the library by its rooms, each a layer that imports only the
rooms below it (the results cache keys a study on the modules it imports, so the layering keeps a study's key to
what it computes with):

============  ======================================================================================
``core``      the paper's objects in torch, no I/O: normalisers, selection, bounds, per-row kernels
``infra``     cache and its keys, presets, provenance, statistics, Algorithm 3's KS test and level (``ks``),
              verdict words and their combination, page sentences, pipeline types, progress, plotting theme
``models``    where attention comes from: loading, the model registry, texts, window layout and capture
              (``windows``), the one capture type, arrays, TransformerLens
``theory``    Part 1 (chapters 11-15): synthetic heads, sweeps, the registry of numerical checks
``experiments`` Part 2 (chapters 21-25): Algorithms 1-5 (Algorithm 3's search in ``critical``), presets,
              figures and claims
``studies``   Part 3 (chapters 32-36): training, alternative normalisers, several models, long context; each
              study a package of ``study``, ``report`` and ``pipeline`` (its place in ``attnlimits results``)
``reporting`` across studies: the book's claims table, the results pipeline, the one-page report of a run
``cli``       the ``attnlimits`` command
============  ======================================================================================

The paper's objects are also at the top level (``al.normalizers``, ``al.selection``, ``al.bounds``) and so are the
texts (``al.texts``). Rooms and modules are imported on first use, so importing the package stays fast and a
chapter that never touches a pretrained model never imports transformers.
"""

from __future__ import annotations

import importlib
import sys

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
__all__ = [*ROOMS, *SHORTCUTS]


def __getattr__(name: str):
    if name in ROOMS:
        return importlib.import_module(f"attnlimits.{name}")
    if name in SHORTCUTS:
        return importlib.import_module(SHORTCUTS[name])
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
