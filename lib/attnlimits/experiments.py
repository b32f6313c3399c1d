"""The paper's Algorithms 1-5 on every head of a pretrained model, at the paper's grids, as tidy tables.

Definitions (each a parameter; the Experiments chapters state them):

- Per head, alpha is the captured causal attention row of query t, recomputed in float64 from the model's own
  logits (``softmax(logits.double())``: exact, and rows sum to 1 within 1e-15), and x_i are that head's value
  vectors (after grouped-query expansion), or with ``tokens="residual"`` the layer's input residual stream.
- Row t's tokens are the visible ones, n <= t. A length L uses the first L tokens of each window (the prefix
  property), so one capture per window serves every L of the grid.
- A statistic of a head is its mean over the rows t < L with more than N tokens (rows where nothing is dropped are
  skipped); the ``rows`` column says how many rows that is per window.
- ``exclude_sink=True`` drops token 0 from selection and comparison (the remaining weights renormalised).

Algorithms: :func:`distance_table` (Alg. 1 and 2: d~, d_max, E vs L and N), :func:`critical_n` (Alg. 3: the exact
critical N by a bracket-and-bisect search on the KS decision), :func:`separability_table` (Alg. 4),
:func:`gradient_table` (Alg. 5) and :func:`sink_table`. :func:`run` does all five and :class:`Results` saves and
loads them as CSVs plus ``provenance.json``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attnlimits import rowstats

__all__ = [
    "PRESETS",
    "Preset",
    "Results",
    "WindowCapture",
    "capture_windows",
    "critical_n",
    "distance_table",
    "get_preset",
    "gradient_table",
    "merge",
    "results",
    "results_folder",
    "run",
    "separability_table",
    "sink_table",
    "validate_grid",
]


# ----------------------------------------------------------------------------------------------------------------
# presets
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preset:
    """The grids of Algorithms 1-5 and how many windows to read."""

    name: str
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
    ks_levels: tuple[float, ...] = (0.05, 0.01)

    @property
    def max_length(self) -> int:
        """The longest L any algorithm reads: the window length."""
        return max(*self.alg1_L, self.alg2_L, self.alg4_L, self.alg5_L)

    def as_dict(self) -> dict:
        """The preset as plain JSON-able data."""
        return dataclasses.asdict(self)


def _log_grid(lo: float, hi: float, points: int) -> tuple[float, ...]:
    return tuple(float(f"{v:.6g}") for v in np.logspace(math.log10(lo), math.log10(hi), points))


PRESETS = {
    "paper": Preset(
        name="paper",
        windows=4,
        alg1_N=5,
        alg1_L=(32, 64, 128, 256, 512, 1024),
        alg2_L=1024,
        alg2_N=(1, 5, 10, 20, 100),
        alg4_L=1024,
        alg4_N=(1, 2, 4, 8, 16, 32, 64),
        alg5_L=256,
        alg5_T=_log_grid(1e-3, 1e2, 21),
        alg5_eps=(1e-3, 1e-1, 10.0),
    ),
    "quick": Preset(
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
}


def get_preset(preset: str | Preset) -> Preset:
    """A :class:`Preset` by name (``"paper"`` or ``"quick"``), or the given one unchanged."""
    if isinstance(preset, Preset):
        return preset
    if preset not in PRESETS:
        raise ValueError(f"preset: must be one of {sorted(PRESETS)}, got {preset!r}")
    return PRESETS[preset]


def validate_grid(preset: Preset, *, max_positions: int | None = None, windows: int | None = None) -> None:
    """Raise ValueError naming the grid when a preset cannot run: empty grids, N >= L, L above the context."""
    p = preset
    grids = {"alg1_L": p.alg1_L, "alg2_N": p.alg2_N, "alg4_N": p.alg4_N, "alg5_T": p.alg5_T, "alg5_eps": p.alg5_eps,
             "ks_levels": p.ks_levels}
    for name, grid in grids.items():
        if len(grid) == 0:
            raise ValueError(f"{name}: the grid is empty")
    for name, values in {"alg1_L": p.alg1_L, "alg2_L": (p.alg2_L,), "alg4_L": (p.alg4_L,), "alg5_L": (p.alg5_L,),
                         "alg1_N": (p.alg1_N,), "alg2_N": p.alg2_N, "alg4_N": p.alg4_N}.items():
        if any(isinstance(v, bool) or int(v) != v or v < 1 for v in values):
            raise ValueError(f"{name}: must hold integers >= 1, got {values}")
    for name, n_grid, lengths in (("alg1_N", (p.alg1_N,), p.alg1_L), ("alg2_N", p.alg2_N, (p.alg2_L,)),
                                  ("alg4_N", p.alg4_N, (p.alg4_L,))):
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


# ----------------------------------------------------------------------------------------------------------------
# captures: one forward pass per window, the weights recomputed per layer on demand (memory stays bounded)
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class WindowCapture:
    """One window's per-layer queries, keys, values and scaling (the attention weights are recomputed from them).

    ``index`` is the window's position in the text (0 = the first window after the first chapter heading);
    ``residual`` holds the layers' input residual streams when they were asked for.
    """

    index: int
    layers: list  # of attnlimits.models.LayerCapture (their weights may be dropped: they are recomputed)
    residual: dict | None = None  # layer number -> that layer's input residual stream (1, L, d_model)

    def __post_init__(self):
        self._by_layer = {lc.layer: lc for lc in self.layers}

    @property
    def layer_ids(self) -> list[int]:
        """The captured layers' numbers, in increasing order."""
        return sorted(self._by_layer)

    @property
    def seq_len(self) -> int:
        """The window's length in tokens."""
        return self.layers[0].seq_len

    def layer(self, layer: int):
        """The :class:`attnlimits.models.LayerCapture` of layer number ``layer``."""
        if layer not in self._by_layer:
            raise KeyError(f"layer: {layer} was not captured; captured layers are {self.layer_ids}")
        return self._by_layer[layer]

    def logits(self, layer: int, L: int) -> torch.Tensor:
        """The model's own float32 logits of the first L tokens, ``(H, L, L)``, masked entries -inf."""
        lc = self.layer(layer)
        q, k = lc.q[0, :, :L], lc.k[0, :, :L]
        logits = torch.matmul(q, k.transpose(-1, -2)).mul_(lc.scaling)
        return logits.masked_fill_(lc.masked[0, 0, :L, :L], float("-inf"))

    def inputs(self, layer: int, L: int, *, exclude_sink: bool = False, tokens: str = "value",
               precision: str = "float64"):
        """(alpha, x) of one layer over the first L tokens: alpha ``(H, L, L)``, x ``(H, L, d)``.

        ``precision="float64"``: alpha is the float64 softmax of the model's logits (rows sum to 1 within 1e-15);
        ``"float32"``: the model's own float32 weights, bit for bit, and float32 tokens.
        """
        dtype = _dtype(precision)
        alpha = torch.softmax(self.logits(layer, L).to(dtype), dim=-1)
        if exclude_sink:
            alpha = alpha.clone()
            alpha[..., 0] = 0
            alpha = alpha / alpha.sum(-1, keepdim=True).clamp_min(torch.finfo(alpha.dtype).tiny)
        if tokens == "value":
            x = self.layer(layer).v[0, :, :L].to(dtype)
        else:
            x = self.residual[layer][0, :L].to(dtype).expand(alpha.shape[0], -1, -1)
        return alpha, x


