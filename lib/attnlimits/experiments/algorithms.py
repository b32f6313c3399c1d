"""Algorithms 1-5 of the paper on a list of window captures, each returning a tidy table.

Every algorithm takes ``normalizer``: None reads the model's own softmax weights; a name of
:data:`attnlimits.core.normalizers.NORMALIZERS` swaps that normaliser in on the same masked logits
(:meth:`attnlimits.models.Capture.inputs`; Algorithm 5 perturbs the logits through it).

Each algorithm reads every query row of a window, or a stratified sample of them (``row_stride`` / ``stride``,
:func:`sample_rows`: every row below :data:`SAMPLE_FROM`, then one seeded row per block), each head's mean then the
weighted mean over the sampled rows (:func:`sampled_means`, with its standard error). A row at position t costs
about t columns, so a sample of long windows is computed in bins of positions (:func:`by_bins`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import torch

from attnlimits.core import bounds, rowstats
from attnlimits.core.normalizers import NORMALIZERS, check_normalizer
from attnlimits.core.rowstats import row_means
from attnlimits.infra.progress import map_layers
from attnlimits.infra.statistics import ks_test
from attnlimits.models.windows import check_windows

__all__ = [
    "COUNTINGS",
    "CRITICAL_READINGS",
    "COARSER",
    "CRITICAL_STRIDE",
    "GRADIENT_FROM",
    "GRADIENT_STRIDE",
    "MC_SAMPLES",
    "GRADIENT_COLUMNS",
    "READINGS",
    "SAMPLE_FROM",
    "SAMPLE_STRIDE",
    "check_stride",
    "critical_n",
    "row_samples",
    "critical_search",
    "distance_table",
    "gradient_table",
    "sample_rows",
    "sampled_means",
    "separability_table",
    "sink_table",
]


# ----------------------------------------------------------------------------------------------------------------
# Algorithms 1 and 2: d~, d_max and E vs L (N fixed) and vs N (L fixed)
# ----------------------------------------------------------------------------------------------------------------
#: The expectations d~ is compared with (the columns of the distance table; the ``reading`` of Algorithm 3):
#: ``E`` the book's reconstruction of Eq. (10), ``E_mc`` the exact expectation over uniformly random subsets
#: (Monte Carlo), ``E_full`` Eq. (10) with the inner factor N/(l - 1) replaced by 1, ``E_perm`` the permutation
#: null (the row's weights permuted over its tokens).
READINGS = ("E", "E_mc", "E_full", "E_perm")
#: What a row's tokens are (:data:`attnlimits.core.rowstats.COUNTINGS`): its visible positions, or every position of
#: the length-L row (masked ones with weight 0, as ``output_attentions`` returns the matrix).
COUNTINGS = rowstats.COUNTINGS
#: Monte Carlo subsets per row for ``E_mc`` (its standard error ``E_mc_se`` is in the table).
MC_SAMPLES = 2
#: The rows the sampled readings (``E_mc``, ``E_perm``) average: every row t < SAMPLE_FROM, then one seeded random
#: row in each block of SAMPLE_STRIDE rows (a stratified sample; a fourth of the rows of a long window). A preset
#: with a ``row_stride`` has every algorithm read such a sample (blocks of ``row_stride`` rows) instead of every row.
SAMPLE_FROM, SAMPLE_STRIDE = 128, 4
#: The block of the row sample that Algorithm 3's ``E_full`` and ``E_perm`` searches read (a sixteenth of the rows
#: beyond SAMPLE_FROM: each search evaluates a dozen N per length, most of them on nearly every row); with a
#: preset's ``row_stride``, blocks COARSER times as long (at least CRITICAL_STRIDE).
CRITICAL_STRIDE = 16
#: How much coarser than a preset's ``row_stride`` the costliest readings' row samples are: Algorithm 3's
#: ``E_full`` and ``E_perm`` searches and Algorithm 4 on the input embeddings (d_model dimensions, nine times a
#: SmolLM2 head's). Every window reads its own sample, so the noise a coarse sample adds to a head's mean over
#: the run's windows shrinks with their number.
COARSER = 4
#: Algorithm 5's row sample when a preset samples rows (its window is short, L = 256, and a row's cost grows with
#: t there as everywhere): every row t < GRADIENT_FROM, then one row per block of GRADIENT_STRIDE rows (or of the
#: preset's ``row_stride`` where that is finer), about an eighth of the rows.
GRADIENT_FROM, GRADIENT_STRIDE = 16, 8


def sample_rows(
    top: int, seed: int, stride: int = SAMPLE_STRIDE, *, every_below: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sampled rows of a window of ``top`` rows and how many rows each stands for: ``(positions, weights)``
    (every row below ``every_below``, :data:`SAMPLE_FROM` by default, then one seeded random row per block of
    ``stride``; a block cut short by ``top`` stands for its rows). A head's weighted mean over the sampled rows
    is the stratified estimate of its mean over every row (:func:`sampled_means`)."""
    below = SAMPLE_FROM if every_below is None else every_below
    gen = torch.Generator().manual_seed(int(seed))
    head = torch.arange(min(top, below))
    starts = torch.arange(below, max(top, below), stride)
    sizes = (top - starts).clamp_max(stride)
    picks = starts + (torch.rand(len(starts), generator=gen) * sizes).long()
    return torch.cat([head, picks]), torch.cat([torch.ones(len(head)), sizes.double()]).double()


def row_samples(row_stride: int | None) -> dict[str, int | None]:
    """The block length of each row sample a run with a preset's ``row_stride`` reads (None: every row): ``rows``
    (Algorithms 1-2, Algorithm 3's ``E``, Algorithm 4 on the values, the sink), ``critical`` (Algorithm 3's
    ``E_full`` and ``E_perm``), ``embedding`` (Algorithm 4 on the input embeddings) and ``gradient`` (Algorithm 5,
    always every row). Every sample holds every row below :data:`SAMPLE_FROM` (:func:`sample_rows`)."""
    stride = check_stride("row_stride", row_stride)
    return {
        "rows": stride,
        "critical": max(CRITICAL_STRIDE, COARSER * (stride or 0)),
        "embedding": max(SAMPLE_STRIDE, COARSER * (stride or 0)),
        "gradient": None,
    }


