"""The paper's quantities from 1,024 tokens up to a model's whole context, on a sample of query rows (chapter 35).

Per length L, ``rows`` query rows are drawn (:func:`sample_rows`: one seeded row in each of ``rows`` equal blocks
of ``0..L-1``, or every row when ``rows >= L``), their weights recomputed from the capture's q and k
(:class:`attnlimits.models.kv_capture.LongCapture`), and every per-head value is the stratified mean over the sampled
rows that count, each row weighted by the rows of its block. So the cost grows like rows x L, not L^2. Every value
carries its standard error from the row sample (0 when every row was read) and says how many rows it read
(``rows_read``) and how many it stands for (``rows``).

The quantities (the ``quantity`` column of :attr:`LongResults.stats`; the experiments' own kernels of
:mod:`attnlimits.core.rowstats` on the sampled rows):

- ``max_weight``, ``max_weight_x_len`` (the largest weight, and it times the row's token count l: flat when the
  weights vanish like 1/L, Lemma 1), ``rest_max_x_len`` (the same without token 0, the attention sink: the largest
  other weight renormalised, times the other tokens' count), ``sink_weight`` (token 0's weight, on the rows that
  see it); also under every other normaliser of the paper's family (:func:`attnlimits.core.normalizers.names`) on
  the same logits;
- ``d_tilde`` and ``E`` (the book's reconstruction of Eq. (10)) at Algorithm 1's N and on a geometric grid of N
  (Algorithm 3's critical N is read on that grid), ``E_full`` (the inner factor N/(l-1) replaced by 1) at N;
- ``ns_frac`` (Algorithm 4's N_s/N on the values) and ``g`` (Algorithm 5's g(T, eps) on the model's logits).

The windows (passages of the text, spread evenly over it) are run one at a time, each with its own Algorithm 3
decision, and each is summarised over its heads (:func:`summarize`): the windows are the units chapter 35's
intervals resample, and what the book ships of a run is its windows' summaries (:class:`LongSummaries`).

One concept, one module (over 600 lines): the long-context study, from the row sample through every
quantity to the stored result; each quantity is a few lines on the same sampled rows, and split they would each
need the sample's state.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch

from attnlimits import models
from attnlimits.core import normalizers, rowstats
from attnlimits.experiments.summaries import STATS, over_heads
from attnlimits.infra import cache, presets, provenance
from attnlimits.infra.ks import KS_LEVEL, first_reaching, ks_test, reaches
from attnlimits.infra.profiling import peak_memory
from attnlimits.infra.progress import progress_bar
from attnlimits.models import registry, texts
from attnlimits.models.describing import model_record
from attnlimits.models.kv_capture import capture_ids, exactness
from attnlimits.models.windows import check_windows, token_count, window_bos
from attnlimits.models.windows import windows as cut_windows

__all__ = [
    "BOOK_MODELS",
    "COLUMNS",
    "PRESETS",
    "BookRuns",
    "LongPreset",
    "LongResults",
    "LongSummaries",
    "SUMMARY_COLUMNS",
    "book_results",
    "critical_grid",
    "critical_table",
    "get_preset",
    "in_group",
    "layer_groups",
    "layer_type",
    "pooled",
    "resolve_lengths",
    "results",
    "run",
    "sample_rows",
    "stats_table",
    "summarize",
    "summary_table",
    "window_folder",
    "window_run",
]


@dataclass(frozen=True)
class LongPreset(presets.StudyPreset):
    """The lengths, windows, row sample and grids of the long-context study.

    ``windows``: passages of the longest length, spread evenly over the text. ``lengths``: explicit lengths, or
    None for the powers of two from ``min_length`` up to ``max_length`` (None: the model's context). ``rows``:
    query rows sampled per length (every row when ``rows >= L``); ``g_rows`` the rows of Algorithm 5 (its T grid
    costs two normalisations per T). ``N``: Algorithm 1's fixed N; ``critical_points`` and ``critical_fractions``:
    the N grid Algorithm 3's critical N is read on (:func:`critical_grid`).
    """

    windows: int
    rows: int
    max_length: int | None
    min_length: int = 1024
    lengths: tuple[int, ...] | None = None
    N: int = 5
    critical_points: int = 5
    critical_fractions: tuple[float, ...] = (0.5, 0.7, 0.8, 0.9, 0.95)
    alg4_N: tuple[int, ...] = (1, 4, 16, 64)
    T: tuple[float, ...] = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)
    eps: float = 1e-3
    g_rows: int = 64
    ks_level: float = KS_LEVEL

    def lengths_for(self, context: int | None) -> list[int]:
        """The lengths this preset reads on a model whose context is ``context`` tokens (None: unbounded)."""
        if self.lengths is not None:
            return list(self.lengths)
        top = min(v for v in (self.max_length, context) if v is not None)
        out, L = [], self.min_length
        while L <= top:
            out.append(L)
            L *= 2
        return out


PRESETS = presets.Registry(
    "long context",
    LongPreset,
    # what the book ships (chapter 35, `make results`): each model up to 8,192 tokens, 8 windows spread over the
    # text, 32 rows per length (16 for Algorithm 5 and the other normalisers)
    LongPreset(name="reduced", windows=8, rows=32, max_length=8192, g_rows=16),
    # `make long`: each model's whole context (Gemma-3-270M: 32,768 tokens), two windows, 128 rows per length
    LongPreset(name="full", windows=2, rows=128, max_length=None, g_rows=64),
    LongPreset(
        name="quick",
        windows=1,
        rows=24,
        max_length=256,
        min_length=64,
        critical_points=3,
        alg4_N=(1, 4, 16),
        T=(1e-2, 1.0, 100.0),
        g_rows=8,
    ),
)


def get_preset(preset: str | LongPreset) -> LongPreset:
    """A preset of the long-context study by name (``"reduced"``: the book's build, ``"full"``: each model's whole
    context, ``"quick"``: tests) or the given one."""
    return PRESETS.get(preset)


def resolve_lengths(preset: LongPreset, lengths, context: int | None) -> list[int]:
    """The lengths to read (``lengths`` when given, else the preset's), checked: integers >= 2, increasing, none
    beyond the model's ``context``."""
    out = preset.lengths_for(context) if lengths is None else list(lengths)
    if not out or any(isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 2 for v in out):
        raise ValueError(f"lengths: must be a non-empty list of integers >= 2, got {out!r}")
    out = [int(v) for v in out]
    if out != sorted(set(out)):
        raise ValueError(f"lengths: must be increasing without repeats, got {out}")
    if context is not None and out[-1] > context:
        raise ValueError(f"lengths: {out[-1]} tokens exceed the model's context of {context}")
    return out


def sample_rows(L: int, rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` query positions below L, one uniformly drawn in each of ``rows`` equal blocks of ``0..L-1``, and
    the block sizes (how many rows each stands for); every row with weight 1 when ``rows >= L``."""
    if rows >= L:
        return torch.arange(L), torch.ones(L, dtype=torch.float64)
    edges = torch.arange(rows + 1, dtype=torch.int64) * L // rows
    sizes = edges[1:] - edges[:-1]
    gen = torch.Generator().manual_seed(int(seed))
    picks = edges[:-1] + (torch.rand(rows, generator=gen, dtype=torch.float64) * sizes).long()
    return picks, sizes.double()


def _means(values: torch.Tensor, weights: torch.Tensor, keep: torch.Tensor):
    """Per head, the stratified mean of ``values`` (H, R) over the kept rows, its standard error, the rows read and
    the rows they stand for. Every row read (weights 1): the plain mean, standard error 0. Else the spread of the
    kept rows stands for the unseen spread inside each block: se^2 = s^2 sum w (w - 1) / (sum w)^2."""
    H = values.shape[0]
    read = int(keep.sum())
    if read == 0:
        return np.full(H, np.nan), np.full(H, np.nan), 0, 0.0
    v, w = values[:, keep].double(), weights[keep].to(values.device)
    total = float(w.sum())
    if bool((w == 1).all()):
        return v.mean(-1).cpu().numpy(), np.zeros(H), read, total
    mean = (v * w).sum(-1) / total
    spread = v.var(-1) if read > 1 else torch.full_like(mean, math.nan)
    se = (spread * float((w * (w - 1)).sum()) / total**2).sqrt()
    return mean.cpu().numpy(), se.cpu().numpy(), read, total


def layer_type(capture, layer: int) -> str:
    """``"sliding"`` for a sliding-window layer of the capture (at its full length), else ``"full"``."""
    return "full" if capture.window(layer, capture.seq_len) is None else "sliding"


#: The columns of :attr:`LongResults.stats` (N and T are NaN where a quantity has none).
COLUMNS = [
    "window",
    "layer",
    "layer_type",
    "head",
    "L",
    "normalizer",
    "quantity",
    "N",
    "T",
    "value",
    "se",
    "rows_read",
    "rows",
]


def _weight_stats(a: torch.Tensor, pos: torch.Tensor, lengths: torch.Tensor, window) -> dict:
    """Per-row weight quantities of alpha ``a`` (H, R, L) at positions ``pos``: ``{quantity: (values, keep)}``."""
    top = a.amax(-1)
    ell = lengths.to(a.dtype)
    sees_sink = (pos >= 1) & (pos < window if window is not None else torch.ones_like(pos, dtype=torch.bool))
    sink = torch.where(sees_sink, a[..., 0], 0.0)
    others = ell - sees_sink.to(a.dtype)  # tokens other than token 0
    rest = a[..., 1:].amax(-1) / (1 - sink).clamp_min(torch.finfo(a.dtype).tiny)
    everywhere = torch.ones_like(pos, dtype=torch.bool)
    return {
        "max_weight": (top, everywhere),
        "max_weight_x_len": (top * ell, everywhere),
        "rest_max_x_len": (rest * others, others >= 1),
        "sink_weight": (sink, sees_sink),
    }


def stats_table(captures, lengths, preset: str | LongPreset = "reduced", *, seed: int = 0, progress=None):
    """Every quantity of the module docstring per window, layer, head and length, on the sampled rows
    (columns :data:`COLUMNS`). ``captures``: :func:`attnlimits.models.kv_capture.capture_long` (or
    :func:`attnlimits.experiments.capture_windows`) windows at least max(lengths) tokens long. With
    ``rows >= L`` (and ``g_rows >= L``) every row is read and the values equal the experiments' tables on the same
    capture (Algorithms 1, 4, 5 and the sink weights)."""
    check_windows(captures)
    p = get_preset(preset)
    held = min(c.seq_len for c in captures)
    lengths = resolve_lengths(p, lengths, held)
    records = []
    pairs = [(w, layer) for w in captures for layer in w.layer_ids]
    for w, layer in progress_bar(pairs, "long context", progress):
        kind = layer_type(w, layer)
        for L in lengths:
            records += [(str(w.index), layer, kind, h, L, *r) for h, r in _length_records(w, layer, L, p, seed)]
    frame = pd.DataFrame(records, columns=["window", "layer", "layer_type", "head", "L", *COLUMNS[5:]])
    return frame[COLUMNS]


def _length_records(w, layer: int, L: int, p: LongPreset, seed: int) -> list[tuple]:
    """``(head, (normalizer, quantity, N, T, value, se, rows_read, rows))`` of one layer at length L."""
    out = []

    def add(normalizer, quantity, values, weights, keep, n=math.nan, T=math.nan, exact=None):
        """Records of the heads' means of ``values`` over the kept rows (``exact``: the means already)."""
        if exact is None:
            mean, se, read, total = _means(values, weights, keep)
        else:
            mean, se, read, total = exact, np.zeros(len(exact)), len(weights), float(len(weights))
        for h in range(len(mean)):
            out.append((h, (normalizer, quantity, n, T, float(mean[h]), float(se[h]), read, total)))

    pos, wt = sample_rows(L, p.rows, seed + 1_000_003 * w.index + L)
    alpha, x = w.inputs(layer, L, precision="float64", rows=pos)
    pos = pos.to(alpha.device)
    window = w.window(layer, L)
    lengths = rowstats.row_lengths(L, 0, alpha.device, window)[pos]
    where = {"window": window, "positions": pos}
    for quantity, (values, keep) in _weight_stats(alpha, pos, lengths, window).items():
        add("softmax", quantity, values, wt, keep)
    grid = critical_grid(L, p)
    # Algorithms 1-3 in the model's own float32, as the experiments read them (within 1e-5 of float64)
    alpha32, x32 = w.inputs(layer, L, precision="float32", rows=pos.cpu())
    d = rowstats.distances(alpha32, x32, grid, **where)[0]
    for reading, full in READINGS.items():
        e = rowstats.expectation(alpha32, x32, grid, full=full, **where)
        for j, n in enumerate(grid):
            add("softmax", reading, e[j], wt, lengths > n, n=n)
    for j, n in enumerate(grid):
        add("softmax", "d_tilde", d[j], wt, lengths > n, n=n)
    ns = [n for n in p.alg4_N if n < L]
    if ns:
        unit = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
        frac, _, radius = rowstats.separability(alpha, unit, ns, **where)
        for j, n in enumerate(ns):
            add("softmax", "ns_frac", frac[j], wt, (lengths > n) & (radius[j] > 0).all(0), n=n)
    _logit_records(w, layer, L, p, seed, add)
    return out


def _logit_records(w, layer: int, L: int, p: LongPreset, seed: int, add) -> None:
    """On the logits of ``g_rows`` sampled rows: Algorithm 5's g(T, eps) (every row: exactly
    :func:`attnlimits.experiments.gradient_table`'s per-head means, the same directions), and the weight quantities
    under every other normaliser of the paper's family (:func:`attnlimits.core.normalizers.names`) applied to the
    same logits."""
    pos, wt = sample_rows(L, p.g_rows, seed + 1_000_003 * w.index + 7 * L + 1)
    logits = w.logits(layer, L, rows=pos).double()
    pos = pos.to(logits.device)
    window = w.window(layer, L)
    lengths = rowstats.row_lengths(L, 0, logits.device, window)[pos]
    for name in normalizers.names("paper"):
        if name == "softmax":
            continue
        a = normalizers.NORMALIZERS[name](logits, dim=-1)
        for quantity in ("max_weight_x_len", "sink_weight"):
            values, keep = _weight_stats(a, pos, lengths, window)[quantity]
            add(name, quantity, values, wt, keep & (lengths >= 2))  # a 1-token row's weight is 1 under any of them
    g_seed = seed + 1_000_003 * w.index + layer
    everywhere = torch.ones(len(pos), dtype=torch.bool, device=logits.device)
    if p.g_rows >= L:  # every row: the per-head means of the experiments' kernel, standard error 0
        g = rowstats.finite_difference_g(logits, T=p.T, eps=[p.eps], seed=g_seed, reduce=False)[..., 0]
        for i, t in enumerate(p.T):
            add("softmax", "g", None, wt, everywhere, T=t, exact=g[:, i].cpu().numpy())
        return
    H, R = logits.shape[:2]
    # every row its own "head": the per-row values (the same directions as the rows drawn together)
    per_row = rowstats.finite_difference_g(logits.reshape(H * R, 1, L), T=p.T, eps=[p.eps], seed=g_seed, reduce=False)
    per_row = per_row[..., 0].reshape(H, R, len(p.T))
    for i, t in enumerate(p.T):
        add("softmax", "g", per_row[..., i], wt, everywhere, T=t)


#: The readings of the expectation the study compares d~ with: the book's reconstruction of Eq. (10) and the
#: reading with the inner factor N/(l - 1) replaced by 1 (the value of ``full`` in
#: :func:`attnlimits.core.rowstats.expectation`).
READINGS = {"E": False, "E_full": True}


def critical_grid(L: int, p: LongPreset) -> list[int]:
    """The N at which Algorithm 3's decision is read at length L: ``critical_points`` geometric from 1 to L/8 (where
    the reading E_full is decided), then the fractions ``critical_fractions`` of L (where E is), and Algorithm
    1's N."""
    small = np.round(np.geomspace(1, max(L / 8, 1), p.critical_points)).astype(int)
    large = [round(f * L) for f in p.critical_fractions]
    return sorted({int(n) for n in (*small, *large, p.N) if 1 <= n < L})


# ----------------------------------------------------------------------------------------------------------------
# Algorithm 3 on the N grid, with the uncertainty the row sample allows
# ----------------------------------------------------------------------------------------------------------------
#: Parametric draws of the heads' means (each from its mean and standard error) behind every interval.
DRAWS = 400


def pooled(stats: pd.DataFrame) -> pd.DataFrame:
    """Each head's value pooled over the windows (weighted by the rows each stands for), with its standard error:
    one row per (layer, layer_type, head, L, normalizer, quantity, N, T)."""
    keys = ["layer", "layer_type", "head", "L", "normalizer", "quantity", "N", "T"]
    t = stats.dropna(subset=["value"]).assign(
        _w=lambda f: f.rows, _wv=lambda f: f.rows * f.value, _wse=lambda f: (f.rows * f.se) ** 2
    )
    g = t.groupby(keys, dropna=False)[["_w", "_wv", "_wse", "rows_read"]].sum().reset_index()
    g["value"] = g._wv / g._w
    g["se"] = np.sqrt(g._wse) / g._w
    return g.drop(columns=["_w", "_wv", "_wse"])


def layer_groups(table: pd.DataFrame) -> list[str]:
    """The layer groups of a table's ``layer_type`` column: ``full`` only, or ``all``, ``full`` and ``sliding`` for
    a model with both kinds of layer."""
    kinds = sorted(set(table.layer_type))
    return ["all", *kinds] if len(kinds) > 1 else kinds


def in_group(table: pd.DataFrame, group: str) -> pd.DataFrame:
    """The rows of ``table`` in a layer group of :func:`layer_groups` (``all``: every row)."""
    return table if group == "all" else table[table.layer_type == group]


def critical_table(stats: pd.DataFrame, level: float = KS_LEVEL, *, seed: int = 0) -> pd.DataFrame:
    """Algorithm 3's decision on the N grid (:func:`critical_grid`): per length, reading of the expectation
    (:data:`READINGS`) and layer group (``all``, and ``full`` / ``sliding`` when both exist), the first N of the
    grid at which a two-sample KS test cannot tell the heads' mean d~ from their mean of the reading
    (p >= ``level``), its fraction N / L, and the 95 % interval of that N over :data:`DRAWS` parametric draws of
    every head's means (each from its mean and its row-sampling standard error). NaN where no N of the grid reaches
    the level (``critical_N_hi`` is NaN, an open end, when some draws reach none). Columns ``L, reading,
    layer_type, level, critical_N, critical_frac, critical_N_lo, critical_N_hi, heads``."""
    if not 0 < level < 1:
        raise ValueError(f"level: must lie in (0, 1), got {level}")
    t = pooled(stats[(stats.normalizer == "softmax") & stats.quantity.isin(["d_tilde", *READINGS])])
    out = []
    for group in layer_groups(t):
        for L, at in in_group(t, group).groupby("L"):
            wide = at.pivot_table(index=["layer", "head"], columns=["N", "quantity"], values=["value", "se"])
            for reading in READINGS:
                found = _critical(wide, reading, level, np.random.default_rng(seed))
                out.append((int(L), reading, group, level, found[0], found[0] / L, *found[1:]))
    columns = ["L", "reading", "layer_type", "level", "critical_N", "critical_frac", "critical_N_lo"]
    return pd.DataFrame(out, columns=[*columns, "critical_N_hi", "heads"])


def _critical(wide: pd.DataFrame, reading: str, level: float, rng) -> tuple[float, float, float, int]:
    """(critical N, its interval's ends, heads) on the grid of ``wide`` (per head: value and se per (N, quantity))."""
    grid = []  # the N with at least two heads to test: (N, d~, the reading, which heads have both)
    for n in sorted({n for n, q in wide["value"].columns if q == reading}):
        d, e = wide["value"][(n, "d_tilde")], wide["value"][(n, reading)]
        ok = (d.notna() & e.notna()).to_numpy()
        if ok.sum() >= 2:
            grid.append((n, d, e, ok))
    found = first_reaching(((n, ks_test(d[ok], e[ok])[1]) for n, d, e, ok in grid), level)
    first = math.nan if found is None else found[0]
    draws = np.full(DRAWS, np.nan)
    heads = 0
    for n, d, e, ok in grid:
        heads = max(heads, int(ok.sum()))
        sd, se = (np.nan_to_num(wide["se"][(n, q)].to_numpy()[ok]) for q in ("d_tilde", reading))
        for b in np.flatnonzero(np.isnan(draws)):
            dd = d.to_numpy()[ok] + rng.standard_normal(len(sd)) * sd
            ee = e.to_numpy()[ok] + rng.standard_normal(len(se)) * se
            if reaches(ks_test(dd, ee)[1], level):
                draws[b] = n
        if not np.isnan(draws).any() and n >= first:  # every draw and the critical N found (NaN: not yet)
            break
    if np.isnan(draws).all():
        return first, math.nan, math.nan, heads
    lo, hi = np.nanpercentile(draws, [2.5, 97.5])
    return first, float(lo), float(hi) if not np.isnan(draws).any() else math.nan, heads


# ----------------------------------------------------------------------------------------------------------------
# a run, its summaries over heads, its provenance and the results cache
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class LongResults:
    """The long-context tables of one model and text, per head: ``stats`` (:data:`COLUMNS`), ``critical``
    (:func:`critical_table` of each window on its own, ``window`` first), ``exactness`` (the SDPA capture against
    the eager one per layer type: :func:`attnlimits.models.kv_capture.exactness`; empty when not checked) and
    ``provenance`` (model, text, preset, lengths, rows, windows and their start offsets, seed, seconds, the run's
    own peak memory (:func:`attnlimits.infra.profiling.peak_memory`), the text's tokens, whether windows start with
    BOS and how many heads the model has). What the chapter reads of it is :func:`summarize`'s."""

    stats: pd.DataFrame
    critical: pd.DataFrame
    exactness: pd.DataFrame
    provenance: dict

    TABLES = ("stats", "critical", "exactness")

    def save(self, folder) -> Path:
        """Write ``long_<table>.csv`` for each of :attr:`TABLES` and ``long_provenance.json`` into ``folder``
        (:func:`_save`); returns ``folder``."""
        return _save(self, folder, "long_")

    @classmethod
    def load(cls, folder) -> LongResults:
        """The tables and provenance :meth:`save` wrote into ``folder``."""
        return _load(cls, folder, "long_", {"window": str})


def _save(res, folder, prefix: str) -> Path:
    """Write ``<prefix><table>.csv`` for each table of ``res`` (floats to 17 significant digits, so that they read
    back exactly) and ``<prefix>provenance.json`` into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in res.TABLES:
        getattr(res, name).to_csv(folder / f"{prefix}{name}.csv", index=False, float_format="%.17g")
    (folder / f"{prefix}provenance.json").write_text(json.dumps(res.provenance, indent=2, sort_keys=True) + "\n")
    return folder


def _load(cls, folder, prefix: str, dtype: dict):
    """What :func:`_save` wrote into ``folder``, as ``cls``. An empty table (no exactness checked) reads back empty."""
    folder = Path(folder)
    tables = {}
    for name in cls.TABLES:
        try:
            tables[name] = pd.read_csv(folder / f"{prefix}{name}.csv", dtype=dtype)
        except pd.errors.EmptyDataError:
            tables[name] = pd.DataFrame()
    return cls(**tables, provenance=json.loads((folder / f"{prefix}provenance.json").read_text()))


#: The columns of :attr:`LongSummaries.summary`: a window's heads summarised per layer group (``layer_type``:
#: ``all``, ``full`` or ``sliding``, :func:`layer_groups`) and grid point, with the statistics over heads of the
#: experiments' shipped windows (:data:`attnlimits.experiments.summaries.STATS`).
SUMMARY_COLUMNS = ["window", "layer_type", "L", "normalizer", "quantity", "N", "T", *STATS]


def summary_table(stats: pd.DataFrame) -> pd.DataFrame:
    """Each window's heads summarised over heads per layer group, L, normaliser, quantity, N and T
    (:data:`SUMMARY_COLUMNS`): how many heads have a value, their mean, minimum, quantiles and maximum. The window
    is the unit an interval resamples (a passage of text); its heads, which share its tokens, are summarised first,
    as the experiments' windows are (:func:`attnlimits.experiments.summaries.over_heads`)."""
    parts = []
    for group in layer_groups(stats):
        t = in_group(stats, group).rename(columns={"quantity": "measure"})
        t = t.assign(window=t["window"].astype(int))
        s = over_heads(t, ["L", "normalizer", "measure", "N", "T"], ["value"])
        parts.append(s.drop(columns="quantity").rename(columns={"measure": "quantity"}).assign(layer_type=group))
    return pd.concat(parts, ignore_index=True)[SUMMARY_COLUMNS]


@dataclass
class LongSummaries:
    """What chapter 35 reads of a run, window by window: ``summary`` (:func:`summary_table`), ``critical`` (each
    window's own Algorithm 3 decision, :func:`critical_table`), ``exactness`` (the first window's check of the SDPA
    capture against the eager one) and ``provenance`` (:class:`LongResults`'s, with every window's number and start
    offset, the seconds summed over windows and the largest peak memory). What the book ships of chapter 35."""

    summary: pd.DataFrame
    critical: pd.DataFrame
    exactness: pd.DataFrame
    provenance: dict

    TABLES = ("summary", "critical", "exactness")

    def save(self, folder) -> Path:
        """Write ``<table>.csv`` for each of :attr:`TABLES` and ``provenance.json`` into ``folder``."""
        return _save(self, folder, "")

    @classmethod
    def load(cls, folder) -> LongSummaries:
        """What :meth:`save` wrote into ``folder``."""
        return _load(cls, folder, "", {"window": int})

    @classmethod
    def joined(cls, parts: list[LongSummaries]) -> LongSummaries:
        """Runs of single windows as one run: their tables stacked, the exactness of the one that checked it, and
        one provenance (each window's number and start, the seconds summed, the largest peak memory)."""
        if not parts:
            raise ValueError("parts: needs at least one run")
        prov = dict(parts[0].provenance)
        prov["windows"] = [w for p in parts for w in p.provenance["windows"]]
        prov["window_starts"] = [s for p in parts for s in p.provenance["window_starts"]]
        prov["seconds"] = {k: round(sum(p.provenance["seconds"][k] for p in parts), 3) for k in prov["seconds"]}
        prov["peak_memory_gb"] = max(p.provenance["peak_memory_gb"] for p in parts)
        scopes = {p.provenance.get("peak_memory_scope") for p in parts}
        prov["peak_memory_scope"] = scopes.pop() if len(scopes) == 1 else "process"
        checked = [p.exactness for p in parts if len(p.exactness)]
        return cls(
            pd.concat([p.summary for p in parts], ignore_index=True),
            pd.concat([p.critical for p in parts], ignore_index=True),
            checked[0] if checked else pd.DataFrame(),
            prov,
        )

    def text_windows(self, length: int) -> int:
        """How many windows of ``length`` tokens the run's text holds for the run's model (its tokenizer)."""
        return self.provenance["text_tokens"] // (length - self.provenance["bos"])

    @property
    def label(self) -> str:
        """The model's name as the book shows it."""
        return self.provenance["model"].get("model_id", "model").split("/")[-1]

    @property
    def windows(self) -> list[int]:
        """The windows read (the units every interval resamples)."""
        return sorted(int(w) for w in self.provenance["windows"])


def summarize(res: LongResults) -> LongSummaries:
    """A run's per-head tables as the chapter reads them: summarised over heads per window (:func:`summary_table`),
    with its per-window critical N, its exactness and its provenance."""
    critical = res.critical.assign(window=res.critical["window"].astype(int)) if len(res.critical) else res.critical
    return LongSummaries(summary_table(res.stats), critical, res.exactness, res.provenance)


#: The length at which every run checks its SDPA capture against the eager one (beyond Gemma's 512-token window).
EXACTNESS_LENGTH = 1024


def text_tokens(model, text) -> int:
    """How many tokens the text holds for this model's tokenizer (from its first chapter: what the windows cut)."""
    return token_count(model, text)


def _context(model) -> int | None:
    return models.facts(model).get("max_positions")


def _capture(model, text, length: int, window: int, total: int):
    """Window ``window`` of ``total`` spread evenly over the text (:func:`attnlimits.models.windows.windows`),
    captured by one SDPA forward pass: the capture and the window's first text token."""
    ids, starts = cut_windows(model, text, length=length, count=1, first=window, total=total, return_starts=True)
    return capture_ids(model, ids[0], index=window, bos=window_bos(model) is not None), starts[0]


def run(
    model,
    text,
    preset: str | LongPreset = "reduced",
    *,
    lengths=None,
    rows: int | None = None,
    windows: int | None = None,
    only=None,
    exact: bool = True,
    seed: int = 0,
    progress=None,
) -> LongResults:
    """The long-context study of ``model`` on ``text``: window by window, an SDPA capture of the longest length, its
    :func:`stats_table` and its own :func:`critical_table` (one window's q, k, v are held at a time). The windows
    are ``windows`` (the preset's by default) spread evenly over the whole text, passages from every part of it;
    ``only``: the numbers of the windows of that layout to run (all by default). ``exact``: also compare the SDPA
    capture with the eager one on the first :data:`EXACTNESS_LENGTH` tokens. ``lengths``, ``rows`` and
    ``windows`` override the preset's, and are checked before anything is captured: lengths up to the model's
    context, rows and windows integers >= 1, and a text that holds the windows."""
    p = get_preset(preset)
    for name, value in (("rows", rows), ("windows", windows)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name}: must be an integer >= 1, got {value!r}")
    lens = resolve_lengths(p, lengths, _context(model))
    p = p.replace(
        lengths=tuple(lens), rows=p.rows if rows is None else rows, windows=p.windows if windows is None else windows
    )
    chosen = list(range(p.windows)) if only is None else list(only)
    if not chosen or any(isinstance(w, bool) or not isinstance(w, int) or not 0 <= w < p.windows for w in chosen):
        raise ValueError(f"only: must be window numbers in 0..{p.windows - 1}, got {only!r}")
    tokens, bos = text_tokens(model, text), window_bos(model) is not None
    if tokens // (lens[-1] - bos) < p.windows:
        raise ValueError(
            f"windows: the text holds {tokens // (lens[-1] - bos)} windows of {lens[-1]} tokens for this model, "
            f"not {p.windows}"
        )
    with peak_memory() as memory:  # this run's own peak, not the process's (it may have run other studies)
        started = time.perf_counter()
        captured, parts, critical, kinds, starts = 0.0, [], [], {}, []
        for i in chosen:
            t0 = time.perf_counter()
            cap, start = _capture(model, text, lens[-1], i, p.windows)
            captured += time.perf_counter() - t0
            starts.append(start)
            stats = stats_table([cap], lens, p, seed=seed, progress=progress)
            parts.append(stats)
            critical.append(critical_table(stats, p.ks_level, seed=seed).assign(window=str(i)))
            kinds = {str(layer): layer_type(cap, layer) for layer in cap.layer_ids}
            del cap  # one window's q, k and v at a time
        stats = pd.concat(parts, ignore_index=True)
        critical = pd.concat(critical, ignore_index=True)
        checked = time.perf_counter()
        agreed = exactness(model, text, length=min(EXACTNESS_LENGTH, lens[-1])).reset_index() if exact else None
    prov = {
        "model": model_record(model),
        "text": text.provenance.as_dict() if hasattr(text, "provenance") else {"name": "string"},
        "preset": p.as_dict(),
        "windows": chosen,
        "window_starts": starts,
        "seed": seed,
        "layer_types": kinds,
        "heads": int(stats.groupby("layer")["head"].nunique().sum()),
        "text_tokens": tokens,
        "bos": bos,
        "seconds": {
            "capture": round(captured, 3),
            "exactness": round(time.perf_counter() - checked, 3) if exact else 0.0,
            "total": round(time.perf_counter() - started, 3),
        },
        "peak_memory_gb": round(memory["gb"], 3),
        "peak_memory_scope": memory["scope"],
    }
    critical = critical[["window", *[c for c in critical.columns if c != "window"]]]
    return LongResults(stats, critical, pd.DataFrame() if agreed is None else agreed, prov)


def window_folder(window: int, preset: str | LongPreset) -> str:
    """A window's entry of a run, relative to the run's folder: ``window-<i>-of-<W>``."""
    return f"window-{window:02d}-of-{get_preset(preset).windows:02d}"


def window_run(model, text, preset: str | LongPreset = "reduced", window: int = 0, *, seed: int = 0, progress=None):
    """Window ``window`` of the run summarised over its heads (:func:`summarize`), the first window with the
    capture's exactness: what the results cache holds of each window (:class:`LongSummaries`)."""
    return summarize(run(model, text, preset, only=[window], exact=window == 0, seed=seed, progress=progress))


def results(
    model,
    text,
    preset: str | LongPreset = "reduced",
    *,
    window: int | None = None,
    seed: int = 0,
    root=None,
    progress=None,
) -> LongSummaries:
    """The run's :class:`LongSummaries`, window by window from the results cache when the same model, text, preset,
    seed, window and code produced it, else computed now (:func:`window_run`) and cached
    (``<root>/<model>/<text>/long-<preset>/window-<i>-of-<W>``); ``window``: that window alone (all by default)."""
    p = get_preset(preset)
    chosen = range(p.windows) if window is None else [window]
    parts = [_window_results(model, text, p, w, seed, root, progress) for w in chosen]
    return parts[0] if len(parts) == 1 else LongSummaries.joined(parts)


def _window_results(model, text, p: LongPreset, window: int, seed: int, root, progress) -> LongSummaries:
    key = cache.study_key(
        __name__,
        model_sha256=model_record(model).get("sha256"),
        text_sha256=_text_sha(text),
        preset=p.as_dict(),
        context=_context(model),
        seed=seed,
        window=window,
    )
    folder = _folder(model_record(model)["model_id"], text, p, root) / window_folder(window, p)
    return cache.cached(
        folder,
        key,
        compute=lambda: window_run(model, text, p, window, seed=seed, progress=progress),
        save=lambda res, f: res.save(f),
        load=LongSummaries.load,
    )


def _text_sha(text) -> str:
    return texts.sha256_of(text)


def _folder(model_id: str, text, preset: LongPreset, root=None) -> Path:
    """Where :func:`results` caches a run's windows: ``<root>/<model>/<text>/long-<preset>``."""
    text_name = text.provenance.name if hasattr(text, "provenance") else "string-" + _text_sha(text)[:12]
    root = Path(provenance.results_root() if root is None else root)
    return root / model_id.replace("/", "--") / text_name / f"long-{preset.name}"


#: The models chapter 35 reads, by their names in :data:`attnlimits.models.registry.MODELS`: both offline models.
BOOK_MODELS = ("fallback", "gemma3-270m")


class BookRuns(NamedTuple):
    """What :func:`book_results` found: the runs of the models that are present (``results``, in the order of
    :data:`BOOK_MODELS`) and a sentence per absent model saying why it did not run (``not_run``). A tuple, so
    ``found, not_run = book_results(...)`` unpacks it."""

    results: list[LongSummaries]
    not_run: list[str]


def book_results(preset: str | LongPreset = "reduced", *, progress=None) -> BookRuns:
    """:func:`results` of every model of :data:`BOOK_MODELS` that is present, on the book's text, and a sentence per
    absent model saying why it is not there (:class:`BookRuns`). Windows cached by this code, preset and text are
    read without loading the model (a chapter reads them in a second); a missing or stale window is computed."""
    p = get_preset(preset)
    text = texts.load()
    found, absent = [], []
    for name in BOOK_MODELS:
        entry = registry.get(name)
        present, why = entry.present()
        if not present:
            absent.append(f"{entry.label}: {why}")
            continue
        parts, model = [], None
        for w in range(p.windows):
            folder = _folder(entry.model_id, text, p) / window_folder(w, p)
            try:
                stored = cache.Entry(folder, {}).stored_key()
                wanted = json.loads(json.dumps(p.as_dict()))
                if stored.get("preset") == wanted and stored.get("text_sha256") == _text_sha(text):
                    parts.append(cache.load_current(folder, __name__, LongSummaries.load))
                    continue
            except cache.StaleEntry:
                pass
            model = models.load(name) if model is None else model
            parts.append(results(model, text, p, window=w, progress=progress))
        found.append(LongSummaries.joined(parts))
    return BookRuns(found, absent)
