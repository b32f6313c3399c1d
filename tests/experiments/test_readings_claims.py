"""Figure 2's rules on the expectation held to every reading of Eq. (10) (attnlimits.experiments.paper_claims:
readings_claims, reading_predictions), Figure 2c's constant decided per length, and the claims' kinds and units: a
sanity check never counts as a reproduction, every claim says how many windows it rests on, and Figure 3's
saturation fails on a series that is still falling.

The synthetic runs are test_paper_claims's (quick preset: alg1_L 16, 32, 64; 8 windows; 12 heads), read per window:
each number is a statistic over a window's heads (or the window's own critical N), each window's own number, then
their median over the windows with its order-statistic interval (at 8 windows: the smallest to the largest)."""

from __future__ import annotations

import critical_heads
import numpy as np
import pandas as pd
import pytest
from test_paper_claims import (
    HEADS,
    PRESET,
    WINDOWS,
    _critical,
    _critical_heads,
    _distance,
    _order_interval,
    _results,
)

from attnlimits.experiments import paper_claims as rp
from attnlimits.experiments.critical_reading import critical_from_heads
from attnlimits.infra import verdicts


def _critical_of(found: dict, reading: str = "E") -> pd.DataFrame:
    """A critical table of one reading at KS level 0.05 of runs of one window merged (each window's own search):
    ``found`` maps L to the critical N of each window."""
    rows = [(w, f"{w}-{w}", L, reading, 0.05, n) for L, ns in found.items() for w, n in enumerate(ns)]
    t = pd.DataFrame(rows, columns=["window", "windows", "L", "reading", "ks_level", "critical_N"])
    return t.astype({"critical_N": "Int64"})


def _row(res, key: str, reading: str = "E") -> pd.Series:
    t = rp.readings_claims(res)
    return t[(t.key == key) & (t.reading == reading)].iloc[0]


# --- Figure 2c: per length ----------------------------------------------------------------------------------------


def test_the_constant_fraction_is_decided_per_length_never_on_a_median_over_lengths():
    # N / L = 1/16, 2.5/32, 1/64 (the median over the 8 windows at each L): the median over L (1/16) lies in
    # [0.03, 0.12], but at L = 64 the interval [1, 1] / 64 lies wholly below it
    found = {16: [1] * WINDOWS, 32: [2, 2, 2, 2, 3, 3, 3, 3], 64: [1] * WINDOWS}
    assert 0.03 <= np.median([np.median(n) / L for L, n in found.items()]) <= 0.12
    res = _results(critical=_critical_of(found))
    row = _row(res, "fig2c-critical")
    assert row.verdict == rp.NOT and (row.value, row.lo, row.hi) == pytest.approx((1 / 64, 1 / 64, 1 / 64))
    assert "wholly outside [0.03, 0.12] at $L$ = 64" in row.measured
    # each L's median over windows with its order-statistic interval (the smallest and largest of 8 windows)
    assert f"32: {2.5 / 32:.3f} [{2 / 32:.3f}, {3 / 32:.3f}]" in row.measured
    assert "median and order-statistic interval over 8 windows" in row.measured
    claim = rp.fig2c_critical(res)  # only E was searched: its verdict is the claim's
    assert claim.verdict == rp.NOT and "E_mc: not measured" in claim.measured
    # no length outside, one straddling the band's edge: the windows do not decide
    straddles = _results(critical=_critical_of({**found, 64: [1, 2, 3, 4, 1, 2, 3, 4]}))
    assert _row(straddles, "fig2c-critical").verdict == rp.INCONCLUSIVE
    # skewed windows at L = 64: the median (4 / 64) is not the mean (4.875 / 64); both ends inside the band
    skewed = [4, 4, 4, 4, 4, 5, 6, 7]
    inside = _results(critical=_critical_of({**found, 64: skewed}))
    row = _row(inside, "fig2c-critical")
    expected = _order_interval(np.array(skewed) / 64)
    assert expected == pytest.approx((4 / 64, 4 / 64, 7 / 64))
    assert row.verdict == rp.REPRODUCED and (row.value, row.lo, row.hi) == pytest.approx(expected, rel=1e-12)


