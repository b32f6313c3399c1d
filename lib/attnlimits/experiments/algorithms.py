"""Algorithms 1-5 of the paper on a list of window captures, each returning a tidy table.

Algorithms 1-4 take ``normalizer``: None reads the model's own softmax weights; a name of
:data:`attnlimits.core.normalizers.NORMALIZERS` swaps that normaliser in on the same masked logits
(:meth:`attnlimits.models.Capture.inputs`).
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
from attnlimits.core.rowstats import row_means
from attnlimits.infra.progress import map_layers
from attnlimits.infra.statistics import ks_test
from attnlimits.models.windows import check_windows

__all__ = [
    "COUNTINGS",
    "CRITICAL_READINGS",
    "MC_SAMPLES",
    "GRADIENT_COLUMNS",
    "READINGS",
    "critical_n",
    "critical_search",
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
#: The rows the sampled readings (``E_mc``, ``E_perm``) average: every row t < SAMPLE_FROM, then one seeded random
#: row in each block of SAMPLE_STRIDE rows (a stratified sample; a fourth of the rows of a long window).
SAMPLE_FROM, SAMPLE_STRIDE = 128, 4
#: The block of the row sample that Algorithm 3's ``E_full`` and ``E_perm`` searches read (a sixteenth of the rows
#: beyond SAMPLE_FROM: each search evaluates a dozen N per length, most of them on nearly every row).
CRITICAL_STRIDE = 16


def sample_rows(top: int, seed: int, stride: int = SAMPLE_STRIDE) -> tuple[torch.Tensor, torch.Tensor]:
    """The sampled rows of a window of ``top`` rows and how many rows each stands for: ``(positions, weights)``
    (every row below :data:`SAMPLE_FROM`, then one random row per block of ``stride``)."""
    gen = torch.Generator().manual_seed(int(seed))
    head = torch.arange(min(top, SAMPLE_FROM))
    starts = torch.arange(SAMPLE_FROM, max(top, SAMPLE_FROM), stride)
    sizes = (top - starts).clamp_max(stride)
    picks = starts + (torch.rand(len(starts), generator=gen) * sizes).long()
    return torch.cat([head, picks]), torch.cat([torch.ones(len(head)), sizes.double()]).double()


def sampled_means(values, variance, positions, weights, lengths, n: int, L: int) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the stratified estimate of the mean over the rows t < L with more than n tokens from the sampled
    rows (``values`` ``(H, R)`` at ``positions`` ``(R,)``, each standing for ``weights`` rows), and its standard
    error: the Monte Carlo ``variance`` of each row (or None) plus the sampling error of the strided rows
    (their spread within the counted rows stands for the unseen spread inside each block)."""
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
        spread = v[:, strided].var(-1)
        var = var + spread * (w[strided] * (w[strided] - 1)).sum() / total**2
    return mean.cpu().numpy(), var.sqrt().cpu().numpy()


#: The value columns of :func:`distance_table`, after its keys.
_DISTANCE_VALUES = ("d_tilde", "d_max", "E", "E_mc", "E_mc_se", "E_full", "E_perm")


@dataclass(frozen=True)
class _LayerRows:
    """What Algorithms 1-2 read of one layer of one window at the grid's largest L: the weights ``alpha``
    ``(H, L, L)`` and tokens ``x``, each row's token count, the row sample of :func:`sample_rows` (``positions`` and
    the rows each stands for) and the mask (``opts``: ``first`` and ``window``)."""

    window_index: int
    layer: int
    alpha: torch.Tensor
    x: torch.Tensor
    lengths: torch.Tensor
    positions: torch.Tensor
    weights: torch.Tensor
    opts: dict


