"""A synthetic ``critical_heads`` table (Algorithm 3's per-window head means) and the search's answer read from it by
a plain loop: shared by the tests of the critical N's intervals and of the paired test over heads."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnlimits.infra.ks import ks_test


def table(layers=3, per_layer=4, windows=4, lengths=(32, 64), n_grid=8, seed=0, shift=3.0, readings=("E", "E_full")):
    """A critical_heads table (one row per window, head, L, N and reading) in which reading i (of ``readings``) is
    d~ shifted by (i + 1) times a constant that shrinks as N grows, so the KS p-value of each reading rises with N;
    window noise moves d~ and the readings together. Every reading has the same d~ and rows here."""
    rng = np.random.default_rng(seed)
    parts = []
    for L in lengths:
        ns = np.unique(np.geomspace(1, L - 1, n_grid).astype(int))
        base = rng.gamma(2.0, 1.0, size=layers * per_layer)
        for w in range(windows):
            noise = rng.normal(0, 0.3, size=base.shape)
            for n in ns:
                d = base + noise
                s = shift * L / (n * 40)
                for i, reading in enumerate(readings):
                    parts.append(rows_of(w, layers, per_layer, L, int(n), reading, L - int(n), d, d + (i + 1) * s))
    return pd.concat(parts, ignore_index=True)


def rows_of(window, layers, per_layer, L, n, reading, rows, d_tilde, expected) -> pd.DataFrame:
    """The critical_heads rows of one window, L, N and reading: one per head (``layers`` x ``per_layer``, layer by
    layer), with ``d_tilde`` and ``expected`` given per head."""
    return pd.DataFrame(
        {
            "window": window,
            "layer": np.repeat(np.arange(layers), per_layer),
            "head": np.tile(np.arange(per_layer), layers),
            "L": L,
            "N": n,
            "reading": reading,
            "rows": float(rows),
            "d_tilde": d_tilde,
            "expected": expected,
        }
    )


def search_critical(heads, L, reading, level):
    """The search's critical N from the scan: smallest evaluated N with p >= level whose next smaller N fails (each
    head's d~ and reading pooled over the windows as the rows-weighted mean)."""
    at = heads[(heads.L == L) & (heads.reading == reading) & (heads.rows > 0)]
    at = at.assign(d_tilde=at.rows * at.d_tilde, expected=at.rows * at.expected)
    previous = None
    for n, t in at.groupby("N", sort=True):
        sums = t.groupby(["layer", "head"])[["rows", "d_tilde", "expected"]].sum()
        pooled = sums[["d_tilde", "expected"]].div(sums.rows, axis=0)
        p = ks_test(pooled.d_tilde, pooled.expected)[1]
        if p >= level and (previous is None or previous < level):
            return int(n)
        previous = p
    return None