def test_proportionality_reads_each_readings_own_critical_n():
    """E's critical N grows as L, E_full's is flat in L (test_paper_claims._critical_heads): the readings disagree.
    The run searched every window at once; each window's own critical N is read from its per-head means."""
    heads = _critical_heads()
    lengths = sorted(set(heads.L))
    joint = pd.DataFrame(
        [(L, r, 0.05, pd.NA, "all", "0-7") for r in ("E", "E_full") for L in lengths],
        columns=["L", "reading", "ks_level", "critical_N", "window", "windows"],
    ).astype({"critical_N": "Int64"})
    res = _results(critical=joint, heads=heads)
    e, full = _row(res, "fig2c-proportional"), _row(res, "fig2c-proportional", "E_full")
    assert e.verdict == rp.REPRODUCED and full.verdict == rp.NOT, (e.measured, full.measured)
    assert e.units == full.units == WINDOWS
    for reading, row in (("E", e), ("E_full", full)):  # each window's own slope, their median over the windows
        own = [[critical_from_heads(heads, L, reading, 0.05, windows=[w]) for L in lengths] for w in range(WINDOWS)]
        slopes = [rp.loglog_slope(lengths, n) for n in own]
        assert (row.value, row.lo, row.hi) == pytest.approx(_order_interval(slopes), rel=1e-12)
    claim = rp.fig2c_proportional(res)
    assert claim.verdict == rp.DEPENDS_ON_READING
    assert "E: reproduced (" in claim.measured and "E_full: not reproduced (" in claim.measured


# --- every reading held to every rule -----------------------------------------------------------------------------


def test_readings_that_disagree_give_depends_on_the_reading():
    res = _results()  # E grows as L; E_perm is flat in L (test_paper_claims._distance)
    t = rp.readings_claims(res)
    assert tuple(t.columns) == rp.READINGS_COLUMNS
    assert len(t) == len(rp.READING_RULES) * len(rp.READINGS) and set(t.reading) == set(rp.READINGS)
    growth = t[t.key == "fig2a-expectation-linear"].set_index("reading").verdict
    assert growth["E"] == growth["E_full"] == rp.REPRODUCED and growth["E_perm"] == rp.NOT
    claim = rp.fig2a_expectation(res)
    assert claim.verdict == rp.DEPENDS_ON_READING
    assert "E: reproduced (1.00 [1.00, 1.00])" in claim.measured and "E_perm: not reproduced (" in claim.measured
    assert claim.value == pytest.approx(1.0)  # the primary reading E's number
    # readings that agree give their common verdict
    agree = _distance().assign(E_perm=lambda d: d.E)
    together = rp.fig2a_expectation(_results(distance=agree))
    assert together.verdict == rp.REPRODUCED and "E_perm: reproduced" in together.measured
    # Algorithm 3 never searches E_mc: "not measured" is shown and does not count against the others
    crit = rp.readings_claims(_results(critical=_critical().query("reading == 'E'")))
    assert set(crit[crit.key == "fig2c-critical"].set_index("reading").verdict.drop("E")) == {rp.NOT_MEASURED}


def test_reading_predictions_tell_the_readings_apart():
    t = rp.reading_predictions(_results()).set_index("reading")
    assert list(t.index) == list(rp.READINGS) and (t.units == WINDOWS).all()
    assert t.attrs["N"] == PRESET["alg1_N"] and t.attrs["L"] == max(PRESET["alg1_L"])
    # at N = alg1_N and the largest L: E = 1.1 d~ and E_full = d~ (both scale * L, test_paper_claims._distance)
    assert t.loc["E", "ratio"] == pytest.approx(1.1) and t.loc["E_full", "ratio"] == pytest.approx(1.0)
    assert t.loc["E", "expected"] == pytest.approx(1.1 * t.loc["E", "d_tilde"])
    assert t.loc["E_full", "growth"] == pytest.approx(1.0) and t.loc["E_perm", "growth"] == pytest.approx(0, abs=1e-9)
    # along N at alg2_L: E falls from 2 d~ to 1.05 d~ while d~ stays; E_full (2 d~) does not move
    assert t.loc["E", "change_in_N"] == pytest.approx(1.05 / 2) and t.loc["E_full", "change_in_N"] == pytest.approx(1)
    assert t.loc["E_mc", "critical_growth"] != t.loc["E_mc", "critical_growth"]  # NaN: Algorithm 3 never searches it
    assert t.loc["E", "critical_growth"] == pytest.approx(1.0)  # 1, 2, 4 at L = 16, 32, 64 in every window
    assert t.shows.str.contains("grows as").all()


def test_reading_predictions_read_the_median_over_windows_of_each_windows_median_head():
    """Heads scaled differently in each window: d~ and E at the largest L are the median over windows of each
    window's median over heads, with the order-statistic interval over the windows; the ratio E / d~ is each
    window's median head ratio, its median over the windows on the log scale."""
    scales = np.random.default_rng(5).lognormal(0, 1, size=(WINDOWS, len(HEADS)))
    distance = _distance(scales=scales)
    t = rp.reading_predictions(_results(distance=distance)).set_index("reading")
    top = distance[(distance.counting == "visible") & (distance.N == PRESET["alg1_N"]) & (distance.L == 64)]
    for column, value in (("d_tilde", "d_tilde"), ("E", "expected")):
        medians = top.groupby("window")[column].median().to_numpy()
        assert np.median(medians) != pytest.approx(medians.mean(), rel=1e-3)  # the windows are skewed
        got = tuple(t.loc["E", [value, f"{value}_lo", f"{value}_hi"]])
        assert got == pytest.approx(_order_interval(medians), rel=1e-12)
        pooled = top.groupby(["layer", "head"])[column].mean().median()  # each head over windows: not this
        assert t.loc["E", value] != pytest.approx(pooled, rel=1e-3)
    ratios = top.assign(r=top.E / top.d_tilde).groupby("window").r.median().to_numpy()  # 1.1 in every window
    assert tuple(t.loc["E", ["ratio", "ratio_lo", "ratio_hi"]]) == pytest.approx(_order_interval(ratios, log=True))


