"""The grids of Algorithms 1-5 (presets "paper", "reduced" and "quick"), the windows and rows they read, and their
validation."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from attnlimits.infra.ks import KS_LEVEL, KS_LEVELS
from attnlimits.infra.presets import Registry, StudyPreset

__all__ = ["PRESETS", "PRESET_VARIABLE", "Preset", "book_preset", "get_preset", "validate_grid"]


# ----------------------------------------------------------------------------------------------------------------
# presets
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preset(StudyPreset):
    """The grids of Algorithms 1-5, how many windows to read and which of their rows.

    ``windows``: how many passages of the text a run reads, spread evenly over the whole text (window i of W starts
    at text token ``i * (n - L) // (W - 1)``, :func:`attnlimits.models.windows.windows`): the windows are the
    independent units every interval of the book resamples, so they come from every part of the text rather than
    one stretch of it. ``row_stride``: None reads every query row of a window; an integer has every algorithm read
    a stratified sample of the rows instead (:func:`attnlimits.experiments.row_sample.sample_rows`: every row below
    128, then one seeded row per block of ``row_stride`` rows, each standing for its block), each head's mean the
    weighted mean over the sampled rows, with its standard error in the distance table: a row costs time in
    proportion to its position, so a sample buys many more windows for the same time.
    """

    windows: int
    alg1_N: int
    alg1_L: tuple[int, ...]
    alg2_L: int
    alg2_N: tuple[int, ...]
    alg4_L: int
    alg4_N: tuple[int, ...]
    alg5_L: int
    alg5_T: tuple[float, ...]
    alg5_eps: tuple[float, ...]
    ks_levels: tuple[float, ...] = KS_LEVELS
    row_stride: int | None = None

    @property
    def max_length(self) -> int:
        """The longest L any algorithm reads: the window length."""
        return max(*self.alg1_L, self.alg2_L, self.alg4_L, self.alg5_L)

    def distance_grid(self) -> dict[int, list[int]]:
        """Algorithms 1 and 2 as one grid ``{N: [L, ...]}``: ``alg1_N`` at every ``alg1_L``, each ``alg2_N`` at
        ``alg2_L`` (what :func:`attnlimits.experiments.distance_table` takes)."""
        grid = {self.alg1_N: list(self.alg1_L)}
        for n in self.alg2_N:
            grid.setdefault(n, [])
            if self.alg2_L not in grid[n]:
                grid[n].append(self.alg2_L)
        return grid


def _log_grid(lo: float, hi: float, points: int) -> tuple[float, ...]:
    return tuple(float(f"{v:.6g}") for v in np.logspace(math.log10(lo), math.log10(hi), points))


#: The paper's grids on 12 windows spread over the whole text, each read on a stratified sample of its rows (every
#: row below 128, then one row in 32: 156 of a window's 1,024 rows): the windows, not the rows, are the units the
#: book's intervals resample. A sparser sample buys little: one row in 64 cost the same to 2 % on 2 cores, since
#: the rows below 128, the passes over every token of a window and Algorithm 3's rounds dominate the cost.
_PAPER = Preset(
    name="paper",
    windows=12,
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


def validate_grid(preset: Preset, *, max_positions: int | None = None, windows: int | None = None) -> None:
    """Raise ValueError naming the grid when a preset cannot run: empty grids, N >= L, L above the context, a window
    count or row stride that is not an integer >= 1."""
    p = preset
    grids = {
        "alg1_L": p.alg1_L,
        "alg2_N": p.alg2_N,
        "alg4_N": p.alg4_N,
        "alg5_T": p.alg5_T,
        "alg5_eps": p.alg5_eps,
        "ks_levels": p.ks_levels,
    }
    for name, grid in grids.items():
        if len(grid) == 0:
            raise ValueError(f"{name}: the grid is empty")
    for name, values in {
        "alg1_L": p.alg1_L,
        "alg2_L": (p.alg2_L,),
        "alg4_L": (p.alg4_L,),
        "alg5_L": (p.alg5_L,),
        "alg1_N": (p.alg1_N,),
        "alg2_N": p.alg2_N,
        "alg4_N": p.alg4_N,
    }.items():
        if any(isinstance(v, bool) or int(v) != v or v < 1 for v in values):
            raise ValueError(f"{name}: must hold integers >= 1, got {values}")
    for name, n_grid, lengths in (
        ("alg1_N", (p.alg1_N,), p.alg1_L),
        ("alg2_N", p.alg2_N, (p.alg2_L,)),
        ("alg4_N", p.alg4_N, (p.alg4_L,)),
    ):
        bad = [(n, L) for n in n_grid for L in lengths if n >= L]
        if bad:
            raise ValueError(f"{name}: every N must be < L (some row must drop a token); got N >= L for {bad}")
    for name, grid in (("alg5_T", p.alg5_T), ("alg5_eps", p.alg5_eps)):
        if any(not v > 0 or not math.isfinite(v) for v in grid):
            raise ValueError(f"{name}: must hold finite numbers > 0, got {grid}")
    if any(not 0 < v < 1 for v in p.ks_levels):
        raise ValueError(f"ks_levels: must lie in (0, 1), got {p.ks_levels}")
    if max_positions is not None and p.max_length > max_positions:
        raise ValueError(f"L: the grid reaches L = {p.max_length}, above the model's {max_positions} positions")
    count = p.windows if windows is None else windows
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"windows: must be an integer >= 1, got {count!r}")
    stride = p.row_stride
    if stride is not None and (isinstance(stride, bool) or not isinstance(stride, int) or stride < 1):
        raise ValueError(f"row_stride: must be None (every row) or an integer >= 1, got {stride!r}")
