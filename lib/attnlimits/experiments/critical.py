"""Algorithm 3 of the paper: the critical N, the smallest N at which a two-sample KS test cannot tell the heads'
mean d~ from their mean of a reading of the expectation, found by a search on a run's windows.

- :func:`critical_n`              Algorithm 3 on a list of window captures: for each length, reading and KS level a
                                  search (:func:`critical_search`, a bracket and bisection on the KS decision of
                                  :mod:`attnlimits.infra.ks`), the searches of one length side by side in rounds; it
                                  returns the scan, the critical N and each window's per-head means
                                  (``critical_heads``).

What the search computed is read (recomputed on other windows or heads, its intervals over windows) by
:mod:`attnlimits.experiments.critical_reading`, which imports the book's statistics; this module does not, so a
change to the statistics recomputes no run.

Every function is seeded: the same call gives the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import numpy as np
import pandas as pd
import torch

from attnlimits.core import rowstats
from attnlimits.experiments.row_sample import check_stride, on_rows, row_samples, sample_rows
from attnlimits.infra.ks import KS_LEVELS, ks_test, reaches
from attnlimits.infra.progress import map_layers
from attnlimits.models.windows import check_windows

__all__ = [
    "CRITICAL_READINGS",
    "LOOKAHEAD",
    "critical_n",
    "critical_search",
]


# ----------------------------------------------------------------------------------------------------------------
# the search on a run's windows
# ----------------------------------------------------------------------------------------------------------------
def critical_search(L: int, level: float, guess: int | None = None, n_max: int | None = None):
    """Generator: yields the N it wants tested at L, receives its p-value, returns the critical N.

    It brackets the change of the decision p >= level (:func:`attnlimits.infra.ks.reaches`), then bisects inside
    the bracket, so the answer N has p(N) >= level and p(N - 1) < level, both evaluated (N = 1 when already
    p(1) >= level). Without a ``guess`` the bracket grows by doubling from N = 1; with one (the critical fraction of
    a shorter L, scaled) it starts there and walks down or up in doubling steps. ``n_max`` is the largest N that
    leaves a row with a dropped token (L - 1, or L - 2 without the sink); every N up to it may be tried. Returns None
    when no N <= n_max reaches the level.
    """
    n_max = L - 1 if n_max is None else n_max
    lo, hi = 0, None  # invariant: p(lo) < level (lo = 0 stands for "N = 1 is the first candidate"), p(hi) >= level
    if guess is None:
        n = 1
        while hi is None:
            p = yield n
            if reaches(p, level):
                hi = n
            else:
                lo = n
                if n >= n_max:
                    return None
                n = min(2 * n, n_max)
    else:
        n, step = min(max(int(guess), 1), n_max), max(1, L // 64)
        p = yield n
        if reaches(p, level):
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
                if reaches(p, level):
                    hi = n
                else:
                    lo, step = n, 2 * step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = yield mid
        if reaches(p, level):
            hi = mid
        else:
            lo = mid
    return hi


#: How many of its decisions ahead each search of Algorithm 3 is evaluated: a round computes the N a search asks
#: next and, for each outcome, the N it would ask after it (2**LOOKAHEAD - 1 per search and round), so a search
#: takes about 1/LOOKAHEAD of the rounds, each reading every layer once. The critical N are those of one N per
#: round: a search only ever reads the p-values of the N it asks, and a p-value does not depend on what else its
#: round evaluates (the permutation null draws each row alike in any grouping,
#: :func:`attnlimits.core.rowstats.permuted_distance`).
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
#: stratified row sample of :func:`sample_rows` with blocks of :data:`CRITICAL_STRIDE`
#: rows (or :data:`COARSER` times ``row_stride``, where that is coarser).
CRITICAL_READINGS = ("E", "E_full", "E_perm")


def critical_n(
    windows,
    lengths: Sequence[int],
    levels: Sequence[float] = KS_LEVELS,
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
    ``E`` reads every row that counts; an integer: the stratified row sample of :func:`sample_rows`
    with blocks of that many rows (each head's means weighted by the rows each sampled row stands for, the ``rows``
    of the heads table then the rows the sample stands for). ``E_full`` and ``E_perm`` always read a row sample
    (:data:`CRITICAL_READINGS`). Lengths are solved shortest first; each (L, reading, level) runs
    :func:`critical_search`, guided by the critical fraction N/L found at the previous length (the first length
    brackets by doubling). The searches of one L run side by side in rounds; a round reads every layer once and
    evaluates every reading at every N its searches ask in their next :data:`LOOKAHEAD` decisions. ``levels``:
    by default :data:`attnlimits.infra.ks.KS_LEVELS`. Returns ``(scan, critical, heads)``: scan ``L, N, reading,
    ks_stat, p_value, window`` (one row per N evaluated), critical ``L, reading, ks_level, critical_N, window``
    (``window = "all"``: the pooled test over the run's windows), and heads ``window, layer, head, L, N, reading,
    rows, d_tilde, expected`` (each window's per-head means at every evaluated (L, N): what
    :func:`critical_intervals` resamples).
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
            d = on_rows(rowstats.distances, a, x, at, **on)[0]
            if kind == "E":
                e = on_rows(rowstats.expectation, a, x, at, **on)
                _head_sums((d, e), at, wt, starts, at_group, "E", parts, heads)
                continue
            for r in sampled_readings:
                if r == "E_full":
                    e = on_rows(rowstats.expectation, a, x, at, full=True, **on)
                else:
                    e = on_rows(rowstats.permuted_distance, a, x, at, seed=seed + 7 * w.index + layer, **on)
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
