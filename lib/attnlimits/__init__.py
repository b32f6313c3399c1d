"""attnlimits: the library behind the book "The Limits of Softmax Attention".

Chapters do ``import attnlimits as al`` and reach the submodules as attributes (``al.normalizers.softmax``,
``al.selection.top_n``, ``al.models.load``...). Submodules are imported on first use, so that importing the
package stays fast and a chapter that never touches a pretrained model never imports transformers.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

SUBMODULES = (
    "alternatives",
    "alternatives_report",
    "bounds",
    "cache",
    "checks",
    "cli",
    "comparison",
    "experiments",
    "figures",
    "lens",
    "longcontext",
    "models",
    "normalizers",
    "plotting",
    "presets",
    "profiling",
    "provenance",
    "report",
    "reproduction",
    "rowstats",
    "runreport",
    "selection",
    "sweeps",
    "synthetic",
    "texts",
    "training",
    "uncertainty",
)
__all__ = list(SUBMODULES)


def __getattr__(name: str):
    if name in SUBMODULES:
        return importlib.import_module(f"attnlimits.{name}")
    raise AttributeError(f"module 'attnlimits' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(SUBMODULES))