def _head_records(rows: _LayerRows, counting: str, L: int, n: int, exact: dict, sampled: dict) -> list[tuple]:
    """One record per head: row means of the ``exact`` per-row values, estimates from the ``sampled``."""
    cols = {}
    for name, values in exact.items():
        cols[name], counted = row_means(values, rows.lengths, n, L)
    sample = (rows.positions, rows.weights, rows.lengths, n, L)
    if "E_mc" in sampled:
        cols["E_mc"], cols["E_mc_se"] = sampled_means(*sampled["E_mc"], *sample)
    if "E_perm" in sampled:
        cols["E_perm"], _ = sampled_means(sampled["E_perm"], None, *sample)
    heads = rows.alpha.shape[0]
    nan = np.full(heads, np.nan)
    records = []
    for h in range(heads):
        values = (float(cols.get(name, nan)[h]) for name in _DISTANCE_VALUES)
        records.append((str(rows.window_index), rows.layer, h, L, n, counted, counting, *values))
    return records


def _sampled_readings(rows: _LayerRows, L: int, at: list[int], counting: str, draw: int, monte_carlo) -> list[dict]:
    """E_mc (mean, variance) and E_perm, where asked, on the sampled rows below L for every n of ``at`` (NaN-padded)."""
    out = [{} for _ in at]
    if not monte_carlo:
        return out
    below = rows.positions[rows.positions < L]
    a, x = rows.alpha[:, below, :L], rows.x[:, :L]
    both = {**rows.opts, "positions": below, "counting": counting}
    pad = len(rows.positions) - len(below)

    def full(t):
        return torch.nn.functional.pad(t, (0, pad), value=math.nan)

    if "E_mc" in monte_carlo:
        mc = rowstats.random_expectation(a, x, at, samples=MC_SAMPLES, seed=draw, **both)
        for j, o in enumerate(out):
            o["E_mc"] = (full(mc[0][j]), full(mc[1][j]))
    if "E_perm" in monte_carlo:
        perm = rowstats.permuted_distance(a, x, at, seed=draw + 1, **both)
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
    ell = rows.lengths.to(alpha.dtype)
    records = []
    for L in sorted({L for v in grid.values() for L in v}):  # the row's tokens depend on L
        at = [n for n in ns if L in grid[n]]
        width = L - first  # tokens of every row under the row counting
        masked = (width - ell[:L]).clamp_min(0)  # tokens of weight 0 beyond the visible ones
        if "E" in readings:
            e_row = rowstats.expectation(alpha[:, :L, :L], x[:, :L], at, counting="row", **rows.opts)
        draws = _sampled_readings(rows, L, at, "row", draw + L, monte_carlo)
        for q, n in enumerate(at):
            j = ns.index(n)
            exact = {"d_tilde": d_tilde[j, :, :L] + masked * s_norm[j, :, :L]}
            if "E" in readings:
                exact["E"] = e_row[q]
            if "E_full" in readings:
                inner = e_full[j, :, :L] * ell[:L] / (ell[:L] - n).clamp_min(1)  # sum_i ||2 y_i - o||
                exact["E_full"] = (width - n) / width * (inner + masked * out_norm[:, :L])
            records += _head_records(rows, "row", L, n, exact, draws[q])
    return records