# --- kinds and units ------------------------------------------------------------------------------------------------


def test_a_sanity_check_is_never_counted_as_a_reproduction():
    table = rp.claims(_results())
    assert set(table.kind) <= set(verdicts.CLAIM_KINDS)
    sanity = table[table.kind == rp.SANITY_CHECK]
    assert set(sanity.key) == {"fig2a-bound", "fig3-lower-bound"}
    assert set(sanity.verdict) <= set(verdicts.EXPECTATIONS)  # "holds" or "violated", never a claim's verdict
    reproduced = table[(table.kind == rp.REPRODUCTION) & (table.verdict == rp.REPRODUCED)]
    assert not set(reproduced.key) & set(sanity.key)
    assert not set(sanity.verdict) & set(verdicts.CLAIM_VERDICTS)


def _one_window(res):
    """The run cut down to its first window, as a run of that window alone: its own search (critical_heads of
    one window, its critical N read from them) and the model's heads (4 per layer, 2 key/value heads)."""
    kept = {name: getattr(res, name) for name in ("distance", "separability", "gradient", "sink")}
    kept = {name: t[t.window.astype(str) == "0"] for name, t in kept.items()}
    heads = critical_heads.table(windows=1, lengths=PRESET["alg1_L"], readings=("E",))
    found = [
        (0, L, "E", level, critical_from_heads(heads, L, "E", level))
        for L in PRESET["alg1_L"]
        for level in (0.05, 0.01)
    ]
    critical = pd.DataFrame(found, columns=["window", "L", "reading", "ks_level", "critical_N"])
    one = _results(critical=critical.astype({"critical_N": "Int64"}), heads=heads, **kept)
    one.provenance.update(windows=[0], model={"n_heads": 4, "n_kv_heads": 2})
    return one


def test_every_claim_says_how_many_windows_it_rests_on():
    table = rp.claims(_results())
    assert (table.units == WINDOWS).all()
    assert table.measured.str.contains(f"{WINDOWS} windows").all(), list(table.measured)
    t = rp.readings_claims(_results())
    measured = t[t.verdict != rp.NOT_MEASURED]
    assert (measured.units == WINDOWS).all() and measured.measured.str.contains(f"{WINDOWS} windows").all()
    assert (t[t.verdict == rp.NOT_MEASURED].units == 0).all()  # resting on no window
    one = _one_window(_results())
    for figure in ("2a", "2b", "2c", "3"):
        claims = rp.claims(one, figure)
        assert (claims.units == 1).all(), figure
        assert claims.measured.str.contains("1 window").all() and not claims.measured.str.contains("1 windows").any()


# --- Figure 3: a saturation that can fail -------------------------------------------------------------------------


def _series(values: dict) -> pd.DataFrame:
    """Algorithm 4's table where every head's N_s/N at N is ``values[N]`` (plus a small offset per head) in every
    window; the bounds hold."""
    rows = []
    for w in range(WINDOWS):
        for i, (layer, head) in enumerate(HEADS):
            for n, v in values.items():
                v = v + 0.001 * (i - len(HEADS) // 2)
                rows.append((w, layer, head, 1024, n, 1024 - n, v, v - 0.3, min(1.0, v + 0.05), 0.5, "value"))
    return pd.DataFrame(
        rows, columns=["window", "layer", "head", "L", "N", "rows", "ns_frac", "lower", "upper", "delta", "tokens"]
    )


def test_a_series_still_falling_does_not_saturate():
    # the referee's series without token 0: its mean level for N >= 16 (0.714) lies in 0.70-0.85 and it varies by
    # less than 0.1 there, which the old rule called saturated; it is still falling (x0.91 from N = 16 to 64)
    falling = {1: 1.0, 2: 0.9, 4: 0.85, 8: 0.8, 16: 0.750, 32: 0.709, 64: 0.683}
    claim = rp.fig3_plateau(_results(separability=_series(falling)))
    assert 0.70 <= claim.value <= 0.85 and claim.verdict == rp.NOT, claim.measured
    assert "from $N = 16$ to $N = 64$: ×0.911" in claim.measured
    flat = {**falling, 32: 0.748, 64: 0.746}
    assert rp.fig3_plateau(_results(separability=_series(flat))).verdict == rp.REPRODUCED
