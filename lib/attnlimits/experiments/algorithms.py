"""Algorithms 1-2, 4 and 5 of the paper and the attention sink on a list of window captures, each returning a tidy
table (Algorithm 3, the critical N, is :mod:`attnlimits.experiments.critical`).

Every algorithm takes ``normalizer``: None reads the model's own softmax weights; a name of
:data:`attnlimits.core.normalizers.NORMALIZERS` swaps that normaliser in on the same masked logits
(:meth:`attnlimits.models.Capture.inputs`; Algorithm 5 perturbs the logits through it).

Each algorithm reads every query row of a window, or a stratified sample of them (``row_stride`` / ``stride``,
:mod:`attnlimits.experiments.row_sample`: every row below its ``SAMPLE_FROM``, then one seeded row per block), each
head's mean then the weighted mean over the sampled rows (with its standard error), a sample of long windows
computed in bins of positions.
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
from attnlimits.experiments.row_sample import (
    GRADIENT_FROM,
    by_bins,
    check_stride,
    on_rows,
    sample_rows,
    sampled_means,
)
from attnlimits.infra.progress import map_layers
from attnlimits.models.windows import check_windows

__all__ = [
    "COUNTINGS",
    "GRADIENT_COLUMNS",
    "MC_SAMPLES",
    "READINGS",
    "distance_table",
    "gradient_table",
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
        mc = on_rows(rowstats.random_expectation, a, x, below, ns=at, samples=MC_SAMPLES, seed=draw, **where)
        for j, o in enumerate(out):
            o["E_mc"] = (full(mc[0][j]), full(mc[1][j]))
    if "E_perm" in monte_carlo:
        perm = on_rows(rowstats.permuted_distance, a, x, below, ns=at, seed=draw + 1, **where)
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
    d_tilde, d_max, s_norm = on_rows(rowstats.distances, alpha, x, ns=ns, bound=True, kept=True, **shared, **at)
    exact_rows = {"d_tilde": d_tilde, "d_max": d_max}
    if "E" in readings:
        exact_rows["E"] = on_rows(rowstats.expectation, alpha, x, ns=ns, **at)
    if "E_full" in readings:
        exact_rows["E_full"] = on_rows(rowstats.expectation, alpha, x, ns=ns, full=True, **at)
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