def position_bins(positions: torch.Tensor) -> list[slice]:
    """Slices of increasing query ``positions`` into bins: the rows below :data:`SAMPLE_FROM`, then those in
    ``[SAMPLE_FROM, 2 SAMPLE_FROM)``, ``[2 SAMPLE_FROM, 4 SAMPLE_FROM)``... A row at position t costs about t columns;
    a bin computed alone (:func:`by_bins`) reads the columns its last row sees, at most twice what each row needs,
    where one block of a row sample would read every column for every row."""
    if len(positions) == 0:
        return []
    edges, top = [0, SAMPLE_FROM], int(positions[-1]) + 1
    while edges[-1] < top:
        edges.append(2 * edges[-1])
    cuts = torch.searchsorted(positions.cpu(), torch.tensor(edges)).tolist()
    return [slice(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]


def by_bins(
    fn, alpha: torch.Tensor, x: torch.Tensor, positions: torch.Tensor, *args, seed=None, row_dims=None, **kwargs
):
    """``fn(alpha, x, *args, positions=positions, **kwargs)`` (a kernel of :mod:`attnlimits.core.rowstats` under
    the visible counting) computed bin by bin (:func:`position_bins`), each bin on the columns its rows see, and put
    back together along the rows (the last dimension, or ``row_dims``, one per part of a tuple result; None parts
    stay None). A seeded kernel draws bin k (rows below :data:`SAMPLE_FROM`: k = 0, then k = 1, 2... for each
    doubling; the same k for the same positions whichever bins hold rows) from ``seed + 104729 k``."""
    parts = []
    for rows in position_bins(positions):
        at = positions[rows]
        top = int(at[-1]) + 1
        k = (int(at[0]) // SAMPLE_FROM).bit_length()
        drawn = {} if seed is None else {"seed": seed + 104_729 * k}
        parts.append(fn(alpha[:, rows, :top], x[:, :top], *args, positions=at, **drawn, **kwargs))
    if isinstance(parts[0], tuple):
        dims = row_dims or (-1,) * len(parts[0])
        return tuple(
            None if p[0] is None else torch.cat(p, dim=d) for p, d in zip(zip(*parts, strict=True), dims, strict=True)
        )
    return torch.cat(parts, dim=-1)


def _on_rows(fn, alpha, x, positions, *args, binned: bool, **kwargs):
    """A kernel of :mod:`attnlimits.core.rowstats` on the rows at ``positions`` (None: every row): bin by bin
    (:func:`by_bins`) when ``binned``, else in one call."""
    if binned:
        return by_bins(fn, alpha, x, positions, *args, **kwargs)
    return fn(alpha, x, *args, positions=positions, **kwargs)


def sampled_means(
    values, variance, positions, weights, lengths, n: int, L: int, *, successive: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the stratified estimate of the mean over the rows t < L with more than n tokens from the sampled
    rows (``values`` ``(H, R)`` at ``positions`` ``(R,)`` in increasing order, each standing for ``weights`` rows),
    and its standard error: the Monte Carlo ``variance`` of each row (or None) plus the sampling error of the
    strided rows. That error needs the spread of the rows inside a block, which one row per block cannot show:
    by default the spread of the strided rows stands for it (conservative where a head's values drift along the
    window, since the drift counts as spread); ``successive=True`` takes half the mean squared difference of
    successive strided rows instead (neighbouring blocks: a smooth drift cancels), which the tests find
    consistent with the spread of the estimate over seeds."""
    keep = (positions < L) & (lengths[positions] > n)
    if not bool(keep.any()):
        nan = np.full(values.shape[0], np.nan)
        return nan, nan
    v, w = values[:, keep].double(), weights[keep].to(values.device)
    total = w.sum()
    mean = (v * w).sum(-1) / total
    var = torch.zeros_like(mean)
    if variance is not None:
        var = var + (variance[:, keep].double() * w * w).sum(-1) / total**2
    strided = w > 1
    if int(strided.sum()) > 1:
        if successive:
            spread = v[:, strided].diff(dim=-1).square().mean(-1) / 2
        else:
            spread = v[:, strided].var(-1)
        var = var + spread * (w[strided] * (w[strided] - 1)).sum() / total**2
    return mean.cpu().numpy(), var.sqrt().cpu().numpy()


def check_stride(name: str, stride) -> int | None:
    """``stride`` when it is None (every row) or an integer >= 1; else a ValueError naming ``name``."""
    if stride is not None and (isinstance(stride, bool) or not isinstance(stride, int) or stride < 1):
        raise ValueError(f"{name}: must be None (every row) or an integer >= 1, got {stride!r}")
    return stride


#: The value columns of :func:`distance_table`, after its keys; a table on a row sample adds :data:`_SE_VALUES`.
_DISTANCE_VALUES = ("d_tilde", "d_max", "E", "E_mc", "E_mc_se", "E_full", "E_perm")
#: The standard errors of a head's d~ and E from the row sample (a distance table on a row sample only).
_SE_VALUES = ("d_tilde_se", "E_se")


@dataclass(frozen=True)
class _LayerRows:
    """What Algorithms 1-2 read of one layer of one window at the grid's largest L: the weights ``alpha`` and tokens
    ``x``, each row's token count ``lengths`` ``(L,)``, the row sample of :func:`sample_rows` (``positions`` and
    the rows each stands for, ``weights``) and the mask (``opts``: ``first`` and ``window``). ``sampled``: alpha
    ``(H, R, L)`` holds the sampled rows only (the preset's ``row_stride``) and every reading reads them; else alpha
    ``(H, L, L)`` holds every row, the exact readings read them all and the Monte Carlo ones the sample."""

    window_index: int
    layer: int
    alpha: torch.Tensor
    x: torch.Tensor
    lengths: torch.Tensor
    positions: torch.Tensor
    weights: torch.Tensor
    opts: dict
    sampled: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        """The value columns of the layer's records."""
        return _DISTANCE_VALUES + (_SE_VALUES if self.sampled else ())

    def below(self, L: int) -> int:
        """How many of alpha's rows lie below L (its rows are in increasing position)."""
        return int((self.positions < L).sum()) if self.sampled else L

    def rows_of(self, positions: torch.Tensor) -> torch.Tensor:
        """alpha's rows at ``positions`` (some of the sampled positions, in order)."""
        return self.alpha[:, : len(positions)] if self.sampled else self.alpha[:, positions]


def _head_records(rows: _LayerRows, counting: str, L: int, n: int, exact: dict, sampled: dict) -> list[tuple]:
    """One record per head: row means of the ``exact`` per-row values (the weighted means of a row sample, with
    the standard errors of d~ and E), estimates from the ``sampled``."""
    cols = {}
    sample = (rows.positions, rows.weights, rows.lengths, n, L)
    if rows.sampled:
        keep = (rows.positions < L) & (rows.lengths[rows.positions] > n)
        counted = int(rows.weights[keep].sum())  # the rows the sample stands for
        for name, values in exact.items():
            pad = len(rows.positions) - values.shape[-1]  # the rows at or beyond L: never counted
            values = torch.nn.functional.pad(values, (0, pad), value=math.nan) if pad else values
            cols[name], cols[f"{name}_se"] = sampled_means(values, None, *sample, successive=True)
    else:
        for name, values in exact.items():
            cols[name], counted = row_means(values, rows.lengths, n, L)
    if "E_mc" in sampled:
        cols["E_mc"], cols["E_mc_se"] = sampled_means(*sampled["E_mc"], *sample, successive=rows.sampled)
    if "E_perm" in sampled:
        cols["E_perm"], _ = sampled_means(sampled["E_perm"], None, *sample)
    heads = rows.alpha.shape[0]
    nan = np.full(heads, np.nan)
    records = []
    for h in range(heads):
        values = (float(cols.get(name, nan)[h]) for name in rows.columns)
        records.append((str(rows.window_index), rows.layer, h, L, n, counted, counting, *values))
    return records


def _sampled_readings(rows: _LayerRows, L: int, at: list[int], counting: str, draw: int, monte_carlo) -> list[dict]:
    """E_mc (mean, variance) and E_perm, where asked, on the sampled rows below L for every n of ``at`` (NaN-padded)."""
    out = [{} for _ in at]
    if not monte_carlo:
        return out
    below = rows.positions[rows.positions < L]
    a, x = rows.rows_of(below)[..., :L], rows.x[:, :L]
    pad = len(rows.positions) - len(below)

    def full(t):
        return torch.nn.functional.pad(t, (0, pad), value=math.nan)

    # a row sample of the visible counting bin by bin (the row counting reads every column of every row)
    where = {"binned": rows.sampled and counting == "visible", "counting": counting, **rows.opts}
    if "E_mc" in monte_carlo:
        mc = _on_rows(rowstats.random_expectation, a, x, below, ns=at, samples=MC_SAMPLES, seed=draw, **where)
        for j, o in enumerate(out):
            o["E_mc"] = (full(mc[0][j]), full(mc[1][j]))
    if "E_perm" in monte_carlo:
        perm = _on_rows(rowstats.permuted_distance, a, x, below, ns=at, seed=draw + 1, **where)
        for j, o in enumerate(out):
            o["E_perm"] = full(perm[j])
    return out


def _visible_records(rows: _LayerRows, grid, exact_rows: dict, monte_carlo, draw: int) -> list[tuple]:
    """The records of the visible counting: each L of an N a prefix mean of rows computed once at the largest L."""
    ns, top = sorted(grid), max(max(v) for v in grid.values())
    draws = _sampled_readings(rows, top, ns, "visible", draw, monte_carlo)
    records = []
    for j, n in enumerate(ns):
        exact = {name: values[j] for name, values in exact_rows.items()}
        for L in sorted(grid[n]):
            records += _head_records(rows, "visible", L, n, exact, draws[j])
    return records


def _row_records(rows: _LayerRows, grid, exact_rows: dict, s_norm, readings, monte_carlo, draw: int) -> list[tuple]:
    """The records of the row counting: d~ and E_full from the visible rows plus the masked tokens, E per L."""
    alpha, x, ns, first = rows.alpha, rows.x, sorted(grid), rows.opts["first"]
    d_tilde, e_full = exact_rows["d_tilde"], exact_rows.get("E_full")
    out_norm = rowstats.output_norms(alpha, x) if "E_full" in readings else None
    ell = (rows.lengths[rows.positions] if rows.sampled else rows.lengths).to(alpha.dtype)  # of alpha's rows
    records = []
    for L in sorted({L for v in grid.values() for L in v}):  # the row's tokens depend on L
        at = [n for n in ns if L in grid[n]]
        k = rows.below(L)  # alpha's rows below L
        width = L - first  # tokens of every row under the row counting
        masked = (width - ell[:k]).clamp_min(0)  # tokens of weight 0 beyond the visible ones
        if "E" in readings:
            where = {"positions": rows.positions[:k]} if rows.sampled else {}
            e_row = rowstats.expectation(alpha[:, :k, :L], x[:, :L], at, counting="row", **where, **rows.opts)
        draws = _sampled_readings(rows, L, at, "row", draw + L, monte_carlo)
        for q, n in enumerate(at):
            j = ns.index(n)
            exact = {"d_tilde": d_tilde[j, :, :k] + masked * s_norm[j, :, :k]}
            if "E" in readings:
                exact["E"] = e_row[q]
            if "E_full" in readings:
                inner = e_full[j, :, :k] * ell[:k] / (ell[:k] - n).clamp_min(1)  # sum_i ||2 y_i - o||
                exact["E_full"] = (width - n) / width * (inner + masked * out_norm[:, :k])
            records += _head_records(rows, "row", L, n, exact, draws[q])
    return records


def _distance_layer(
    w, layer: int, grid, *, inputs: dict, seed: int, readings, countings, row_stride: int | None
) -> list[tuple]:
    """Algorithms 1-2 on one layer of window ``w``: its records of :func:`distance_table`, one pass at the top L."""
    first, ns = int(inputs["exclude_sink"]), sorted(grid)
    top = max(max(v) for v in grid.values())
    layer_seed = seed + 1_000_003 * w.index + 7919 * layer
    if row_stride is None:
        alpha, x = w.inputs(layer, top, **inputs)
        positions, weights = sample_rows(top, layer_seed)
    else:
        positions, weights = sample_rows(top, layer_seed, row_stride)
        alpha, x = w.inputs(layer, top, rows=positions, **inputs)
    window = w.window(layer, top)
    rows = _LayerRows(
        window_index=w.index,
        layer=layer,
        alpha=alpha,
        x=x,
        lengths=rowstats.row_lengths(top, first, alpha.device, window),
        positions=positions.to(alpha.device),
        weights=weights,
        opts={"first": first, "window": window},
        sampled=row_stride is not None,
    )
    monte_carlo = {"E_mc", "E_perm"} & set(readings)

    # every row, or the sampled rows bin by bin
    at = {"positions": rows.positions if rows.sampled else None, "binned": rows.sampled, **rows.opts}
    shared = {"farthest": rowstats.farthest_tokens(x)} if rows.sampled else {}  # once for every bin
    d_tilde, d_max, s_norm = _on_rows(rowstats.distances, alpha, x, ns=ns, bound=True, kept=True, **shared, **at)
    exact_rows = {"d_tilde": d_tilde, "d_max": d_max}
    if "E" in readings:
        exact_rows["E"] = _on_rows(rowstats.expectation, alpha, x, ns=ns, **at)
    if "E_full" in readings:
        exact_rows["E_full"] = _on_rows(rowstats.expectation, alpha, x, ns=ns, full=True, **at)
    records = []
    if "visible" in countings:
        records += _visible_records(rows, grid, exact_rows, monte_carlo, layer_seed)
    if "row" in countings:
        records += _row_records(rows, grid, exact_rows, s_norm, readings, monte_carlo, layer_seed)
    return records


def distance_table(
    windows,
    grid: dict[int, Sequence[int]],
    *,
    exclude_sink: bool = False,
    tokens: str = "value",
    precision: str = "float64",
    normalizer: str | None = None,
    seed: int = 0,
    readings: Sequence[str] = READINGS,
    countings: Sequence[str] = COUNTINGS,
    row_stride: int | None = None,
    progress: bool | str | None = None,
    n_jobs: int = 1,
) -> pd.DataFrame:
    """Per-head means of d~, d_max (Theorem 1 as reconstructed) and the ``readings`` of the expectation (a subset
    of :data:`READINGS`; the columns of the others are NaN) for every N and its lengths in ``grid``, under each
    counting of a row's tokens.

    ``grid`` maps N to the lengths L it is wanted at (Alg. 1: {5: [32, ..., 1024]}; Alg. 2: {N: [1024]}). A head's
    value is its mean over the rows t < L with more than N tokens (the ``rows`` column), under each of the
    ``countings``. One pass per layer computes every row once at the largest L; shorter L are prefix means.
    ``row_stride=None``: ``d_tilde``, ``d_max``, ``E`` and ``E_full`` read every row (exact); the Monte Carlo
    readings ``E_mc`` and ``E_perm`` read the stratified sample of :func:`sample_rows`, and ``E_mc_se`` is the
    standard error of the head's ``E_mc`` (Monte Carlo and row sampling). ``row_stride`` an integer: every reading
    reads the stratified sample of :func:`sample_rows` with blocks of that many rows (every row below
    :data:`SAMPLE_FROM`, then one seeded row per block, standing for the rows of its block); each head's value is
    the weighted mean over the sampled rows, ``rows`` the rows the sample stands for, and the columns
    ``d_tilde_se`` and ``E_se`` give the standard errors of the head's d~ and E from the row sample (0 where the
    sample holds every row, L <= SAMPLE_FROM). The row counting (every position of the length-L row a token,
    masked ones with weight 0) follows exactly from the visible one for d~ (each masked token adds ||s||) and
    E_full (each adds ||o||, o the head's output); its ``E``, ``E_mc`` and ``E_perm`` are computed per L.
    ``d_max`` is NaN for the row counting. Columns: ``window, layer, head, L, N, rows, counting, d_tilde, d_max,
    E, E_mc, E_mc_se, E_full, E_perm`` (then ``d_tilde_se, E_se`` on a row sample). ``seed``: the draws and the
    row sample (per window and layer); the same seed repeats exactly. ``n_jobs``: windows in parallel
    (:func:`map_layers`).
    """
    check_windows(windows)
    check_stride("row_stride", row_stride)
    unknown = [c for c in countings if c not in COUNTINGS]
    if unknown or not countings:
        raise ValueError(f"countings: must be a non-empty subset of {COUNTINGS}, got {list(countings)}")
    unknown = [r for r in readings if r not in READINGS]
    if unknown or not readings:
        raise ValueError(f"readings: must be a non-empty subset of {READINGS}, got {list(readings)}")
    inputs = {"exclude_sink": exclude_sink, "tokens": tokens, "precision": precision, "normalizer": normalizer}
    one_layer = partial(
        _distance_layer,
        grid=grid,
        inputs=inputs,
        seed=seed,
        readings=readings,
        countings=countings,
        row_stride=row_stride,
    )
    records = [r for part in map_layers(windows, one_layer, "Alg. 1-2", progress, n_jobs) for r in part]
    # in the order of the windows and layers (so runs over disjoint windows concatenate to the whole), each layer's
    # visible counting first
    values = _DISTANCE_VALUES + (() if row_stride is None else _SE_VALUES)
    columns = ["window", "layer", "head", "L", "N", "rows", "counting", *values]
    return pd.DataFrame(records, columns=columns)


# ----------------------------------------------------------------------------------------------------------------
# Algorithm 3: the critical N, found by a search on the KS decision
# ----------------------------------------------------------------------------------------------------------------


def critical_search(L: int, level: float, guess: int | None = None, n_max: int | None = None):
    """Generator: yields the N it wants tested at L, receives its p-value, returns the critical N.

    It brackets the change of the decision p >= level, then bisects inside the bracket, so the answer N has
    p(N) >= level and p(N - 1) < level, both evaluated (N = 1 when already p(1) >= level). Without a ``guess`` the
    bracket grows by doubling from N = 1; with one (the critical fraction of a shorter L, scaled) it starts there
    and walks down or up in doubling steps. ``n_max`` is the largest N that leaves a row with a dropped token
    (L - 1, or L - 2 without the sink); every N up to it may be tried. Returns None when no N <= n_max reaches the
    level.
    """
    n_max = L - 1 if n_max is None else n_max
    lo, hi = 0, None  # invariant: p(lo) < level (lo = 0 stands for "N = 1 is the first candidate"), p(hi) >= level
    if guess is None:
        n = 1
        while hi is None:
            p = yield n
            if p >= level:
                hi = n
            else:
                lo = n
                if n >= n_max:
                    return None
                n = min(2 * n, n_max)
    else:
        n, step = min(max(int(guess), 1), n_max), max(1, L // 64)
        p = yield n
        if p >= level:
            hi = n
            while hi > 1:
                n = max(hi - step, 1)
                p = yield n
                if p < level:
                    lo = n
                    break
                hi, step = n, 2 * step
        else:
            lo = n
            while hi is None:
                if lo >= n_max:
                    return None
                n = min(lo + step, n_max)
                p = yield n
                if p >= level:
                    hi = n
                else:
                    lo, step = n, 2 * step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = yield mid
        if p >= level:
            hi = mid
        else:
            lo = mid
    return hi


#: How many of its decisions ahead each search of Algorithm 3 is evaluated: a round computes the N a search asks
#: next and, for each outcome, the N it would ask after it (2**LOOKAHEAD - 1 per search and round), so a search
#: takes about 1/LOOKAHEAD of the rounds, each reading every layer once. The critical N are those of one N per
#: round: a search only ever reads the p-values of the N it asks, and a p-value does not depend on what else its
#: round evaluates (the permutation null draws each row alike in any grouping, :func:`rowstats.permuted_distance`).
LOOKAHEAD = 2


def _wanted(search: tuple, known: dict[int, float], depth: int) -> tuple[set[int], int | None]:
    """Replay :func:`critical_search` (its arguments ``search``) on the p-values ``known`` so far: the N it asks
    next that are not known, ``depth`` decisions ahead, and ``(set(), answer)`` once it has its answer."""
    chain = critical_search(*search)
    try:
        n = next(chain)
        while n in known:
            n = chain.send(known[n])
    except StopIteration as stop:
        return set(), stop.value
    wanted = {n}
    if depth > 1:
        level = search[1]
        for outcome in (level, -1.0):  # p >= level, p < level
            wanted |= _wanted(search, {**known, n: outcome}, depth - 1)[0]
    return wanted, None


#: The readings Algorithm 3 searches a critical N for. ``E`` is evaluated on every row that counts (or on the row
#: sample of a preset's ``row_stride``); ``E_full`` and ``E_perm`` (with the d~ they are compared with) on the
#: stratified row sample of :func:`sample_rows` with blocks of :data:`CRITICAL_STRIDE` rows (or :data:`COARSER`
#: times ``row_stride``, where that is coarser).
CRITICAL_READINGS = ("E", "E_full", "E_perm")


def critical_n(
    windows,
    lengths: Sequence[int],
    levels: Sequence[float] = (0.05, 0.01),
    *,
    readings: Sequence[str] = CRITICAL_READINGS,
    exclude_sink: bool = False,
    tokens: str = "value",
    precision: str = "float64",
    normalizer: str | None = None,
    seed: int = 0,
    row_stride: int | None = None,
    progress: bool | str | None = None,
    n_jobs: int = 1,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Algorithm 3: for each L and reading of the expectation, the smallest N at which a two-sample KS test
    cannot tell apart the per-head means of d~ and of that reading (p >= level), at every level.

    A head's mean is over its rows (t < L, more than N tokens) in every window; the test compares the heads'
    means of d~ with their means of the reading (one value per head each, as in the paper). ``row_stride=None``:
    ``E`` reads every row that counts; an integer: the stratified row sample of :func:`sample_rows` with blocks of
    that many rows (each head's means weighted by the rows each sampled row stands for, the ``rows`` of the heads
    table then the rows the sample stands for). ``E_full`` and ``E_perm`` always read a row sample
    (:data:`CRITICAL_READINGS`). Lengths are solved
    shortest first; each (L, reading, level) runs :func:`critical_search`, guided by the critical fraction N/L
    found at the previous length (the first length brackets by doubling). The searches of one L run side by side
    in rounds; a round reads every layer once and evaluates every reading at every N its searches ask in their
    next :data:`LOOKAHEAD` decisions. Returns
    ``(scan, critical, heads)``: scan ``L, N, reading, ks_stat, p_value, window`` (one row per N evaluated),
    critical ``L, reading, ks_level, critical_N, window`` (``window = "all"``: the pooled test over the run's
    windows), and heads ``window, layer, head, L, N, reading, rows, d_tilde, expected`` (each window's per-head
    means at every evaluated (L, N): what the bootstrap over windows of :mod:`attnlimits.infra.statistics` resamples).
    ``n_jobs``: windows in parallel within each round (:func:`map_layers`); the answers do not depend on it.
    """
    check_windows(windows)
    check_stride("row_stride", row_stride)
    unknown = [r for r in readings if r not in CRITICAL_READINGS]
    if unknown or not readings:
        raise ValueError(f"readings: must be a non-empty subset of {CRITICAL_READINGS}, got {list(readings)}")
    first = int(exclude_sink)
    results: dict[tuple[str, int, int], tuple[float, float]] = {}
    answers: dict[tuple[int, str, float], int | None] = {}
    fraction: dict[tuple[str, float], float] = {}
    heads: list = []
    opts = {"exclude_sink": exclude_sink, "tokens": tokens, "precision": precision, "normalizer": normalizer}
    chains_of = [(r, float(lv)) for r in readings for lv in levels]
    for L in sorted(int(v) for v in lengths):
        searches = {}
        for key in chains_of:
            guess = round(fraction[key] * L) if key in fraction else None
            searches[key] = (L, key[1], guess, L - 1 - first)
        while searches:
            todo = set()
            for key, search in list(searches.items()):
                known = {n: p for (r, n, at), (_, p) in results.items() if r == key[0] and at == L}
                wanted, answer = _wanted(search, known, LOOKAHEAD)
                if wanted:
                    todo |= {(key[0], n, L) for n in wanted}
                    continue
                del searches[key]
                answers[(L, *key)] = answer
                if answer is not None:
                    fraction[key] = answer / L
            if todo:
                found, records = _evaluate_ks(windows, todo, first, opts, seed, progress, n_jobs, row_stride)
                results.update(found)
                heads += records
    scan = pd.DataFrame(
        [(L, n, r, s, p, "all") for (r, n, L), (s, p) in results.items()],
        columns=["L", "N", "reading", "ks_stat", "p_value", "window"],
    )
    scan = _in_reading_order(scan, readings, ["L", "N"])
    critical = pd.DataFrame(
        [
            (L, r, lv, np.nan if answers[(L, r, lv)] is None else answers[(L, r, lv)], "all")
            for r, lv in chains_of
            for L in lengths
        ],
        columns=["L", "reading", "ks_level", "critical_N", "window"],
    )
    critical["critical_N"] = critical["critical_N"].astype("Int64")
    critical = _in_reading_order(critical, readings, ["L", "ks_level"], ascending=[True, False])
    columns = ["window", "layer", "head", "L", "N", "reading", "rows", "d_tilde", "expected"]
    heads = _in_reading_order(pd.DataFrame(heads, columns=columns), readings, ["L", "N", "window", "layer", "head"])
    return scan, critical, heads


def _in_reading_order(table: pd.DataFrame, readings, by, ascending=True) -> pd.DataFrame:
    """``table`` sorted by reading (in the order given), then ``by``."""
    rank = table.reading.map({r: i for i, r in enumerate(readings)}).rename("_rank")
    asc = [True, *(ascending if isinstance(ascending, list) else [ascending] * len(by))]
    out = table.assign(_rank=rank).sort_values(["_rank", *by], ascending=asc, kind="stable")
    return out.drop(columns="_rank").reset_index(drop=True)


def _start_groups(starts: dict[int, int]) -> list[list[int]]:
    """The N of a round in groups that share their rows: a new group where the first counted row moves on by
    more than a block (so a search near N = L does not compute the rows a search near N = 1 needs)."""
    groups: list[list[int]] = []
    for n in sorted(starts):
        if groups and starts[n] - starts[groups[-1][0]] <= rowstats.ROW_BLOCK:
            groups[-1].append(n)
        else:
            groups.append([n])
    return groups


def _head_sums(values, at, wt, starts, pairs, reading, parts, heads) -> None:
    """Per (N, L) of ``pairs``, into ``parts``: head sums of d~ and the reading over the counted rows, and rows."""
    d, e = values
    for j, n in enumerate(sorted({n for n, _ in pairs})):
        for L in sorted(L for m, L in pairs if m == n):
            keep = ((at >= starts[n]) & (at < L)).cpu()
            count = float(wt[keep].sum())
            totals = [(v[j][:, keep].double().cpu() * wt[keep]).sum(-1).numpy() for v in (d, e)]
            parts[(reading, n, L)] = (*totals, np.full(heads, count))


def _ks_layer(w, layer: int, todo, *, first: int, opts: dict, seed: int, row_stride: int | None = None) -> dict:
    """Algorithm 3 on one layer of window ``w``: per (reading, N, L) of ``todo``, head sums of d~, reading and rows
    (weighted by the rows each sampled row stands for, where a row sample is read)."""
    exact = {(n, L) for r, n, L in todo if r == "E"}
    sampled = {(n, L) for r, n, L in todo if r != "E"}
    sampled_readings = sorted({r for r, _, _ in todo if r != "E"})
    top = max(L for _, _, L in todo)
    parts = {}
    window = w.window(layer, top)
    lengths = rowstats.row_lengths(top, first, device="cpu", window=window)
    heads = w.heads(layer)
    layer_seed = seed + 1_000_003 * w.index + 7919 * layer
    samples = {"sampled": sample_rows(top, layer_seed, row_samples(row_stride)["critical"])}
    if row_stride is not None:
        samples["E"] = sample_rows(top, layer_seed, row_stride)
    for kind, pairs in (("E", exact), ("sampled", sampled)):
        ns = sorted({n for n, _ in pairs})
        starts = {n: int(torch.searchsorted(lengths, n, right=True)) for n in ns}  # first row with > n tokens
        for group in _start_groups(starts):
            start = starts[group[0]]
            if start >= top:
                continue
            at_group = {(n, L) for n, L in pairs if n in group}
            where = {"first": first, "window": window}
            if kind not in samples:  # E on every row that counts
                alpha, x = w.inputs(layer, top, first_row=start, **opts)
                at = torch.arange(start, top, device=alpha.device)
                d = rowstats.distances(alpha, x, group, positions=at, **where)[0]
                e = rowstats.expectation(alpha, x, group, positions=at, **where)
                ones = torch.ones(len(at), dtype=torch.float64)
                _head_sums((d, e), at, ones, starts, at_group, "E", parts, heads)
                continue
            positions, weights = samples[kind]
            picked = positions >= start
            at, wt = positions[picked], weights[picked]
            if len(at) == 0:  # the sample holds no row that counts
                continue
            a, x = w.inputs(layer, top, rows=at, **opts)  # the weights of the sampled rows only
            at = at.to(a.device)
            on = {"binned": row_stride is not None, "ns": group, **where}  # with a row stride: bin by bin
            d = _on_rows(rowstats.distances, a, x, at, **on)[0]
            if kind == "E":
                e = _on_rows(rowstats.expectation, a, x, at, **on)
                _head_sums((d, e), at, wt, starts, at_group, "E", parts, heads)
                continue
            for r in sampled_readings:
                if r == "E_full":
                    e = _on_rows(rowstats.expectation, a, x, at, full=True, **on)
                else:
                    e = _on_rows(rowstats.permuted_distance, a, x, at, seed=seed + 7 * w.index + layer, **on)
                _head_sums((d, e), at, wt, starts, at_group, r, parts, heads)
    for r, n, L in todo:  # no counted row (a sliding-window layer has none with more tokens than its window)
        parts.setdefault((r, n, L), (np.zeros(heads), np.zeros(heads), np.zeros(heads)))
    return parts


def _evaluate_ks(windows, todo, first, opts, seed, progress, n_jobs=1, row_stride=None):
    """KS statistic and p-value for every (reading, N, L) in ``todo``, in one pass over the layers, and each
    window's per-head means (the records of :func:`critical_n`'s heads table); ``opts`` are the keyword arguments
    of :meth:`attnlimits.models.Capture.inputs`.

    Only the rows that count are computed: at N, the rows with more than N tokens (a suffix of the window, since a
    row's token count never decreases with t), so a search near N = L reads a few rows instead of all of them; the
    N of one group share the weights and one top-k per block. ``E`` is computed at its own N on every counted
    row (or the sampled ones, with a ``row_stride``); ``E_full`` and ``E_perm`` share their N and read the sampled
    rows among the counted ones (:func:`sample_rows`), with d~ on the same rows."""
    one_layer = partial(_ks_layer, todo=todo, first=first, opts=opts, seed=seed, row_stride=row_stride)
    per_layer = map_layers(windows, one_layer, f"Alg. 3 ({len(todo)} tests)", progress, n_jobs)
    out, records = {}, []
    layers = [(w, layer) for w in windows for layer in w.layer_ids]
    for key in sorted(todo):
        r, n, L = key
        for (w, layer), part in zip(layers, per_layer, strict=True):
            d_sum, e_sum, rows = part[key]
            with np.errstate(invalid="ignore", divide="ignore"):
                means = d_sum / rows, e_sum / rows
            for h in range(len(rows)):
                records.append((str(w.index), layer, h, L, n, r, rows[h], means[0][h], means[1][h]))
        # rows per head over every window
        rows = _pool([part[key][2] for part in per_layer], windows)
        kept = rows > 0
        if not kept.any():
            out[key] = (math.nan, math.nan)
            continue
        d_heads = _pool([part[key][0] for part in per_layer], windows)[kept] / rows[kept]
        e_heads = _pool([part[key][1] for part in per_layer], windows)[kept] / rows[kept]
        out[key] = ks_test(d_heads, e_heads)
    return out, records


def _pool(parts, windows) -> np.ndarray:
    """Sum the per-(window, layer) head vectors of every window into one vector per (layer, head)."""
    per_window = len(windows[0].layer_ids)
    stacked = np.stack(parts).reshape(len(windows), per_window, -1)
    return stacked.sum(0).reshape(-1)


# ----------------------------------------------------------------------------------------------------------------
# Algorithm 4: geometric separability N_s / N with Theorem 2's bounds
# ----------------------------------------------------------------------------------------------------------------
def separability_table(
    windows,
    L: int,
    ns: Sequence[int],
    *,
    exclude_sink: bool = False,
    tokens: str = "value",
    precision: str = "float64",
    normalizer: str | None = None,
    stride: int | None = None,
    seed: int = 0,
    bins: bool = False,
    progress: bool | str | None = None,
    n_jobs: int = 1,
) -> pd.DataFrame:
    """Algorithm 4: per-head mean of N_s / N at the radius R (tokens on the unit sphere) with Theorem 2's bounds.

    ``tokens`` (:meth:`attnlimits.models.Capture.inputs`): the vectors normalised onto the sphere, the heads' values by
    default
    or the input token embeddings (``"embedding"``, the paper's "extract and normalize token embeddings"). delta is
    the window's smallest distance between two of the head's (normalised) tokens (0 when a token repeats and the
    tokens are embeddings). Columns: ``window, layer, head, L, N, tokens, rows, ns_frac, lower, upper, delta``.
    ``stride``: None reads every row; an integer reads the stratified row sample of :func:`sample_rows` with that
    stride (seeded by ``seed``, per window and layer), each head's means weighted by the rows each sampled row
    stands for, and ``rows`` is then the number of rows the sample stands for (the embeddings have d_model
    dimensions, nine times a SmolLM2 head's 64: a sample of a fourth of the rows keeps their cost near the
    values'). ``bins=True`` computes a row sample bin by bin (:func:`by_bins`: each bin of positions on the columns
    its rows see; the same numbers to rounding, several times faster on a long window, as the presets with a
    ``row_stride`` read it). ``n_jobs``: windows in parallel (:func:`map_layers`).
    """
    check_windows(windows)
    check_stride("stride", stride)
    first = int(exclude_sink)

    def one_layer(w, layer):
        records = []
        at, wt = None, None
        if stride is not None:
            at, wt = sample_rows(L, seed + 1_000_003 * w.index + 7919 * layer, stride)
        alpha, x = w.inputs(
            layer, L, exclude_sink=exclude_sink, tokens=tokens, precision=precision, normalizer=normalizer, rows=at
        )
        shared = x[:1] if tokens != "value" else x  # the residual stream and the embeddings: the same for every head
        shared = shared / torch.linalg.vector_norm(shared, dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
        x = shared.expand_as(x)  # still one copy for every head (rowstats.separability reads it once)
        pair = torch.cdist(shared[:, first:], shared[:, first:])
        pair.diagonal(dim1=-2, dim2=-1).fill_(math.inf)
        delta = pair.flatten(1).amin(-1).expand(x.shape[0])  # (H,)
        window = w.window(layer, L)
        lengths = rowstats.row_lengths(L, first, alpha.device, window)
        if at is not None:
            at = at.to(alpha.device)
            lengths, wt = lengths[at], wt.to(alpha.device)
        if bins and at is not None:
            where = {"first": first, "window": window, "row_dims": (-1, -2, -1)}
            fracs, weights, radii = by_bins(rowstats.separability, alpha, x, at, ns, **where)
        else:
            fracs, weights, radii = rowstats.separability(alpha, x, ns, first=first, window=window, positions=at)
        for j, n in enumerate(ns):
            frac, radius = fracs[j], radii[j]
            keep = (lengths > n) & (radius > 0).all(0)
            d = delta.view(-1, 1).expand(-1, int(keep.sum()))
            lower, upper = bounds.theorem2_bounds_of_weights(weights[:, keep, :n], r=radius[:, keep], delta=d)
            if at is None:
                rows = int(keep.sum())
                means = [t.double().mean(-1).cpu() for t in (frac[:, keep], lower, upper)]
            else:
                w_keep = wt[keep]
                total = w_keep.sum()  # the rows the sample stands for (0: the means are NaN)
                rows = int(total)
                means = [((t.double() * w_keep).sum(-1) / total).cpu() for t in (frac[:, keep], lower, upper)]
            for h in range(alpha.shape[0]):
                values = (float(m[h]) for m in means)
                records.append((str(w.index), layer, h, L, n, tokens, rows, *values, float(delta[h])))
        return records

    records = [r for part in map_layers(windows, one_layer, "Alg. 4", progress, n_jobs) for r in part]
    return pd.DataFrame(
        records, columns=["window", "layer", "head", "L", "N", "tokens", "rows", "ns_frac", "lower", "upper", "delta"]
    )


# ----------------------------------------------------------------------------------------------------------------
# Algorithm 5: g(T, eps) on the captured logits; the attention sink
# ----------------------------------------------------------------------------------------------------------------
#: The columns of :func:`gradient_table`.
GRADIENT_COLUMNS = ["window", "layer", "head", "T", "eps", "g", "logit_scaling"]


def gradient_table(
    windows,
    L: int,
    T: Sequence[float],
    eps: Sequence[float],
    *,
    seed: int = 0,
    stride: int | None = None,
    progress: bool | str | None = None,
    n_jobs: int = 1,
    normalizer: str | None = None,
) -> pd.DataFrame:
    """Algorithm 5: per head, g(T, eps) = mean over rows of ||softmax((l + eps v)/T) - softmax(l/T)|| / eps.

    Computed on the logits as the model feeds them to its softmax (``logit_scaling = "model"``: q.k times the
    model's scale, 1/sqrt(d_head) here) and on the raw dot products q.k (``logit_scaling = "none"``). Columns:
    ``window, layer, head, T, eps, g, logit_scaling``. ``stride``: None reads every row; an integer the
    stratified row sample of :func:`sample_rows` (every row below :data:`GRADIENT_FROM`, then one seeded row per
    block of ``stride``, per window and layer), each head's mean weighted by the rows each sampled row stands for.
    ``n_jobs``: windows in parallel (:func:`map_layers`). ``normalizer``: a registered name puts that normaliser in
    softmax's place (None: softmax).
    """
    check_windows(windows)
    check_stride("stride", stride)
    fn = None if check_normalizer(normalizer) is None else NORMALIZERS[normalizer]

    def one_layer(w, layer):
        records = []
        at, wt = None, None
        if stride is not None:
            at, wt = sample_rows(L, seed + 1_000_003 * w.index + 7919 * layer, stride, every_below=GRADIENT_FROM)
        logits = w.logits(layer, L, rows=at).double()
        scale = w[layer].scaling
        for label, values in (("model", logits), ("none", logits / scale)):
            g = rowstats.finite_difference_g(
                values, T=T, eps=eps, seed=seed + 1_000_003 * w.index + layer, reduce=False, weights=wt, normalizer=fn
            )
            g = g.cpu().numpy()
            for h in range(g.shape[0]):
                for i, t in enumerate(T):
                    for j, e in enumerate(eps):
                        records.append((str(w.index), layer, h, float(t), float(e), float(g[h, i, j]), label))
        return records

    records = [r for part in map_layers(windows, one_layer, "Alg. 5", progress, n_jobs) for r in part]
    return pd.DataFrame(records, columns=GRADIENT_COLUMNS)


def sink_table(
    windows, L: int, *, stride: int | None = None, seed: int = 0, normalizer: str | None = None
) -> pd.DataFrame:
    """Mean weight of token 0 (the attention sink) per head over rows 1..L-1 that see it (a sliding-window layer's
    rows t < w). ``stride``: None reads every row; an integer the stratified row sample of :func:`sample_rows`
    (seeded by ``seed``, per window and layer), the mean weighted by the rows each sampled row stands for.
    ``normalizer``: as in the other algorithms. Columns ``window, layer, head, sink_weight``."""
    check_windows(windows)
    check_stride("stride", stride)
    check_normalizer(normalizer)
    records = []
    for w in windows:
        for layer in w.layer_ids:
            seen = L if w.window(layer, L) is None else min(L, w.window(layer, L))
            if stride is None:
                alpha, _ = w.inputs(layer, L, normalizer=normalizer)
                sink = alpha[:, 1:seen, 0].mean(-1).cpu().numpy()
            else:
                at, wt = sample_rows(L, seed + 1_000_003 * w.index + 7919 * layer, stride)
                alpha, _ = w.inputs(layer, L, rows=at, normalizer=normalizer)
                keep = ((at >= 1) & (at < seen)).to(alpha.device)
                wt = wt.to(alpha.device)[keep]
                sink = ((alpha[:, keep, 0].double() * wt).sum(-1) / wt.sum()).cpu().numpy()
            records += [(str(w.index), layer, h, float(sink[h])) for h in range(len(sink))]
    return pd.DataFrame(records, columns=["window", "layer", "head", "sink_weight"])
