"""A literal implementation of the paper's Algorithms 1-5: Python loops over windows, layers, heads, query rows and
every N of the grid, numpy over tokens. Slow on purpose: it is the reference that ``attnlimits.experiments`` is
checked against (tests/test_experiments.py) and timed against (benchmarks/bench_experiments.py).

It reads the same captures (``attnlimits.models.Capture``) and follows the same definitions: row t's
tokens are n <= t, alpha is the float64 softmax of the model's logits, a head's statistic is the mean over rows
with more than N tokens, and Algorithm 3 scans *every* N (the experiments module searches instead).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from scipy.stats import ks_2samp


def _row(w, layer, h, t, L, exclude_sink):
    alpha, x = w.inputs(layer, L, exclude_sink=exclude_sink)
    first = int(exclude_sink)
    return alpha[h, t, first : t + 1].numpy(), x[h, first : t + 1].numpy()


def _layer_arrays(w, layer, L, exclude_sink):
    alpha, x = w.inputs(layer, L, exclude_sink=exclude_sink)
    return alpha.numpy(), x.numpy()


def row_stats(a: np.ndarray, x: np.ndarray, n: int) -> dict:
    """d~, d_max, E of one row (weights a over the row's tokens, token vectors x), by the paper's formulas."""
    order = np.argsort(-a, kind="stable")
    sel, rest = order[:n], order[n:]
    y = a[:, None] * x
    s = y[sel].sum(0)
    d_tilde = np.linalg.norm(y[rest] - s, axis=1).sum()
    abar = a[sel].sum()
    d1 = np.linalg.norm(x[rest][:, None, :] - x[sel][None, :, :], axis=-1).max()
    m = np.linalg.norm(x[sel], axis=1).max()
    length = len(a)
    d_max = (1 - abar) * d1 + ((1 - abar) + (length - n) * abar) * m
    total = y.sum(0)
    c = n / (length - 1)
    E = (length - n) / length * np.linalg.norm(y - c * (total - y), axis=1).sum()
    return {"d_tilde": d_tilde, "d_max": d_max, "E": E}


def distance_table(windows, grid, exclude_sink=False) -> pd.DataFrame:
    """Algorithms 1-2, literally: every (window, layer, head, L, N) and every row."""
    first = int(exclude_sink)
    records = []
    top = max(max(v) for v in grid.values())
    for w in windows:
        for layer in w.layer_ids:
            alpha, x = _layer_arrays(w, layer, top, exclude_sink)
            for h in range(alpha.shape[0]):
                for n in sorted(grid):
                    for L in sorted(grid[n]):
                        stats = [
                            row_stats(alpha[h, t, first : t + 1], x[h, first : t + 1], n)
                            for t in range(L)
                            if t + 1 - first > n
                        ]
                        mean = {k: float(np.mean([s[k] for s in stats])) for k in ("d_tilde", "d_max", "E")}
                        records.append(
                            (str(w.index), layer, h, L, n, len(stats), mean["d_tilde"], mean["d_max"], mean["E"])
                        )
    return pd.DataFrame(records, columns=["window", "layer", "head", "L", "N", "rows", "d_tilde", "d_max", "E"])


def critical_scan(windows, lengths, levels=(0.05, 0.01), exclude_sink=False):
    """Algorithm 3, literally: for each L, every N from 1 to L - 1, a KS test on the per-head means."""
    first = int(exclude_sink)
    top = max(lengths)
    arrays = [[_layer_arrays(w, layer, top, exclude_sink) for layer in w.layer_ids] for w in windows]
    scan = []
    for L in lengths:
        for n in range(1, L - first):  # larger N leave no row with a dropped token
            d_heads, e_heads = [], []
            for li in range(len(windows[0].layer_ids)):
                H = arrays[0][li][0].shape[0]
                for h in range(H):
                    d_sum = e_sum = rows = 0
                    for wa in arrays:
                        alpha, x = wa[li]
                        for t in range(L):
                            if t + 1 - first > n:
                                a, xr = alpha[h, t, first : t + 1], x[h, first : t + 1]
                                order = np.argsort(-a, kind="stable")
                                sel, rest = order[:n], order[n:]
                                y = a[:, None] * xr
                                s = y[sel].sum(0)
                                d_sum += np.linalg.norm(y[rest] - s, axis=1).sum()
                                length, total = len(a), y.sum(0)
                                c = n / (length - 1)
                                e_sum += (length - n) / length * np.linalg.norm(y - c * (total - y), axis=1).sum()
                                rows += 1
                    d_heads.append(d_sum / rows)
                    e_heads.append(e_sum / rows)
            res = ks_2samp(d_heads, e_heads)
            scan.append((L, n, float(res.statistic), float(res.pvalue)))
    scan = pd.DataFrame(scan, columns=["L", "N", "ks_stat", "p_value"])
    critical = []
    for L in lengths:
        for level in levels:
            ok = scan[(scan.L == L) & (scan.p_value >= level)]
            critical.append((L, int(ok.N.min()) if len(ok) else math.nan, level))
    return scan, pd.DataFrame(critical, columns=["L", "critical_N", "ks_level"])


def separability_table(windows, L, ns, exclude_sink=False) -> pd.DataFrame:
    """Algorithm 4, literally: tokens on the unit sphere, r = R, Theorem 2's lower and reconstructed upper bounds."""
    first = int(exclude_sink)
    records = []
    for w in windows:
        for layer in w.layer_ids:
            alpha, x = _layer_arrays(w, layer, L, exclude_sink)
            for h in range(alpha.shape[0]):
                xs = x[h, first:] / np.linalg.norm(x[h, first:], axis=1, keepdims=True)
                gaps = np.linalg.norm(xs[:, None, :] - xs[None, :, :], axis=-1)
                delta = gaps[np.triu_indices(len(xs), 1)].min()
                xs = np.concatenate([x[h, :first], xs]) if first else xs
                for n in ns:
                    fr, lo, up = [], [], []
                    for t in range(L):
                        if t + 1 - first <= n:
                            continue
                        a, xr = alpha[h, t, first : t + 1], xs[first : t + 1]
                        order = np.argsort(-a, kind="stable")
                        sel, rest = order[:n], order[n:]
                        y = a[:, None] * xr
                        s = y[sel].sum(0)
                        dist = np.linalg.norm(y - s, axis=1)
                        R = dist[rest].min()
                        fr.append((dist[sel] <= R).sum() / n)
                        wsel = a[sel]
                        xi = []
                        for i in range(n):
                            others = np.delete(wsel, i)
                            s1, s2 = others.sum(), (others**2).sum()
                            xi.append(math.sqrt(max(0.0, s2 + (1 - delta**2 / 2) * (s1 * s1 - s2))))
                        lo.append(1 - sum(xi) / (n * R))
                        up.append(np.mean([math.exp(-(max(0.0, v - R) ** 2) / 2) for v in xi]))
                    records.append(
                        (
                            str(w.index),
                            layer,
                            h,
                            L,
                            n,
                            len(fr),
                            float(np.mean(fr)),
                            float(np.mean(lo)),
                            float(np.mean(up)),
                            float(delta),
                        )
                    )
    return pd.DataFrame(
        records, columns=["window", "layer", "head", "L", "N", "rows", "ns_frac", "lower", "upper", "delta"]
    )


def _softmax(z):
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


def _directions(logits, seed):
    """The random unit directions v of every row, drawn as attnlimits.core.rowstats.finite_difference_g draws them."""
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(logits.shape, generator=gen, dtype=torch.float64).masked_fill(torch.isneginf(logits), 0.0)
    return (v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)).numpy()


def gradient_table(windows, L, temperatures, eps_grid, seed=0) -> pd.DataFrame:
    """Algorithm 5, literally: per head and row, ||softmax((l + eps v)/T) - softmax(l/T)|| / eps, averaged over rows
    (the same random directions v as the experiments module, from the same seed)."""
    records = []
    for w in windows:
        for layer in w.layer_ids:
            logits = w.logits(layer, L).double()
            v = _directions(logits, seed + 1_000_003 * w.index + layer)
            logits = logits.numpy()
            scale = w[layer].scaling
            for label, values in (("model", logits), ("none", logits / scale)):
                for h in range(values.shape[0]):
                    for T in temperatures:
                        for eps in eps_grid:
                            g = []
                            for t in range(L):
                                row, vr = values[h, t, : t + 1], v[h, t, : t + 1]
                                diff = _softmax((row + eps * vr) / T) - _softmax(row / T)
                                g.append(np.linalg.norm(diff) / eps)
                            records.append((str(w.index), layer, h, float(T), float(eps), float(np.mean(g)), label))
    return pd.DataFrame(records, columns=["window", "layer", "head", "T", "eps", "g", "logit_scaling"])