def _distance_layer(w, layer: int, grid, *, inputs: dict, seed: int, readings, countings) -> list[tuple]:
    """Algorithms 1-2 on one layer of window ``w``: its records of :func:`distance_table`, one pass at the top L."""
    first, ns = int(inputs["exclude_sink"]), sorted(grid)
    top = max(max(v) for v in grid.values())
    alpha, x = w.inputs(layer, top, **inputs)
    window = w.window(layer, top)
    layer_seed = seed + 1_000_003 * w.index + 7919 * layer
    positions, weights = sample_rows(top, layer_seed)
    rows = _LayerRows(
        window_index=w.index,
        layer=layer,
        alpha=alpha,
        x=x,
        lengths=rowstats.row_lengths(top, first, alpha.device, window),
        positions=positions.to(alpha.device),
        weights=weights,
        opts={"first": first, "window": window},
    )
    monte_carlo = {"E_mc", "E_perm"} & set(readings)
    d_tilde, d_max, s_norm = rowstats.distances(alpha, x, ns, bound=True, kept=True, **rows.opts)
    exact_rows = {"d_tilde": d_tilde, "d_max": d_max}
    if "E" in readings:
        exact_rows["E"] = rowstats.expectation(alpha, x, ns, **rows.opts)
    if "E_full" in readings:
        exact_rows["E_full"] = rowstats.expectation(alpha, x, ns, full=True, **rows.opts)
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
    progress: bool | str | None = None,
    n_jobs: int = 1,
) -> pd.DataFrame:
    """Per-head means of d~, d_max (Theorem 1 as reconstructed) and the ``readings`` of the expectation (a subset
    of :data:`READINGS`; the columns of the others are NaN) for every N and its lengths in ``grid``, under each
    counting of a row's tokens.

    ``grid`` maps N to the lengths L it is wanted at (Alg. 1: {5: [32, ..., 1024]}; Alg. 2: {N: [1024]}). A head's
    value is its mean over the rows t < L with more than N tokens (the ``rows`` column), under each of the
    ``countings``. One pass per layer computes every row once at the largest L; shorter L are prefix means.
    ``d_tilde``, ``d_max``, ``E`` and ``E_full`` read every row (exact); the Monte Carlo readings ``E_mc`` and
    ``E_perm`` read the stratified sample of :func:`sample_rows`, and ``E_mc_se`` is the standard error of the
    head's ``E_mc`` (Monte Carlo and row sampling). The row counting (every position of the length-L row a token,
    masked ones with weight 0) follows exactly from the visible one for d~ (each masked token adds ||s||) and
    E_full (each adds ||o||, o the head's output); its ``E``, ``E_mc`` and ``E_perm`` are computed per L.
    ``d_max`` is NaN for the row counting. Columns: ``window, layer, head, L, N, rows, counting, d_tilde, d_max,
    E, E_mc, E_mc_se, E_full, E_perm``. ``seed``: the draws (per window and layer); the same seed repeats exactly.
    ``n_jobs``: windows in parallel (:func:`map_layers`).
    """
    check_windows(windows)
    unknown = [c for c in countings if c not in COUNTINGS]
    if unknown or not countings:
        raise ValueError(f"countings: must be a non-empty subset of {COUNTINGS}, got {list(countings)}")
    unknown = [r for r in readings if r not in READINGS]
    if unknown or not readings:
        raise ValueError(f"readings: must be a non-empty subset of {READINGS}, got {list(readings)}")
    inputs = {"exclude_sink": exclude_sink, "tokens": tokens, "precision": precision, "normalizer": normalizer}
    one_layer = partial(_distance_layer, grid=grid, inputs=inputs, seed=seed, readings=readings, countings=countings)
    records = [r for part in map_layers(windows, one_layer, "Alg. 1-2", progress, n_jobs) for r in part]
    # in the order of the windows and layers (so runs over disjoint windows concatenate to the whole), each layer's
    # visible counting first
    columns = ["window", "layer", "head", "L", "N", "rows", "counting", *_DISTANCE_VALUES]
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


