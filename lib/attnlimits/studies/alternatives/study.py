"""The paper's diagnostics for every normaliser on the same logits (chapter 33).

Inputs are "heads": logits ``(H, rows, L)`` (every row sees all L tokens) and token vectors ``(H, L, d)`` shared by
a head's rows. Every normaliser of :mod:`attnlimits.core.normalizers` is applied to the same logits, and each
diagnostic is averaged over a head's rows (one value per head, as in the paper's algorithms). The diagnostics are
the experiments' own kernels (:mod:`attnlimits.core.rowstats`, Algorithm 3's KS decision
:func:`attnlimits.infra.ks.ks_test`), fed another normaliser's weights:

- :func:`model_heads`           a pretrained model's own logits and value vectors, one row block per length
                                (synthetic heads: :func:`attnlimits.theory.synthetic.gaussian_heads`).
- :func:`weight_table`          largest weight and support size (non-zero weights) per head and length.
- :func:`distance_table`        d~, E and N_s/N per head for a grid of (L, N), and N_s/N with the zero-weight
                                tokens left out (:func:`nonzero_separability`).
- :func:`critical_fraction`     the critical N / L per length: the first N of the grid where a two-sample KS test
                                cannot tell the heads' mean d~ from their mean E (Algorithm 3's decision).
- :func:`jacobian_table`        the spectral norm of each row's Jacobian d alpha / d l.
- :func:`g_table`               Algorithm 5's g(T, eps) per normaliser.
- :func:`row_cost`              wall time of one normaliser call per row (microseconds; a measurement).
- :func:`gamma_table`, :func:`gamma_slopes`, :func:`critical_gamma`
                                the critical attention scaling softmax(gamma log L l): the largest weight per gamma
                                and L, its slope against L, and the gamma where it stops vanishing.
- :func:`sink_table`            the sink rate of Gu et al. per normaliser on a model's logits.
- :func:`one_logit_apart`       Scalable-Softmax's Figure 1: the largest weight of a row with one logit apart,
                                under softmax and Scalable-Softmax, against the row's length.
- :func:`results`               every diagnostic of the chapter on the synthetic heads, or on a model's heads
                                (:class:`AlternativesTables`), computed once and kept in the results cache (keyed
                                by the code, the preset and the data's SHA-256: :mod:`attnlimits.infra.cache`).

One concept, one module (over 600 lines): the diagnostics of chapter 33 on one set of heads, each a short
function of the same (logits, values) input, and the study that runs them.
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attnlimits import models
from attnlimits.core import normalizers, rowstats, selection, sinks
from attnlimits.core.normalizers import NORMALIZERS
from attnlimits.infra import cache, presets, provenance
from attnlimits.infra.ks import KS_LEVEL, first_reaching, ks_test
from attnlimits.infra.progress import progress_bar
from attnlimits.theory import synthetic

__all__ = [
    "HOLDS",
    "PRESETS",
    "READINGS",
    "RECENT_PRESETS",
    "AlternativesPreset",
    "AlternativesTables",
    "all_tables",
    "critical_fraction",
    "critical_gamma",
    "distance_table",
    "g_table",
    "gamma_slopes",
    "gamma_table",
    "get_preset",
    "jacobian_table",
    "model_heads",
    "model_layers",
    "model_tables",
    "n_grid",
    "nonzero_separability",
    "one_logit_apart",
    "results",
    "row_cost",
    "sink_table",
    "synthetic_tables",
    "weight_table",
    "work",
]


def _names(names) -> list[str]:
    return normalizers.resolve(names)


def _check_heads(logits: torch.Tensor, x: torch.Tensor | None = None) -> None:
    if logits.dim() != 3:
        raise ValueError(f"logits: expected shape (heads, rows, L), got {tuple(logits.shape)}")
    if not torch.isfinite(logits).all():
        raise ValueError("logits: must be finite (every row sees all L tokens)")
    if x is not None and (x.dim() != 3 or x.shape[0] != logits.shape[0] or x.shape[1] < logits.shape[2]):
        raise ValueError(
            f"x: expected shape (heads={logits.shape[0]}, >= L={logits.shape[2]}, d), got {tuple(x.shape)}"
        )


def model_heads(windows, lengths: Sequence[int], rows: int) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """A pretrained model's logits and value vectors, per length m: logits of the query rows t = m-1 .. m+rows-2 on
    the first m tokens (every such row sees all of them) and those tokens' value vectors, float64, every captured
    layer and head stacked into one head axis: ``{m: (logits (heads, rows, m), x (heads, m, d))}``.

    ``windows``: captures from :func:`attnlimits.experiments.capture_windows` at least max(lengths) + rows - 1
    tokens long (the first window is used).
    """
    w = windows[0]
    need = max(lengths) + rows - 1
    if w.seq_len < need:
        raise ValueError(f"windows: need captures of at least {need} tokens, got {w.seq_len}")
    logits, values = [], []
    for layer in w.layer_ids:
        logits.append(w.logits(layer, need).double())
        values.append(w.inputs(layer, need, precision="float64")[1])
    z, v = torch.cat(logits), torch.cat(values)
    return {m: (z[:, m - 1 : m - 1 + rows, :m].contiguous(), v[:, :m].contiguous()) for m in lengths}


#: The readings of the random-selection expectation the critical N is decided on (:func:`critical_fraction`).
READINGS = ("E", "E_full")


def n_grid(L: int, points: int = 16) -> list[int]:
    """About ``points`` selection sizes from 1 to L - 1, geometrically spaced (distinct integers)."""
    grid = torch.logspace(0, math.log10(max(L - 1, 1)), points, dtype=torch.float64).round().long().tolist()
    return sorted(set(min(max(n, 1), L - 1) for n in grid))


def _weights(name: str, logits: torch.Tensor, T: float = 1.0) -> torch.Tensor:
    return normalizers.NORMALIZERS[name](logits, dim=-1, T=T)


def weight_table(inputs: dict, names=None) -> pd.DataFrame:
    """Per normaliser, length L and head: mean over rows of the largest weight, of L * largest weight, of the
    support size (number of non-zero weights) and of the row's sum (1 for a distribution; what a normaliser whose
    rows need not sum to one hands to no token is 1 minus it). ``inputs``: ``{L: (logits, x)}``."""
    rows = []
    for L, (logits, _) in sorted(inputs.items()):
        _check_heads(logits)
        for name in _names(names):
            a = _weights(name, logits)
            top = a.amax(-1).mean(-1)
            support = (a > 0).sum(-1).double().mean(-1)
            total = a.sum(-1).mean(-1)
            for h in range(a.shape[0]):
                rows.append({"normalizer": name, "L": L, "head": h, "max_weight": float(top[h]),
                             "L_max_weight": L * float(top[h]), "support": float(support[h]),
                             "support_fraction": float(support[h]) / L, "row_sum": float(total[h])})  # fmt: skip
    return pd.DataFrame(rows)


def nonzero_separability(alpha: torch.Tensor, x: torch.Tensor, ns) -> torch.Tensor:
    """N_s/N with the tokens of weight exactly 0 left out, ``(len(ns), H, R)``, for weights ``alpha`` ``(H, R, L)``
    (every row seeing all L tokens) and tokens ``x`` ``(H, L, d)``.

    A token of weight 0 sits at distance ||s|| from the context vector s whether it is selected or dropped: a sparse
    normaliser's zero-weight dropped tokens set Algorithm 4's radius at ||s|| or below, and its zero-weight selected
    tokens (when the support holds fewer than N) then lie on the sphere and count as separable. Here the radius is
    the smallest distance of a dropped token *of positive weight* to s, and the fraction counts the selected tokens
    of positive weight inside it among the selected of positive weight. A row whose support holds at most N tokens
    drops none of positive weight: nothing is left to tell apart, and its value is NaN (the callers' means leave
    it out). For softmax, whose weights are all positive, it is N_s/N."""
    out = []
    for n in ns:
        dist, chosen = selection.token_distances(alpha, x.unsqueeze(1), int(n), sums_to_one=False)
        positive = alpha > 0
        radius = torch.where(~chosen & positive, dist, torch.inf).amin(-1, keepdim=True)
        kept = chosen & positive
        inside = (kept & (dist <= radius)).sum(-1).to(dist.dtype)
        frac = inside / kept.sum(-1).to(dist.dtype)
        out.append(torch.where(radius.squeeze(-1).isinf(), torch.nan, frac))
    return torch.stack(out)


def distance_table(inputs: dict, Ns: dict | Sequence[int], names=None) -> pd.DataFrame:
    """Per normaliser, length L, selection size N and head: the row means of d~, E (the closed-form main term),
    E_full (the reading with the inner factor N/(L-1) replaced by 1) and N_s/N at Algorithm 4's radius (the smallest
    distance of a dropped token to s), by the experiments' kernels (:mod:`attnlimits.core.rowstats`, every row
    seeing all L tokens), and ``ns_frac_nonzero``, N_s/N with the zero-weight tokens left out
    (:func:`nonzero_separability`; the mean over the rows that drop a token of positive weight, NaN for a head with
    none) with ``compared``, the share of the head's rows that do. ``Ns``: one list for every length, or ``{L:
    list}``."""
    rows = []
    for L, (logits, x) in sorted(inputs.items()):
        _check_heads(logits, x)
        grid = [int(n) for n in (Ns[L] if isinstance(Ns, dict) else Ns)]
        bad = [n for n in grid if not 1 <= n < L]
        if bad:
            raise ValueError(f"Ns: every N must satisfy 1 <= N < L = {L}, got {bad}")
        xs = x[:, :L]  # a head's tokens, shared by its rows
        seen = torch.full((logits.shape[1],), L - 1)  # every row is a query that sees all L tokens
        for name in _names(names):
            a = _weights(name, logits)
            d = rowstats.distances(a, xs, grid, positions=seen)[0].mean(-1)  # (len(grid), H)
            e = rowstats.expectation(a, xs, grid, positions=seen).mean(-1)
            e_full = rowstats.expectation(a, xs, grid, positions=seen, full=True).mean(-1)
            ns = rowstats.separability(a, xs, grid, positions=seen)[0].mean(-1)
            nz_rows = nonzero_separability(a, xs, grid)
            nz, compared = nz_rows.nanmean(-1), nz_rows.isfinite().double().mean(-1)
            for j, n in enumerate(grid):
                for h in range(a.shape[0]):
                    rows.append({"normalizer": name, "L": L, "N": n, "head": h, "d_tilde": float(d[j, h]),
                                 "E": float(e[j, h]), "E_full": float(e_full[j, h]), "ns_frac": float(ns[j, h]),
                                 "ns_frac_nonzero": float(nz[j, h]),
                                 "compared": float(compared[j, h])})  # fmt: skip
    return pd.DataFrame(rows)


def critical_fraction(table: pd.DataFrame, level: float = KS_LEVEL, reading: str = "E") -> pd.DataFrame:
    """Per normaliser and L: the first N of ``table``'s grid at which the two-sample KS test between the heads'
    mean d~ and their mean ``reading`` (``"E"`` or ``"E_full"``) gives p >= ``level`` (cannot tell them apart),
    its fraction N / L and the p-value; NaN when no N of the grid reaches the level."""
    if not 0 < level < 1:
        raise ValueError(f"level: must lie in (0, 1), got {level}")
    if reading not in READINGS:
        raise ValueError(f"reading: must be one of {READINGS}, got {reading!r}")
    out = []
    for (name, L), part in table.groupby(["normalizer", "L"], sort=False):
        tests = ((n, ks_test(g.d_tilde.to_numpy(), g[reading].to_numpy())[1]) for n, g in part.groupby("N", sort=True))
        found = first_reaching(tests, level)
        n = found[0] if found else math.nan
        out.append({"normalizer": name, "L": L, "reading": reading, "critical_N": n, "critical_fraction": n / L,
                    "p_value": found[1] if found else math.nan})  # fmt: skip
    return pd.DataFrame(out)


def jacobian_table(inputs: dict, names=None, *, T: float = 1.0, iters: int = 40) -> pd.DataFrame:
    """Per normaliser, length and head: mean and max over rows of ||d alpha / d l||_2 (power iteration on J^T J
    by :func:`attnlimits.core.rowstats.jacobian_spectral_norm`), at temperature T, on the logits l."""
    rows = []
    for L, (logits, _) in sorted(inputs.items()):
        _check_heads(logits)
        for name in _names(names):
            fn = normalizers.NORMALIZERS[name]
            norm = rowstats.jacobian_spectral_norm(lambda z, fn=fn: fn(z, dim=-1, T=T), logits, iters=iters)
            for h in range(norm.shape[0]):
                rows.append({"normalizer": name, "L": L, "head": h, "T": T, "jacobian_mean": float(norm[h].mean()),
                             "jacobian_max": float(norm[h].max())})  # fmt: skip
    return pd.DataFrame(rows)


def g_table(logits: torch.Tensor, T_grid, eps_grid, names=None, seed: int = 0) -> pd.DataFrame:
    """Algorithm 5's g(T, eps) (max over heads of the mean over rows) for each normaliser on the same logits and
    the same random directions."""
    _check_heads(logits)
    rows = []
    T_grid, eps_grid = list(T_grid), list(eps_grid)
    for name in _names(names):
        g = rowstats.finite_difference_g(
            logits, T=T_grid, eps=eps_grid, seed=seed, normalizer=normalizers.NORMALIZERS[name]
        )
        for i, T in enumerate(T_grid):
            for j, eps in enumerate(eps_grid):
                rows.append({"normalizer": name, "T": T, "eps": eps, "g": float(g[i, j])})
    return pd.DataFrame(rows)


def one_logit_apart(ns: Sequence[int], *, high: float = 3.0, low: float = -2.0, s: float = 0.43) -> pd.DataFrame:
    """Scalable-Softmax's Figure 1 (Nakanishi 2025): a row of n logits, every one ``low`` but the last, ``high``;
    its largest weight under softmax and under Scalable-Softmax with scale ``s`` (the figure's 0.43), for each n
    of ``ns``, computed by the registry's normalisers in float64. Columns ``n, softmax, scalable-softmax``; the
    closed forms are 1 / (1 + (n - 1) e^{-(high - low)}) and 1 / (1 + (n - 1) n^{-s (high - low)})."""
    rows = []
    for n in ns:
        if isinstance(n, bool) or int(n) != n or n < 1:
            raise ValueError(f"ns: must hold integers >= 1, got {n!r}")
        z = torch.full((int(n),), float(low), dtype=torch.float64)
        z[-1] = high
        rows.append({"n": int(n), "softmax": float(normalizers.softmax(z).max()),
                     "scalable-softmax": float(normalizers.scalable_softmax(z, s=s).max())})  # fmt: skip
    return pd.DataFrame(rows)


def gamma_table(inputs: dict, gammas: Sequence[float]) -> pd.DataFrame:
    """The critical attention scaling's sweep: per gamma of ``gammas``, length L and head, the mean over rows of the
    largest weight of softmax(gamma * log L * l) (:func:`attnlimits.core.normalizers.scalable_softmax` with s =
    gamma) on the logits of ``inputs`` (``{L: (logits, x)}``)."""
    gammas = [float(g) for g in gammas]
    if not gammas or not all(math.isfinite(g) and g > 0 for g in gammas):
        raise ValueError(f"gammas: need numbers > 0, got {gammas}")
    rows = []
    for L, (logits, _) in sorted(inputs.items()):
        _check_heads(logits)
        for gamma in gammas:
            top = normalizers.scalable_softmax(logits, dim=-1, s=gamma).amax(-1).mean(-1)
            rows += [{"gamma": gamma, "L": L, "head": h, "max_weight": float(top[h])} for h in range(len(top))]
    return pd.DataFrame(rows)


def gamma_slopes(table: pd.DataFrame) -> pd.Series:
    """Per gamma, the log-log slope against L of the median head's largest weight (``table`` from
    :func:`gamma_table`, one window): -1 is attention spreading like 1/L, 0 a largest weight that holds."""
    out = {}
    for gamma, part in table.groupby("gamma", sort=True):
        med = part.groupby("L").max_weight.median()
        # least squares in log-log, as attnlimits.experiments.paper_claims.loglog_slope (not imported: the
        # analysis of the experiments would enter this study's results-cache key)
        out[gamma] = float(np.polyfit(np.log(med.index.to_numpy(float)), np.log(med.to_numpy(float)), 1)[0])
    return pd.Series(out, name="slope").rename_axis("gamma")


#: The slope of the largest weight against L above which the book calls attention "not vanishing" (the same
#: -0.1 chapter 33 holds Scalable-Softmax to).
HOLDS = -0.1


def critical_gamma(slopes: pd.Series, threshold: float = HOLDS) -> float:
    """The book's reading of the critical scaling: the gamma at which the largest weight's slope against L
    (:func:`gamma_slopes`) first reaches ``threshold``, interpolated linearly in log gamma between the grid's
    points; NaN when the grid never reaches it or starts above it. For one logit ahead of the rest by a gap Delta
    the slope is about gamma Delta - 1 up to gamma = 1/Delta, so the threshold -0.1 is reached near 0.9 / Delta."""
    g, v = slopes.index.to_numpy(float), slopes.to_numpy(float)
    above = v >= threshold
    if not above.any() or above[0]:
        return math.nan
    i = int(above.argmax())
    t = (threshold - v[i - 1]) / (v[i] - v[i - 1])
    return float(math.exp(math.log(g[i - 1]) + t * (math.log(g[i]) - math.log(g[i - 1]))))


def sink_table(windows, names=None) -> pd.DataFrame:
    """Per normaliser: the sink rate of Gu et al. (:func:`attnlimits.core.sinks.sink_rate`, token 0, eps 0.3, the
    first 64 rows) over every captured layer's heads of ``windows[0]``, each normaliser applied to the model's own
    masked logits."""
    w = windows[0]
    rows = sinks.SINK_ROWS
    logits = {layer: w.logits(layer, rows).double() for layer in w.layer_ids}
    return pd.DataFrame(
        [
            {"normalizer": name, "sink_rate": sinks.sink_rate(NORMALIZERS[name](z) for z in logits.values())}
            for name in _names(names)
        ]
    )


def row_cost(L: int, names=None, *, rows: int = 256, repeats: int = 5, seed: int = 0) -> pd.DataFrame:
    """Median wall time, in microseconds per row, of one call of each normaliser on ``rows`` float32 rows of
    length L (a measurement on this machine: it varies with the machine and its load)."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, L, generator=gen)
    out = []
    for name in _names(names):
        fn = normalizers.NORMALIZERS[name]
        fn(z)  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(z)
            times.append(time.perf_counter() - t0)
        out.append({"normalizer": name, "L": L, "us_per_row": 1e6 * sorted(times)[len(times) // 2] / rows})
    return pd.DataFrame(out)


# ----------------------------------------------------------------------------------------------------------------
# chapter 33: every diagnostic on synthetic heads and on a pretrained model's heads, per preset
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AlternativesPreset(presets.StudyPreset):
    """The grids of chapters 33 and 36: the synthetic heads (lengths, heads, rows per head, and the head scales and
    token dimension of :func:`attnlimits.theory.synthetic.gaussian_heads`), the model's heads (lengths, rows per
    length, how many layers, and how many windows of the text: ``model_windows``, spread over the whole text, the
    units of chapter 36's intervals), the N grid (``n_points`` at the largest length, ``fixed_N`` at every length),
    Algorithm 5's T and eps grids, the seed, the normalisers (``family``: None for every registered one, else
    softmax and that family of :func:`attnlimits.core.normalizers.names`) and the critical scaling's ``gammas``
    (none: not swept)."""

    synthetic_L: tuple[int, ...]
    heads: int
    rows: int
    model_L: tuple[int, ...]
    model_rows: int
    layers: int | None
    n_points: int
    fixed_N: int
    T_grid: tuple[float, ...]
    eps: tuple[float, ...]
    seed: int = 0
    synthetic_scales: tuple[float, float] = (0.5, 4.0)
    synthetic_d: int = 16
    model_windows: int = 1
    family: str | None = None
    gammas: tuple[float, ...] = ()

    def normalizer_names(self) -> list[str]:
        """The normalisers the preset runs: every registered one, or softmax (the reference) and its family's."""
        if self.family is None:
            return normalizers.names()
        return list(dict.fromkeys(["softmax", *normalizers.names(self.family)]))


PRESETS = presets.Registry(
    "alternatives",
    AlternativesPreset,
    AlternativesPreset(
        name="reduced",
        synthetic_L=(32, 64, 128, 256),
        heads=24,
        rows=4,
        model_L=(32, 64, 128, 256),
        model_rows=4,
        layers=4,
        n_points=10,
        fixed_N=5,
        T_grid=(0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0),
        eps=(1e-3,),
    ),
    AlternativesPreset(
        name="full",
        synthetic_L=(32, 64, 128, 256, 512, 1024),
        heads=48,
        rows=8,
        model_L=(32, 64, 128, 256, 512),
        model_rows=16,
        layers=10,
        n_points=20,
        fixed_N=5,
        T_grid=(0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0),
        eps=(1e-3, 1e-1),
    ),
    # a smoke run of seconds (tests, `attnlimits results --preset quick`)
    AlternativesPreset(
        name="quick",
        synthetic_L=(16, 32, 64),
        heads=4,
        rows=2,
        model_L=(16, 32, 64),
        model_rows=2,
        layers=2,
        n_points=4,
        fixed_N=2,
        T_grid=(0.1, 1.0, 10.0),
        eps=(1e-3,),
    ),
)


_GAMMAS = tuple(float(f"{g:.3g}") for g in torch.logspace(-1.5, 0.5, 17, dtype=torch.float64).tolist())
#: Chapter 36's grids: softmax and the normalisers proposed after the paper (the ``"recent"`` family) on the grids
#: of :data:`PRESETS` of the same name, read on ``model_windows`` windows spread over the text (the units of the
#: chapter's intervals), with the critical scaling swept over 17 gammas from 0.03 to 3.
RECENT_PRESETS = presets.Registry(
    "recent normalisers",
    AlternativesPreset,
    PRESETS["reduced"].replace(model_windows=8, family="recent", gammas=_GAMMAS),
    PRESETS["full"].replace(model_windows=16, family="recent", gammas=_GAMMAS),
    PRESETS["quick"].replace(model_windows=2, family="recent", gammas=_GAMMAS[::4]),
)


def get_preset(preset) -> AlternativesPreset:
    """A preset of chapter 33 by name (``"reduced"``, what the book builds, ``"full"``, or ``"quick"``: a smoke run of
    seconds), or an :class:`AlternativesPreset` unchanged (chapter 36's are in :data:`RECENT_PRESETS`)."""
    return PRESETS.get(preset)


def all_tables(inputs: dict, p: AlternativesPreset, names=None, *, progress=False) -> dict[str, pd.DataFrame]:
    """Every diagnostic of the chapter on ``inputs`` (``{L: (logits, x)}``): ``weights``, ``distance`` (the fixed N at
    every L and the N grid at the largest L), then at the largest L only ``critical`` (KS level 0.05 on the N grid),
    ``jacobian`` and ``g``. ``progress``: a bar over the diagnostics
    (:func:`attnlimits.infra.progress.progress_bar`)."""
    lengths = sorted(inputs)
    top = lengths[-1]
    grids = {L: [min(p.fixed_N, L - 1)] for L in lengths}
    grids[top] = sorted(set(n_grid(top, p.n_points)) | set(grids[top]))
    out = {}
    steps = {
        "weights": lambda: weight_table(inputs, names),
        "distance": lambda: distance_table(inputs, grids, names),
        # on the table just made, under each reading
        "critical": lambda: pd.concat(
            [critical_fraction(out["distance"][out["distance"].L == top], reading=r) for r in READINGS],
            ignore_index=True,
        ),
        "jacobian": lambda: jacobian_table({top: inputs[top]}, names),
        "g": lambda: g_table(inputs[top][0], p.T_grid, p.eps, names, seed=p.seed),
    }
    for name in progress_bar(list(steps), "alternatives", progress):
        out[name] = steps[name]()
    return out


@dataclass
class AlternativesTables:
    """Every diagnostic of chapter 33 on one set of heads (:func:`all_tables`: ``weights``, ``distance``,
    ``critical``, ``jacobian``, ``g``), the wall time that took (``seconds``: one row per ``part``, a measurement)
    and, for a model's heads, the layers they were captured from (``layers``; None for the synthetic heads), the
    sink rate per normaliser (``sink``, :func:`sink_table`) and the critical scaling's sweep (``gamma``,
    :func:`gamma_table`, when the preset has ``gammas``). A model's tables have a ``window`` column: the window
    of the text (0, 1, ...) each row was measured on.

    :meth:`save` pickles the tables into one file, ``result.pkl``, as a dict in :attr:`TABLES` order: the pickle
    keeps every dtype and every float bit, so :meth:`load` returns the tables as computed."""

    weights: pd.DataFrame
    distance: pd.DataFrame
    critical: pd.DataFrame
    jacobian: pd.DataFrame
    g: pd.DataFrame
    seconds: pd.DataFrame
    layers: pd.DataFrame | None = None
    sink: pd.DataFrame | None = None
    gamma: pd.DataFrame | None = None

    TABLES = ("weights", "distance", "critical", "jacobian", "g", "seconds", "layers", "sink", "gamma")
    FILE = "result.pkl"

    def only(self, names) -> AlternativesTables:
        """The same tables restricted to the normalisers ``names`` (the rows of the others left out)."""
        names = normalizers.resolve(names)

        def keep(table):
            if table is None or "normalizer" not in table:
                return table
            return table[table.normalizer.isin(names)].reset_index(drop=True)

        return AlternativesTables(**{name: keep(getattr(self, name)) for name in self.TABLES})

    def save(self, folder) -> Path:
        """Write the tables (``layers`` only when there is one) into ``folder``/``result.pkl``; returns ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tables = {name: getattr(self, name) for name in self.TABLES if getattr(self, name) is not None}
        with (folder / self.FILE).open("wb") as f:
            pickle.dump(tables, f)
        return folder

    @classmethod
    def load(cls, folder) -> AlternativesTables:
        """The tables :meth:`save` wrote into ``folder``."""
        with (Path(folder) / cls.FILE).open("rb") as f:
            return cls(**pickle.load(f))


def synthetic_tables(preset="reduced", *, progress=False) -> AlternativesTables:
    """:func:`all_tables` on synthetic heads (:func:`attnlimits.theory.synthetic.gaussian_heads`, the preset's ``heads``
    scales spread geometrically over ``synthetic_scales``) at the preset's lengths (prefixes of one draw)."""
    p = get_preset(preset)
    t0 = time.perf_counter()
    scales = synthetic.geometric_scales(*p.synthetic_scales, p.heads)
    logits, x = synthetic.gaussian_heads(max(p.synthetic_L), scales, rows=p.rows, d=p.synthetic_d, seed=p.seed)
    inputs = {L: (logits[:, :, :L], x[:, :L]) for L in p.synthetic_L}
    tables = all_tables(inputs, p, p.normalizer_names(), progress=progress)
    seconds = pd.DataFrame([{"part": "synthetic", "seconds": time.perf_counter() - t0}])
    return AlternativesTables(**tables, seconds=seconds)


def work(preset="reduced", n_layers: int = 30, n_heads: int = 9) -> dict[str, int]:
    """The preset's work in weight entries (heads x rows x L, summed over lengths, times the N grid's size at the
    largest length), for the synthetic and the model part; ``n_layers`` and ``n_heads`` describe the model. The
    time grows about linearly with it, so the ratio of two presets' work extrapolates a time."""
    p = get_preset(preset)
    layers = len(model_layers(n_layers, p.layers))

    def entries(heads, rows, lengths):
        return heads * rows * (sum(lengths) + max(lengths) * p.n_points)

    return {
        "synthetic": entries(p.heads, p.rows, p.synthetic_L),
        "model": entries(layers * n_heads, p.model_rows, p.model_L),
    }


def model_layers(n_layers: int, count) -> list[int]:
    """``count`` layer numbers spread evenly from the first to the last (every layer when ``count`` is None)."""
    if count is None or count >= n_layers:
        return list(range(n_layers))
    return sorted({round(i * (n_layers - 1) / (count - 1)) for i in range(count)})


def model_tables(model, text, preset="reduced", *, progress=False) -> AlternativesTables:
    """:func:`all_tables`, the sink rates (:func:`sink_table`) and, with the preset's ``gammas``, the critical
    scaling's sweep (:func:`gamma_table`) on each of the preset's ``model_windows`` windows of ``text``, spread over
    the whole text and captured from ``model`` (:func:`model_heads`): the model's own logits and value vectors,
    every normaliser swapped in on the same logits. Each table's ``window`` column says which window."""
    from attnlimits.models.windows import capture_windows

    p = get_preset(preset)
    names = p.normalizer_names()
    t0 = time.perf_counter()
    layers = model_layers(models.facts(model)["n_layers"], p.layers)
    length = max(max(p.model_L) + p.model_rows - 1, sinks.SINK_ROWS)
    windows = capture_windows(model, text, length=length, count=p.model_windows, layers=layers, progress=progress)
    captured = time.perf_counter() - t0
    parts = []
    for i, w in enumerate(windows):
        inputs = model_heads([w], p.model_L, p.model_rows)
        tables = all_tables(inputs, p, names, progress=progress)
        tables["sink"] = sink_table([w], names)
        if p.gammas:
            tables["gamma"] = gamma_table(inputs, p.gammas)
        parts.append({name: table.assign(window=i) for name, table in tables.items()})
    merged = {name: pd.concat([part[name] for part in parts], ignore_index=True) for name in parts[0]}
    seconds = pd.DataFrame(
        [{"part": "capture", "seconds": captured}, {"part": "model", "seconds": time.perf_counter() - t0}]
    )
    return AlternativesTables(**merged, seconds=seconds, layers=pd.DataFrame({"layer": layers}))


def _model_data(model, text, p: AlternativesPreset) -> dict:
    """What a model's tables depend on besides the code: the model's weights and the text (their SHA-256; a model
    without provenance by its class name, a bare string by its own hash) and the preset."""
    prov = getattr(model, "provenance", None)
    model_sha = prov.as_dict().get("sha256") if prov is not None else type(model).__name__
    text_sha = text.provenance.sha256 if hasattr(text, "provenance") else hashlib.sha256(str(text).encode()).hexdigest()
    return {"model_sha256": model_sha, "text_sha256": text_sha, "preset": p}


def results(model=None, text=None, preset="reduced", *, root=None, progress=False) -> AlternativesTables:
    """Every diagnostic of chapter 33 for ``preset``: on the synthetic heads (:func:`synthetic_tables`) when neither
    ``model`` nor ``text`` is given, else on ``model``'s heads over ``text`` (:func:`model_tables`).

    Read from the results cache when the same preset, data (the model's and the text's SHA-256) and code produced
    it, else computed now and cached in ``<root>/alternatives/synthetic-<data>`` or ``model-<data>``
    (:func:`attnlimits.infra.cache.cached`; ``root``: :func:`attnlimits.infra.provenance.results_root` by default).
    ``progress``: a bar over the diagnostics (:func:`attnlimits.infra.progress.progress_bar`)."""
    p = get_preset(preset)
    if (model is None) != (text is None):
        raise ValueError("model, text: give both (a model's heads on a text) or neither (the synthetic heads)")
    if model is None:
        name, fn, args, data = "synthetic", synthetic_tables, (), {"preset": p}
    else:
        name, fn, args, data = "model", model_tables, (model, text), _model_data(model, text, p)
    key = cache.study_key(__name__, fn=fn.__name__, data=data)
    digest = hashlib.sha256(json.dumps([key["fn"], key["data"]], sort_keys=True).encode()).hexdigest()[:16]
    folder = Path(provenance.results_root() if root is None else root) / "alternatives" / f"{name}-{digest}"
    return cache.cached(
        folder,
        key,
        compute=lambda: fn(*args, p, progress=progress),
        save=lambda tables, entry: tables.save(entry),
        load=AlternativesTables.load,
    )
