"""The named presets of Algorithms 1-5 ("paper", "reduced" and "quick"): values of
:class:`attnlimits.experiments.grid.Preset`, the preset the book reads, and the validation of a grid (re-exported
from :mod:`attnlimits.experiments.grid`, with the class)."""

from __future__ import annotations

import math
import os

import numpy as np

from attnlimits.experiments.grid import Preset, validate_grid
from attnlimits.infra.ks import KS_LEVEL
from attnlimits.infra.presets import Registry

__all__ = ["PRESETS", "PRESET_VARIABLE", "Preset", "book_preset", "get_preset", "validate_grid"]


# ----------------------------------------------------------------------------------------------------------------
# presets
# ----------------------------------------------------------------------------------------------------------------
def _log_grid(lo: float, hi: float, points: int) -> tuple[float, ...]:
    return tuple(float(f"{v:.6g}") for v in np.logspace(math.log10(lo), math.log10(hi), points))


#: The paper's grids on 32 windows spread over the whole text (the design the book ships: each window computed and
#: summarised on its own, :mod:`attnlimits.experiments.shipped`), each read on a stratified sample of its rows
#: (every row below 128, then one row in 32: 156 of a window's 1,024 rows): the windows, not the rows, are the units
#: the book's intervals resample. A sparser sample buys little: one row in 64 cost the same to 2 % on 2 cores, since
#: the rows below 128, the passes over every token of a window and Algorithm 3's rounds dominate the cost.
_PAPER = Preset(
    name="paper",
    windows=32,
    alg1_N=5,
    alg1_L=(32, 64, 128, 256, 512, 1024),
    alg2_L=1024,
    alg2_N=(1, 5, 10, 20, 100),
    alg4_L=1024,
    alg4_N=(1, 2, 4, 8, 16, 32, 64),
    alg5_L=256,
    alg5_T=_log_grid(1e-3, 1e2, 21),
    alg5_eps=(1e-3, 1e-1, 10.0),
    row_stride=32,
)
PRESETS = Registry(
    "experiments",
    Preset,
    _PAPER,
    # What the book's build computes for several models (chapter 34): eight windows spread over the text (so that
    # every interval rests on eight passages), each read on a stratified sample of its rows (every row below 128,
    # then one in 16: 136 of 256), L up to 256, the paper's N grids, its smallest eps, T on a grid of half decades,
    # and the KS level 0.05 only.
    Preset(
        name="reduced",
        windows=8,
        alg1_N=5,
        alg1_L=(32, 64, 128, 256),
        alg2_L=256,
        alg2_N=(1, 5, 10, 20, 100),
        alg4_L=256,
        alg4_N=(1, 2, 4, 8, 16, 32, 64),
        alg5_L=256,
        alg5_T=_PAPER.alg5_T[::2],
        alg5_eps=(min(_PAPER.alg5_eps),),
        ks_levels=(KS_LEVEL,),
        row_stride=16,
    ),
    Preset(
        name="quick",
        windows=2,
        alg1_N=2,
        alg1_L=(16, 32, 64),
        alg2_L=64,
        alg2_N=(1, 2, 5, 10),
        alg4_L=64,
        alg4_N=(1, 2, 4, 8),
        alg5_L=64,
        alg5_T=_log_grid(1e-3, 1e2, 6),
        alg5_eps=(1e-3, 1e-1, 10.0),
    ),
)


def get_preset(preset: str | Preset) -> Preset:
    """A :class:`Preset` by name (``"paper"``, ``"reduced"`` or ``"quick"``), or the given one unchanged."""
    return PRESETS.get(preset)


#: The environment variable that chooses the preset of the Experiments chapters and of ``make results``.
PRESET_VARIABLE = "ATTNLIMITS_EXPERIMENTS_PRESET"


def book_preset() -> Preset:
    """The preset the Experiments chapters read: ``$ATTNLIMITS_EXPERIMENTS_PRESET`` (a name of :data:`PRESETS`),
    else ``"paper"``. A smaller preset (``quick``) makes a chapter run in seconds from an empty results cache; the
    prose then no longer describes the numbers, and the chapters print what differs instead of asserting it."""
    name = os.environ.get(PRESET_VARIABLE) or "paper"
    if name not in PRESETS:
        raise ValueError(f"{PRESET_VARIABLE}: must be one of {list(PRESETS)}, got {name!r}")
    return PRESETS[name]