_TOKENS = ("value", "residual")
_PRECISIONS = {"float32": torch.float32, "float64": torch.float64}


def _dtype(precision: str) -> torch.dtype:
    if precision not in _PRECISIONS:
        raise ValueError(f"precision: must be one of {sorted(_PRECISIONS)}, got {precision!r}")
    return _PRECISIONS[precision]


def capture_windows(model, text, *, length: int, count: int, first_window: int = 0, tokens: str = "value",
                    layers=None, progress: bool | None = None) -> list[WindowCapture]:
    """Capture ``count`` consecutive windows of ``length`` tokens (from window ``first_window`` on), one pass each;
    ``layers``: the layer numbers to keep (all by default)."""
    from attnlimits import models, texts

    if tokens not in _TOKENS:
        raise ValueError(f"tokens: must be one of {_TOKENS}, got {tokens!r}")
    if isinstance(first_window, bool) or not isinstance(first_window, int) or first_window < 0:
        raise ValueError(f"first_window: must be an integer >= 0, got {first_window!r}")
    ids = texts.windows(model, text, length=length, count=first_window + count)[first_window:]
    out = []
    for i, row in enumerate(_progress(ids, "capture", progress)):
        cap = models.capture(model, row, layers=layers)
        kept = [dataclasses.replace(lc, weights=lc.weights.new_empty(0)) for lc in cap]  # recomputed: free them
        residual = _residual_stream(model, row, cap.layer_ids) if tokens == "residual" else None
        out.append(WindowCapture(index=first_window + i, layers=kept, residual=residual))
    return out


