"""What one run of Algorithms 1-5 computes: the grids of a :class:`Preset` (its lengths, N, T and eps, its windows
and the rows it reads) and their validation.

The named presets (``paper``, ``reduced``, ``quick``) are values, in :mod:`attnlimits.experiments.presets`: a
run's results-cache key holds the preset it ran as data, and this module's code, so that changing a named preset
recomputes the runs of that preset only, and changing its meaning (this module) recomputes every run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attnlimits.infra.ks import KS_LEVELS
from attnlimits.infra.presets import StudyPreset

__all__ = ["Preset", "validate_grid"]


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