#: The readings Algorithm 3 searches a critical N for. ``E`` is evaluated on every row that counts; ``E_full`` and
#: ``E_perm`` (with the d~ they are compared with) on the stratified row sample of :func:`sample_rows` with blocks
#: of :data:`CRITICAL_STRIDE` rows.
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
    progress: bool | str | None = None,
    n_jobs: int = 1,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Algorithm 3: for each L and reading of the expectation, the smallest N at which a two-sample KS test
    cannot tell apart the per-head means of d~ and of that reading (p >= level), at every level.

    A head's mean is over its rows (t < L, more than N tokens) in every window; the test compares the heads'
    means of d~ with their means of the reading (one value per head each, as in the paper). Lengths are solved
    shortest first; each (L, reading, level) runs :func:`critical_search`, guided by the critical fraction N/L
    found at the previous length (the first length brackets by doubling). The searches of one L run side by side
    in rounds; a round reads every layer once and evaluates every reading at every N it was asked for. Returns
    ``(scan, critical, heads)``: scan ``L, N, reading, ks_stat, p_value, window`` (one row per N evaluated),
    critical ``L, reading, ks_level, critical_N, window`` (``window = "all"``: the pooled test over the run's
    windows), and heads ``window, layer, head, L, N, reading, rows, d_tilde, expected`` (each window's per-head
    means at every evaluated (L, N): what the bootstrap over windows of :mod:`attnlimits.infra.statistics` resamples).
    ``n_jobs``: windows in parallel within each round (:func:`map_layers`); the answers do not depend on it.
    """
    check_windows(windows)
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
        chains, pending = {}, {}
        for key in chains_of:
            guess = round(fraction[key] * L) if key in fraction else None
            chains[key] = critical_search(L, key[1], guess, n_max=L - 1 - first)
            pending[key] = next(chains[key])
        while pending:
            todo = {(r, n, L) for (r, _), n in pending.items() if (r, n, L) not in results}
            if todo:
                found, records = _evaluate_ks(windows, todo, first, opts, seed, progress, n_jobs)
                results.update(found)
                heads += records
            nxt = {}
            for key, n in pending.items():
                try:
                    nxt[key] = chains[key].send(results[(key[0], n, L)][1])
                except StopIteration as stop:
                    answers[(L, *key)] = stop.value
                    if stop.value is not None:
                        fraction[key] = stop.value / L
            pending = nxt
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


def _ks_layer(w, layer: int, todo, *, first: int, opts: dict, seed: int) -> dict:
    """Algorithm 3 on one layer of window ``w``: per (reading, N, L) of ``todo``, head sums of d~, reading and rows."""
    exact = {(n, L) for r, n, L in todo if r == "E"}
    sampled = {(n, L) for r, n, L in todo if r != "E"}
    sampled_readings = sorted({r for r, _, _ in todo if r != "E"})
    top = max(L for _, _, L in todo)
    parts = {}
    window = w.window(layer, top)
    lengths = rowstats.row_lengths(top, first, device="cpu", window=window)
    heads = w.heads(layer)
    positions, weights = sample_rows(top, seed + 1_000_003 * w.index + 7919 * layer, CRITICAL_STRIDE)
    for kind, pairs in (("E", exact), ("sampled", sampled)):
        ns = sorted({n for n, _ in pairs})
        starts = {n: int(torch.searchsorted(lengths, n, right=True)) for n in ns}  # first row with > n tokens
        for group in _start_groups(starts):
            start = starts[group[0]]
            if start >= top:
                continue
            at_group = {(n, L) for n, L in pairs if n in group}
            where = {"first": first, "window": window}
            if kind == "E":
                alpha, x = w.inputs(layer, top, first_row=start, **opts)
                at = torch.arange(start, top, device=alpha.device)
                d = rowstats.distances(alpha, x, group, positions=at, **where)[0]
                e = rowstats.expectation(alpha, x, group, positions=at, **where)
                ones = torch.ones(len(at), dtype=torch.float64)
                _head_sums((d, e), at, ones, starts, at_group, "E", parts, heads)
                continue
            picked = positions >= start
            at, wt = positions[picked], weights[picked]
            a, x = w.inputs(layer, top, rows=at, **opts)  # the weights of the sampled rows only
            at = at.to(a.device)
            d = rowstats.distances(a, x, group, positions=at, **where)[0]
            for r in sampled_readings:
                if r == "E_full":
                    e = rowstats.expectation(a, x, group, positions=at, full=True, **where)
                else:
                    e = rowstats.permuted_distance(a, x, group, positions=at, seed=seed + 7 * w.index + layer, **where)
                _head_sums((d, e), at, wt, starts, at_group, r, parts, heads)
    for r, n, L in todo:  # no counted row (a sliding-window layer has none with more tokens than its window)
        parts.setdefault((r, n, L), (np.zeros(heads), np.zeros(heads), np.zeros(heads)))
    return parts


def _evaluate_ks(windows, todo, first, opts, seed, progress, n_jobs=1):
    """KS statistic and p-value for every (reading, N, L) in ``todo``, in one pass over the layers, and each
    window's per-head means (the records of :func:`critical_n`'s heads table); ``opts`` are the keyword arguments
    of :meth:`attnlimits.models.Capture.inputs`.

    Only the rows that count are computed: at N, the rows with more than N tokens (a suffix of the window, since a
    row's token count never decreases with t), so a search near N = L reads a few rows instead of all of them; the
    N of one group share the weights and one top-k per block. ``E`` is computed at its own N on every counted
    row; ``E_full`` and ``E_perm`` share their N and read the sampled rows among the counted ones
    (:func:`sample_rows`), with d~ on the same rows."""
    one_layer = partial(_ks_layer, todo=todo, first=first, opts=opts, seed=seed)
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
    values'). ``n_jobs``: windows in parallel (:func:`map_layers`).
    """
    check_windows(windows)
    if stride is not None and (isinstance(stride, bool) or not isinstance(stride, int) or stride < 1):
        raise ValueError(f"stride: must be None (every row) or an integer >= 1, got {stride!r}")
    first = int(exclude_sink)

    def one_layer(w, layer):
        records = []
        at, wt = None, None
        if stride is not None:
            at, wt = sample_rows(L, seed + 1_000_003 * w.index + 7919 * layer, stride)
        alpha, x = w.inputs(
            layer, L, exclude_sink=exclude_sink, tokens=tokens, precision=precision, normalizer=normalizer, rows=at
        )
        x = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
        shared = x[:1] if tokens != "value" else x  # the residual stream and the embeddings: the same for every head
        pair = torch.cdist(shared[:, first:], shared[:, first:])
        pair.diagonal(dim1=-2, dim2=-1).fill_(math.inf)
        delta = pair.flatten(1).amin(-1).expand(x.shape[0])  # (H,)
        window = w.window(layer, L)
        lengths = rowstats.row_lengths(L, first, alpha.device, window)
        if at is not None:
            at = at.to(alpha.device)
            lengths, wt = lengths[at], wt.to(alpha.device)
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
    progress: bool | str | None = None,
    n_jobs: int = 1,
) -> pd.DataFrame:
    """Algorithm 5: per head, g(T, eps) = mean over rows of ||softmax((l + eps v)/T) - softmax(l/T)|| / eps.

    Computed on the logits as the model feeds them to its softmax (``logit_scaling = "model"``: q.k times the
    model's scale, 1/sqrt(d_head) here) and on the raw dot products q.k (``logit_scaling = "none"``). Columns:
    ``window, layer, head, T, eps, g, logit_scaling``. ``n_jobs``: windows in parallel (:func:`map_layers`).
    """
    check_windows(windows)

    def one_layer(w, layer):
        records = []
        logits = w.logits(layer, L).double()
        scale = w[layer].scaling
        for label, values in (("model", logits), ("none", logits / scale)):
            g = rowstats.finite_difference_g(
                values, T=T, eps=eps, seed=seed + 1_000_003 * w.index + layer, reduce=False
            )
            g = g.cpu().numpy()
            for h in range(g.shape[0]):
                for i, t in enumerate(T):
                    for j, e in enumerate(eps):
                        records.append((str(w.index), layer, h, float(t), float(e), float(g[h, i, j]), label))
        return records

    records = [r for part in map_layers(windows, one_layer, "Alg. 5", progress, n_jobs) for r in part]
    return pd.DataFrame(records, columns=GRADIENT_COLUMNS)


def sink_table(windows, L: int) -> pd.DataFrame:
    """Mean weight of token 0 (the attention sink) per head over rows 1..L-1 that see it (a sliding-window layer's
    rows t < w). Columns ``window, layer, head, sink_weight``."""
    check_windows(windows)
    records = []
    for w in windows:
        for layer in w.layer_ids:
            alpha, _ = w.inputs(layer, L)
            seen = L if w.window(layer, L) is None else min(L, w.window(layer, L))
            sink = alpha[:, 1:seen, 0].mean(-1).cpu().numpy()
            records += [(str(w.index), layer, h, float(sink[h])) for h in range(len(sink))]
    return pd.DataFrame(records, columns=["window", "layer", "head", "sink_weight"])