def _residual_stream(model, ids, layer_ids) -> dict:
    hf = getattr(model, "model", model)
    body = getattr(hf, hf.base_model_prefix, hf)
    with torch.inference_mode():
        hidden = body(input_ids=ids.unsqueeze(0).to(next(hf.parameters()).device), output_hidden_states=True,
                      use_cache=False).hidden_states
    return {layer: hidden[layer].detach() for layer in layer_ids}  # hidden_states[l] is the input of layer l


def _progress(items, desc: str, progress: bool | None):
    """tqdm over ``items`` when ``progress`` is True, or by default when stderr is a terminal."""
    show = sys.stderr.isatty() if progress is None else progress
    if not show:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, leave=False)


def _layer_items(windows: Sequence[WindowCapture], progress, desc) -> Iterator[tuple[WindowCapture, int]]:
    pairs = [(w, layer) for w in windows for layer in w.layer_ids]
    yield from _progress(pairs, desc, progress)


def _row_means(values: torch.Tensor, lengths: torch.Tensor, n: int, L: int) -> tuple[np.ndarray, int]:
    """Per-head mean over rows t < L with more than n tokens; values ``(H, >=L)``. Returns (means (H,), rows)."""
    keep = lengths[:L] > n
    rows = int(keep.sum())
    if rows == 0:
        return np.full(values.shape[0], np.nan), 0
    return values[:, :L][:, keep].double().mean(-1).cpu().numpy(), rows


def _check_windows(windows) -> None:
    if not windows or not all(isinstance(w, WindowCapture) for w in windows):
        raise ValueError("windows: expected a non-empty list of WindowCapture (see capture_windows)")


# ----------------------------------------------------------------------------------------------------------------
# Algorithms 1 and 2: d~, d_max and E vs L (N fixed) and vs N (L fixed)
# ----------------------------------------------------------------------------------------------------------------
def distance_table(windows, grid: dict[int, Sequence[int]], *, exclude_sink: bool = False, tokens: str = "value",
                   precision: str = "float64", progress: bool | None = None) -> pd.DataFrame:
    """Per-head means of d~, d_max (Theorem 1 as reconstructed) and E for every N and its lengths in ``grid``.

    ``grid`` maps N to the lengths L it is wanted at (Alg. 1: {5: [32, ..., 1024]}; Alg. 2: {N: [1024]}). One pass
    per layer computes every row once at the largest L; shorter L are prefix means. Columns: ``window, layer,
    head, L, N, rows, d_tilde, d_max, E``.
    """
    _check_windows(windows)
    first = int(exclude_sink)
    ns = sorted(grid)
    top = max(max(v) for v in grid.values())
    records = []
    for w, layer in _layer_items(windows, progress, "Alg. 1-2"):
        alpha, x = w.inputs(layer, top, exclude_sink=exclude_sink, tokens=tokens, precision=precision)
        lengths = rowstats.row_lengths(top, first, alpha.device)
        expected = rowstats.expectation(alpha, x, ns, first=first)
        d_tilde, d_max = rowstats.distances(alpha, x, ns, first=first, bound=True)
        for j, n in enumerate(ns):
            for L in sorted(grid[n]):
                d_mean, rows = _row_means(d_tilde[j], lengths, n, L)
                b_mean, _ = _row_means(d_max[j], lengths, n, L)
                e_mean, _ = _row_means(expected[j], lengths, n, L)
                for h in range(alpha.shape[0]):
                    records.append((str(w.index), layer, h, L, n, rows, d_mean[h], b_mean[h], e_mean[h]))
    return pd.DataFrame(records, columns=["window", "layer", "head", "L", "N", "rows", "d_tilde", "d_max", "E"])


# ----------------------------------------------------------------------------------------------------------------
# Algorithm 3: the critical N, found by a search on the KS decision
# ----------------------------------------------------------------------------------------------------------------
def _ks(d_means: np.ndarray, e_means: np.ndarray) -> tuple[float, float]:
    from scipy.stats import ks_2samp

    res = ks_2samp(d_means, e_means)
    return float(res.statistic), float(res.pvalue)


