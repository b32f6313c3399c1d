"""Figure 3's claims (Algorithm 4): the separable fraction N_s/N and Theorem 2's bounds, read per window (a
statistic over the window's heads) and averaged over windows."""

from __future__ import annotations

import numpy as np

from attnlimits.experiments.paper_claims.rules import (
    SATURATION,
    TOKEN_NAMES,
    Claim,
    PerWindow,
    as_summaries,
    make_claim,
    show_interval,
    stated,
    windows_text,
)
from attnlimits.infra.verdicts import (
    HOLDS,
    SANITY_CHECK,
    VIOLATED,
    combine,
    decide,
)
from attnlimits.infra.verdicts import NOT_REPRODUCED as NOT

#: Figure 3's flatness: the level moves by at most 5 % from N = 16 to the largest N (a still-falling series fails).
FLAT = (0.95, 1.05)

#: How far below 0 a bound's margin (a head's N_s/N - lower, or upper - N_s/N) may fall by rounding alone.
ROUNDING = 1e-9


def fig3_plateau(res, tokens: str = "value") -> Claim:
    """Figure 3: N_s/N falls until N ~ 16, then saturates at 0.70-0.85, measured on the heads' values (or on the
    ``tokens`` of the separability table: ``"embedding"``, the input token embeddings).

    The curve is, per N, the median over a window's heads of N_s/N averaged over the windows. Three parts, each a
    rule that can fail: it falls from the smallest N to N = 16; it is flat from N = 16 to the largest N (the ratio's
    interval over windows in :data:`FLAT`); its level there lies in 0.70-0.85."""
    res = as_summaries(res)
    pw = PerWindow(res.alg4(tokens), "N")
    ns = pw.levels
    start = min(16, ns[-2])  # a small preset: its two largest N
    at_start, tail = int(np.flatnonzero(ns == start)[0]), ns >= start
    med = pw.means(None, "ns_frac")
    falls = bool(med[0] > med[at_start])

    def change(counts):
        m = pw.means(counts, "ns_frac")
        return m[..., -1] / m[..., at_start]

    def level(counts):
        return pw.means(counts, "ns_frac")[..., tail].mean(axis=-1)

    flat, lvl = pw.interval(change, ratio=True), pw.interval(level)
    series = ", ".join(f"{int(n)}: {v:.3f}" for n, v in zip(ns, med, strict=True))
    return make_claim(
        res,
        "fig3-plateau",
        "3",
        "$N_s/N$ falls until $N = 16$, then saturates at 0.70–0.85",
        ("" if tokens == "value" else f"on the {TOKEN_NAMES.get(tokens, tokens)}: ")
        + rf"the median over a window's heads of $N_s/N$, averaged over the {windows_text(lvl.units)}, by $N$: "
        rf"{series}; change from $N = {int(start)}$ to $N = {int(ns[-1])}$: "
        rf"×{show_interval(flat.value, flat.lo, flat.hi, 3)}; level for $N \ge {int(start)}$: "
        rf"{show_interval(lvl.value, lvl.lo, lvl.hi)} ({stated(lvl)})",
        combine([decide(flat.lo, flat.hi, FLAT), decide(lvl.lo, lvl.hi, SATURATION)]) if falls else NOT,
        "not reproduced unless the median over a window's heads of N_s/N, averaged over the windows, falls from the "
        "smallest N to N = 16; then both parts decided on their 95 % intervals (jackknife t over windows) of that "
        "average: flat, the ratio of its value at the largest N to that at N = 16 (its interval on the log scale) "
        "in [0.95, 1.05]; level, its mean over N >= 16 in [0.70, 0.85]; reproduced when both lie inside, not "
        "reproduced when either lies wholly outside, else inconclusive",
        lvl.value,
        lvl.lo,
        lvl.hi,
        units=lvl.units,
    )


def fig3_bounds(res) -> Claim:
    """Figure 3: the lower bound is conservative, the upper bound tracks the empirical maxima (the book's
    reconstruction of Theorem 2's bounds). A sanity check: whether both bounds hold for every head of every window
    (each window's smallest margin); how close the upper bound (the median over a window's heads, averaged over
    windows) comes to the largest N_s/N of any head in any window, and whether it is informative at all, is
    shown, not decided."""
    res = as_summaries(res)
    t = res.alg4()
    t = t[(t.N > 1) & (t.heads > 0)]
    margins = t.pivot_table(index=["window", "N"], columns="quantity", values="min")
    lower_ok = float((margins["ns_frac-lower"] >= -ROUNDING).mean())
    upper_ok = float((margins["upper-ns_frac"] >= -ROUNDING).mean())
    upper = PerWindow(t, "N").means(None, "upper")
    top = np.nanmax(PerWindow(t, "N", stat="max").per_window("ns_frac"), axis=0)
    gap = float(np.abs(upper - top).max())
    below_one = float(upper.min())
    informative = "informative: below 0.95" if below_one <= 1 - 0.05 else "not informative: never below 0.95"
    windows = t.window.nunique()
    return make_claim(
        res,
        "fig3-bounds",
        "3",
        "the lower bound is conservative and the upper bound tracks the maxima (tested on the book's "
        "reconstruction of Theorem 2)",
        rf"lower bound $\le N_s/N$ for every head in {lower_ok:.1%} of the (window, $N > 1$) pairs; the "
        rf"reconstructed upper bound $\ge N_s/N$ for every head in {upper_ok:.1%}; the upper bound (the median over "
        rf"a window's heads, averaged over windows) is within {gap:.3f} of the largest $N_s/N$ of any head in any "
        f"window at every $N > 1$ and reaches {below_one:.3f} at its lowest ({informative}); "
        f"{windows_text(windows)}",
        HOLDS if lower_ok == 1.0 and upper_ok == 1.0 else VIOLATED,
        "a sanity check, not a reproduction: holds when both bounds of the book's reconstruction of Theorem 2 hold "
        f"for every head of every window (each window's smallest margin over its heads >= -{ROUNDING:g}), violated "
        "otherwise; how close the upper bound (the median over a window's heads, averaged over windows) comes to "
        "the largest N_s/N of any head in any window, and whether it falls below 0.95 at some N (a bound stuck at 1 "
        "tracks nothing), is shown",
        gap,
        units=windows,
        kind=SANITY_CHECK,
    )