def _search(L: int, level: float, guess: int | None = None):
    """Generator: yields the N it wants tested at L, receives its p-value, returns the critical N.

    It brackets the change of the decision p >= level, then bisects inside the bracket, so the answer N has
    p(N) >= level and p(N - 1) < level, both evaluated (N = 1 when already p(1) >= level). Without a ``guess`` the
    bracket grows by doubling from N = 1; with one (the critical fraction of a shorter L, scaled) it starts there
    and walks down or up in doubling steps. Returns None when no N < L reaches the level.
    """
    lo, hi = 0, None  # invariant: p(lo) < level (lo = 0 stands for "N = 1 is the first candidate"), p(hi) >= level
    if guess is None:
        n = 1
        while hi is None:
            p = yield n
            if p >= level:
                hi = n
            else:
                lo = n
                if n == L - 1:
                    return None
                n = min(2 * n, L - 1)
    else:
        n, step = min(max(int(guess), 1), L - 1), max(1, L // 64)
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
                if lo == L - 1:
                    return None
                n = min(lo + step, L - 1)
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


def critical_n(windows, lengths: Sequence[int], levels: Sequence[float] = (0.05, 0.01), *,
               exclude_sink: bool = False, tokens: str = "value", precision: str = "float64",
               progress: bool | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Algorithm 3: for each L, the smallest N at which a two-sample KS test cannot tell apart the per-head means
    of d~ and of E (p >= level), at every level.

    A head's mean is over its rows (t < L, more than N tokens) in every window; the test compares the heads'
    means of d~ with their means of E (one value per head each, as in the paper). Lengths are solved shortest
    first; each (L, level) runs :func:`_search`, guided by the critical fraction N/L found at the previous length
    (the first length brackets by doubling). The levels of one L search side by side in rounds, and a round reads
    every layer once and evaluates every N it was asked for. Returns ``(scan, critical)``: scan ``L, N, ks_stat,
    p_value, window`` (one row per N actually evaluated) and critical ``L, critical_N, ks_level, window``
    (``window = "all"``: the pooled test over the run's windows).
    """
    _check_windows(windows)
    first = int(exclude_sink)
    results: dict[tuple[int, int], tuple[float, float]] = {}
    answers: dict[tuple[int, float], int | None] = {}
    fraction: dict[float, float] = {}
    for L in sorted(int(v) for v in lengths):
        chains, pending = {}, {}
        for level in levels:
            guess = round(fraction[level] * L) if level in fraction else None
            chains[level] = _search(L, float(level), guess)
            pending[level] = next(chains[level])
        while pending:
            todo = sorted({(n, L) for n in pending.values() if (n, L) not in results})
            if todo:
                results.update(_evaluate_ks(windows, todo, first, exclude_sink, tokens, precision, progress))
            nxt = {}
            for level, n in pending.items():
                try:
                    nxt[level] = chains[level].send(results[(n, L)][1])
                except StopIteration as stop:
                    answers[(L, level)] = stop.value
                    if stop.value is not None:
                        fraction[level] = stop.value / L
            pending = nxt
    scan = pd.DataFrame(
        [(L, n, s, p, "all") for (n, L), (s, p) in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0]))],
        columns=["L", "N", "ks_stat", "p_value", "window"],
    )
    critical = pd.DataFrame(
        [(L, np.nan if answers[(L, lv)] is None else answers[(L, lv)], lv, "all") for L in lengths for lv in levels],
        columns=["L", "critical_N", "ks_level", "window"],
    )
    critical["critical_N"] = critical["critical_N"].astype("Int64")
    return scan, critical


def _evaluate_ks(windows, todo, first, exclude_sink, tokens, precision, progress) -> dict:
    """KS statistic and p-value for every (N, L) in ``todo``, in one pass over the layers."""
    by_n: dict[int, list[int]] = {}
    for n, L in todo:
        by_n.setdefault(n, []).append(L)
    top = max(L for _, L in todo)
    d_parts: dict[tuple[int, int], list] = {key: [] for key in todo}
    e_parts: dict[tuple[int, int], list] = {key: [] for key in todo}
    for w, layer in _layer_items(windows, progress, f"Alg. 3 ({len(todo)} N)"):
        alpha_full, x_full = w.inputs(layer, top, exclude_sink=exclude_sink, tokens=tokens, precision=precision)
        for n, Ls in by_n.items():
            Lmax = max(Ls)
            alpha, x = alpha_full[:, :Lmax, :Lmax], x_full[:, :Lmax]
            lengths = rowstats.row_lengths(Lmax, first, alpha.device)
            d_tilde = rowstats.distances(alpha, x, [n], first=first)[0][0]
            expected = rowstats.expectation(alpha, x, [n], first=first)[0]
            for L in Ls:
                keep = lengths[:L] > n
                d_parts[(n, L)].append((d_tilde[:, :L][:, keep].double().sum(-1).cpu().numpy(), int(keep.sum())))
                e_parts[(n, L)].append(expected[:, :L][:, keep].double().sum(-1).cpu().numpy())
    out = {}
    for key in todo:
        rows = d_parts[key][0][1] * len(windows)  # rows per head over every window
        if rows == 0:
            out[key] = (math.nan, math.nan)
            continue
        d_heads = _pool(d_parts[key], windows) / rows
        e_heads = _pool([(e, 0) for e in e_parts[key]], windows) / rows
        out[key] = _ks(d_heads, e_heads)
    return out


def _pool(parts, windows) -> np.ndarray:
    """Sum the per-(window, layer) head vectors of every window into one vector per (layer, head)."""
    per_window = len(windows[0].layer_ids)
    stacked = np.stack([p for p, _ in parts]).reshape(len(windows), per_window, -1)
    return stacked.sum(0).reshape(-1)


# ----------------------------------------------------------------------------------------------------------------
# Algorithm 4: geometric separability N_s / N with Theorem 2's bounds
# ----------------------------------------------------------------------------------------------------------------
def _theorem2(weights: torch.Tensor, r: torch.Tensor, delta: torch.Tensor):
    """Theorem 2's lower bound and the reconstructed upper bound per row on the unit sphere (M = 1), from the
    selected weights ``(..., n)``, the radius r ``(...)`` and the separation delta ``(...)``."""
    s1 = weights.sum(-1, keepdim=True) - weights
    s2 = (weights * weights).sum(-1, keepdim=True) - weights * weights
    xi = (s2 + (1 - delta.unsqueeze(-1) ** 2 / 2) * (s1 * s1 - s2)).clamp_min(0).sqrt()
    lower = 1 - (xi / r.unsqueeze(-1)).mean(-1)
    upper = torch.exp(-((xi - r.unsqueeze(-1)).clamp_min(0) ** 2) / 2).mean(-1)
    return lower, upper


def separability_table(windows, L: int, ns: Sequence[int], *, exclude_sink: bool = False, tokens: str = "value",
                       precision: str = "float64", progress: bool | None = None) -> pd.DataFrame:
    """Algorithm 4: per-head mean of N_s / N at the radius R (tokens on the unit sphere) with Theorem 2's bounds.

    delta is the window's smallest distance between two of the head's (normalised) tokens. Columns: ``window,
    layer, head, L, N, rows, ns_frac, lower, upper, delta``.
    """
    _check_windows(windows)
    first = int(exclude_sink)
    records = []
    for w, layer in _layer_items(windows, progress, "Alg. 4"):
        alpha, x = w.inputs(layer, L, exclude_sink=exclude_sink, tokens=tokens, precision=precision)
        x = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
        pair = torch.cdist(x[:, first:], x[:, first:])
        pair.diagonal(dim1=-2, dim2=-1).fill_(math.inf)
        delta = pair.flatten(1).amin(-1)  # (H,)
        lengths = rowstats.row_lengths(L, first, alpha.device)
        for n in ns:
            frac, weights, radius = rowstats.separability(alpha, x, n, first=first)
            keep = (lengths > n) & (radius > 0).all(0)
            d = delta.view(-1, 1).expand(-1, int(keep.sum()))
            lower, upper = _theorem2(weights[:, keep], radius[:, keep], d)
            rows = int(keep.sum())
            means = [t.double().mean(-1).cpu() for t in (frac[:, keep], lower, upper)]
            for h in range(alpha.shape[0]):
                records.append((str(w.index), layer, h, L, n, rows, *(float(m[h]) for m in means), float(delta[h])))
    return pd.DataFrame(records, columns=["window", "layer", "head", "L", "N", "rows", "ns_frac", "lower", "upper",
                                          "delta"])


# ----------------------------------------------------------------------------------------------------------------
# Algorithm 5: g(T, eps) on the captured logits; the attention sink
# ----------------------------------------------------------------------------------------------------------------
def gradient_table(windows, L: int, T: Sequence[float], eps: Sequence[float], *, seed: int = 0,
                   progress: bool | None = None) -> pd.DataFrame:
    """Algorithm 5: per head, g(T, eps) = mean over rows of ||softmax((l + eps v)/T) - softmax(l/T)|| / eps.

    Computed on the logits as the model feeds them to its softmax (``logit_scaling = "model"``: q.k times the
    model's scale, 1/sqrt(d_head) here) and on the raw dot products q.k (``logit_scaling = "none"``). Columns:
    ``window, layer, head, T, eps, g, logit_scaling``.
    """
    from attnlimits import sweeps

    _check_windows(windows)
    records = []
    for w, layer in _layer_items(windows, progress, "Alg. 5"):
        logits = w.logits(layer, L).double()
        scale = w.layer(layer).scaling
        for label, values in (("model", logits), ("none", logits / scale)):
            g = sweeps.finite_difference_g(values, T=T, eps=eps, seed=seed + 1_000_003 * w.index + layer,
                                           reduce=False)
            g = g.cpu().numpy()
            for h in range(g.shape[0]):
                for i, t in enumerate(T):
                    for j, e in enumerate(eps):
                        records.append((str(w.index), layer, h, float(t), float(e), float(g[h, i, j]), label))
    return pd.DataFrame(records, columns=["window", "layer", "head", "T", "eps", "g", "logit_scaling"])


def sink_table(windows, L: int) -> pd.DataFrame:
    """Mean weight of token 0 (the attention sink) per head over rows 1..L-1. Columns ``window, layer, head,
    sink_weight``."""
    _check_windows(windows)
    records = []
    for w in windows:
        for layer in w.layer_ids:
            alpha, _ = w.inputs(layer, L)
            sink = alpha[:, 1:, 0].mean(-1).cpu().numpy()
            records += [(str(w.index), layer, h, float(sink[h])) for h in range(len(sink))]
    return pd.DataFrame(records, columns=["window", "layer", "head", "sink_weight"])


# ----------------------------------------------------------------------------------------------------------------
# all five, their provenance, and the results cache
# ----------------------------------------------------------------------------------------------------------------
TABLES = ("distance", "critical_scan", "critical", "separability", "gradient", "sink")


@dataclass
class Results:
    """The tables of one run (or of several merged runs) and their provenance.

    ``distance`` (Alg. 1-2), ``critical_scan`` and ``critical`` (Alg. 3), ``separability`` (Alg. 4), ``gradient``
    (Alg. 5), ``sink`` (attention-sink weight per head); ``provenance``: model, text, preset, seed, versions, wall
    time per algorithm.
    """

    distance: pd.DataFrame
    critical_scan: pd.DataFrame
    critical: pd.DataFrame
    separability: pd.DataFrame
    gradient: pd.DataFrame
    sink: pd.DataFrame
    provenance: dict

    def save(self, folder) -> Path:
        """Write every table as ``<name>.csv`` and ``provenance.json`` into ``folder`` (created); returns it."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name in TABLES:
            getattr(self, name).to_csv(folder / f"{name}.csv", index=False, float_format="%.17g")
        (folder / "provenance.json").write_text(json.dumps(self.provenance, indent=2, sort_keys=True) + "\n")
        return folder

    def summary(self) -> str:
        """A few lines naming the model, text, preset, windows, heads, arithmetic and the time each part took."""
        p = self.provenance
        heads = self.sink.groupby("window").size()
        seconds = ", ".join(f"{k} {v:.0f} s" for k, v in p["seconds"].items())
        return "\n".join([
            f"model {p['model'].get('model_id')}, text {p['text'].get('name')}, preset {p['preset']['name']}, "
            f"windows {p['windows']} ({int(heads.iloc[0])} heads each, {int(heads.sum())} head-windows)",
            f"Algorithms 1-4 in {p['precision']}, Algorithm 5 in float64; exclude_sink={p['exclude_sink']}, "
            f"tokens={p['tokens']}, seed {p['seed']}",
            f"computed in {p['seconds']['total']:.0f} s ({seconds})",
        ])

    @classmethod
    def load(cls, folder) -> Results:
        """Read a folder written by :meth:`save` (or by ``attnlimits analyze``)."""
        folder = Path(folder)
        missing = [f"{name}.csv" for name in TABLES if not (folder / f"{name}.csv").is_file()]
        if missing or not (folder / "provenance.json").is_file():
            raise FileNotFoundError(f"{folder} holds no complete results: missing {missing or ['provenance.json']}")
        tables = {name: pd.read_csv(folder / f"{name}.csv", dtype={"window": str}) for name in TABLES}
        tables["critical"]["critical_N"] = tables["critical"]["critical_N"].astype("Int64")
        return cls(**tables, provenance=json.loads((folder / "provenance.json").read_text()))


def merge(parts: Sequence[Results]) -> Results:
    """Concatenate runs over disjoint window ranges of the same model, text and preset into one result.

    Per-window tables concatenate exactly. Algorithm 3 pools the heads over a run's windows, so each run keeps its
    own critical rows, told apart by their ``windows`` column.
    """
    if not parts:
        raise ValueError("parts: nothing to merge")
    keys = {(p.provenance["model"]["sha256"], p.provenance["text"]["sha256"], json.dumps(p.provenance["preset"]),
             p.provenance["exclude_sink"], p.provenance["tokens"]) for p in parts}
    if len(keys) > 1:
        raise ValueError("parts: runs of different models, texts, presets or options cannot be merged")
    seen = [w for p in parts for w in p.provenance["windows"]]
    if len(seen) != len(set(seen)):
        raise ValueError(f"parts: the window ranges overlap ({sorted(seen)})")
    tables = {name: pd.concat([getattr(p, name) for p in parts], ignore_index=True) for name in TABLES}
    seconds = {k: sum(p.provenance["seconds"].get(k, 0) for p in parts) for k in parts[0].provenance["seconds"]}
    provenance = dict(parts[0].provenance, windows=sorted(seen), seconds=seconds)
    return Results(**tables, provenance=provenance)


def _versions() -> dict:
    import scipy
    import transformers

    import attnlimits

    return {"attnlimits": attnlimits.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "numpy": np.__version__, "scipy": scipy.__version__, "pandas": pd.__version__,
            "python": sys.version.split()[0]}


def _code_hash() -> str:
    """SHA-256 of the modules that compute the results: a cached result from other code is not reused."""
    from attnlimits import bounds

    digest = hashlib.sha256()
    for module in (sys.modules[__name__], rowstats, bounds):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()


def run(model, text, preset: str | Preset = "paper", *, windows: int | None = None, first_window: int = 0,
        exclude_sink: bool = False, tokens: str = "value", precision: str = "float32", seed: int = 0,
        progress: bool | None = None) -> Results:
    """Algorithms 1-5 (and the sink weights) on ``windows`` windows of ``text`` (the preset's count by default).

    ``precision`` applies to Algorithms 1-4: ``"float32"`` reads the model's own float32 weights and values (it
    agrees with ``"float64"`` within 1e-5 relative: benchmarks/bench_experiments.py measures it on the same
    captures, and the tests check it). Algorithm 5 always runs in float64, since its smallest eps needs the
    precision. The grid is validated before anything is captured. Everything runs on the model's device.
    """
    _dtype(precision)
    p = get_preset(preset)
    count = p.windows if windows is None else windows
    validate_grid(p, max_positions=_max_positions(model), windows=count)
    if tokens not in _TOKENS:
        raise ValueError(f"tokens: must be one of {_TOKENS}, got {tokens!r}")
    seconds = {}
    started = time.perf_counter()
    caps = capture_windows(model, text, length=p.max_length, count=count, first_window=first_window, tokens=tokens,
                           progress=progress)
    seconds["capture"] = time.perf_counter() - started
    opts = {"exclude_sink": exclude_sink, "tokens": tokens, "precision": precision, "progress": progress}

    def timed(name, fn, *args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        seconds[name] = time.perf_counter() - t0
        return out

    grid = {p.alg1_N: list(p.alg1_L)}
    for n in p.alg2_N:
        grid.setdefault(n, []).append(p.alg2_L)
    distance = timed("alg1_2", distance_table, caps, grid, **opts)
    scan, critical = timed("alg3", critical_n, caps, p.alg1_L, p.ks_levels, **opts)
    window_range = f"{caps[0].index}-{caps[-1].index}"
    scan["windows"] = window_range
    critical["windows"] = window_range
    separability = timed("alg4", separability_table, caps, p.alg4_L, p.alg4_N, **opts)
    gradient = timed("alg5", gradient_table, caps, p.alg5_L, p.alg5_T, p.alg5_eps, seed=seed, progress=progress)
    sink = timed("sink", sink_table, caps, p.max_length)
    seconds["total"] = time.perf_counter() - started
    provenance = {
        "model": _model_provenance(model),
        "text": text.provenance.as_dict() if hasattr(text, "provenance") else {"name": "string", "sha256": _sha(text)},
        "preset": p.as_dict(),
        "windows": [c.index for c in caps],
        "seed": seed,
        "exclude_sink": exclude_sink,
        "tokens": tokens,
        "precision": precision,
        "device": str(caps[0].layers[0].q.device),
        "versions": _versions(),
        "code_sha256": _code_hash(),
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
    }
    return Results(distance, scan, critical, separability, gradient, sink, provenance)


def _max_positions(model) -> int | None:
    from attnlimits import models

    return models.facts(model).get("max_positions")


def _model_provenance(model) -> dict:
    prov = getattr(model, "provenance", None)
    if prov is not None:
        return prov.as_dict()
    return {"model_id": type(model).__name__, "sha256": "unrecorded (a bare torch module)"}


def _sha(text: str) -> str:
    return hashlib.sha256(str(text).encode()).hexdigest()


def results_folder(model, text, preset: str | Preset = "paper", *, exclude_sink: bool = False,
                   tokens: str = "value", precision: str = "float32", root=None) -> Path:
    """Where :func:`results` caches a run: ``<root>/<model>/<text>/<preset>[-options]``.

    ``root``: ``$ATTNLIMITS_RESULTS``, else the ``results`` folder of the book's checkout (git-ignored), else the
    user cache.
    """
    if root is None:
        root = os.environ.get("ATTNLIMITS_RESULTS")
    if root is None:
        checkout = Path(__file__).resolve().parents[2]
        if (checkout / "pyproject.toml").is_file() and (checkout / "_toc.yml").is_file():
            root = checkout / "results"
        else:
            from attnlimits import provenance

            root = provenance.cache_dir() / "results"
    model_name = _model_provenance(model)["model_id"].replace("/", "--")
    text_name = text.provenance.name if hasattr(text, "provenance") else "string-" + _sha(text)[:12]
    name = get_preset(preset).name + ("-no-sink" if exclude_sink else "") + ("" if tokens == "value" else f"-{tokens}")
    name += "" if precision == "float32" else f"-{precision}"
    return Path(root) / model_name / text_name / name


def results(model, text, preset: str | Preset = "paper", *, exclude_sink: bool = False, tokens: str = "value",
            precision: str = "float32", seed: int = 0, root=None, progress: bool | None = None) -> Results:
    """The results of :func:`run` from the cache when the same model, text, preset, options and code produced
    them, else computed now and cached (so a test run computes once and the book build reuses the numbers)."""
    folder = results_folder(model, text, preset, exclude_sink=exclude_sink, tokens=tokens, precision=precision,
                            root=root)
    p = get_preset(preset)
    try:
        cached = Results.load(folder)
    except (FileNotFoundError, ValueError, KeyError, json.JSONDecodeError):
        cached = None
    if cached is not None:
        prov = cached.provenance
        same = (prov.get("model", {}).get("sha256") == _model_provenance(model).get("sha256")
                and prov.get("text", {}).get("sha256") == (text.provenance.sha256 if hasattr(text, "provenance")
                                                             else _sha(text))
                and prov.get("preset") == json.loads(json.dumps(p.as_dict())) and prov.get("seed") == seed
                and prov.get("code_sha256") == _code_hash() and prov.get("windows") == list(range(p.windows)))
        if same:
            return cached
    res = run(model, text, p, exclude_sink=exclude_sink, tokens=tokens, precision=precision, seed=seed,
              progress=progress)
    res.save(folder)
    return res
