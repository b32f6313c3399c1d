"""Figure 2's claims (Algorithms 1-3): the distance and its expectation against L and N, the critical N; every rule
on the expectation held to every reading of Eq. (10), and what tells the readings apart."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pandas as pd

from attnlimits.experiments.critical_reading import (
    critical_draws,
    critical_from_heads,
    critical_head_subsets,
    one_head_per_group,
)
from attnlimits.experiments.paper_claims.rules import (
    CONVERGED,
    FRACTION,
    LINEAR,
    PLATEAU,
    Claim,
    Pooled,
    log_slopes,
    loglog_slope,
    make_claim,
    run_windows,
    show_interval,
    stated,
    windows_text,
)
from attnlimits.infra import statistics
from attnlimits.infra.ks import KS_LEVEL
from attnlimits.infra.statistics import RESAMPLES, SEED
from attnlimits.infra.verdicts import (
    DEPENDS_ON_READING,
    HOLDS,
    NOT_MEASURED,
    REPRODUCED,
    REPRODUCTION,
    SANITY_CHECK,
    VIOLATED,
    combine,
    decide,
)
from attnlimits.infra.verdicts import NOT_REPRODUCED as NOT

#: The readings of Eq. (10)'s expectation (:data:`attnlimits.experiments.algorithms.READINGS`) every rule on the
#: expectation is applied to, the book's primary reading first; and the countings of a row's tokens.
READINGS = ("E", "E_mc", "E_full", "E_perm")
COUNTINGS = ("visible", "row")
#: How the claims' texts name each reading.
READING_NAMES = {
    "E": "the book's reconstruction $E$",
    "E_mc": "the exact expectation $E_{mc}$",
    "E_full": "the inner factor 1, $E_{full}$",
    "E_perm": "the permutation null $E_{perm}$",
}
#: How the rules on the expectation say that they are held to every reading.
_BY_READING = "applied to every reading of Eq. (10)'s expectation the run holds (E, E_mc, E_full, E_perm)"


def _readings_held(res, counting: str = "visible") -> list[str]:
    """The readings of the expectation the run's distance table holds (a column with a number: a run without
    token 0 computes E alone and leaves the others' columns empty), :data:`READINGS`' order."""
    t = res.counted(counting)
    return [r for r in READINGS if r in t.columns and t[r].notna().any()]


def _growth_claim(res, column: str, key: str, name: str, counting: str = "visible") -> tuple[Claim, str]:
    """Figure 2a: the log-log slope in L of the median over heads of each head's pooled ``column`` at N = alg1_N."""
    p = res.provenance["preset"]
    pooled = Pooled(res.alg1(counting), [column], "L")

    def statistic(counts):
        return log_slopes(pooled.levels, pooled.medians(pooled.heads(counts, column)))

    iv = pooled.interval(statistic)
    med = pooled.medians(pooled.heads(None, column))
    claim = make_claim(
        res,
        key,
        "2a",
        f"at $N = {p['alg1_N']}$, the {name} grows about linearly with $L$",
        f"median over heads (each head pooled over its rows in every window) grows as $L^{{{iv.value:.2f}}}$ "
        f"[{iv.lo:.2f}, {iv.hi:.2f}] ($L$ = {min(p['alg1_L'])}...{max(p['alg1_L'])}; ×{med[-1] / med[0]:.1f} over "
        f"a ×{max(p['alg1_L']) // min(p['alg1_L'])} longer context; {stated(iv)})",
        decide(iv.lo, iv.hi, LINEAR),
        "reproduced when the 95 % interval (jackknife t over windows) of the log-log slope in L of the "
        "median over heads of each head's mean over its rows and windows lies in [0.8, 1.2], not reproduced when "
        "it lies outside, else inconclusive",
        iv.value,
        iv.lo,
        iv.hi,
        units=iv.units,
    )
    return claim, show_interval(iv.value, iv.lo, iv.hi)


def fig2a_distance(res) -> Claim:
    """Figure 2a: the true distance grows about linearly in L."""
    return _growth_claim(res, "d_tilde", "fig2a-distance-linear", r"true distance $\tilde d$")[0]


def _expectation_growth(res, reading: str, counting: str = "visible") -> tuple[Claim, str]:
    """Figure 2a's expectation growth under one reading."""
    return _growth_claim(res, reading, "fig2a-expectation-linear", f"expected distance ({READING_NAMES[reading]})",
                         counting)  # fmt: skip


def fig2a_expectation(res) -> Claim:
    """Figure 2a: the random-selection expectation grows about linearly in L, under every reading of it."""
    return _over_readings(res, "fig2a-expectation-linear")


def fig2a_bound(res) -> Claim:
    """Figure 2a: the bound d_max is valid and conservative. A sanity check: Theorem 1 (the book's reconstruction)
    is proved, so the bound holds on any data; the conservativeness is shown, not decided."""
    t = res.counted()
    valid = float((t.d_tilde <= t.d_max * (1 + 1e-9)).mean())
    ratio = float((t.d_tilde / t.d_max).median())
    return make_claim(
        res,
        "fig2a-bound",
        "2a",
        r"the bound $d_{\max}$ is valid and conservative",
        rf"$\tilde d \le d_{{\max}}$ in {valid:.1%} of {len(t):,} (head, window, $L$, $N$) means; median "
        rf"$\tilde d / d_{{\max}}$ = {ratio:.3f}; {windows_text(t.window.nunique())}",
        HOLDS if valid == 1.0 else VIOLATED,
        "a sanity check, not a reproduction: Theorem 1's bound is proved (chapter 13), so it holds on any data; "
        "holds when every mean respects it, violated otherwise (a bug); how conservative it is, is shown",
        ratio,
        units=t.window.nunique(),
        kind=SANITY_CHECK,
    )


def fig2b_plateau(res) -> Claim:
    """Figure 2b: beyond N ~ 20 the distance plateaus (L fixed)."""
    p = res.provenance["preset"]
    ns = sorted(n for n in p["alg2_N"] if n >= 20)
    ns = ns if len(ns) >= 2 else sorted(p["alg2_N"])[-2:]  # a small preset: its two largest N
    pooled = Pooled(res.alg2(), ["d_tilde"], "N")

    def statistic(counts):
        q = pooled.heads(counts, "d_tilde")
        return pooled.median(q, ns[-1]) / pooled.median(q, ns[0])

    iv = pooled.interval(statistic, ratio=True)
    return make_claim(
        res,
        "fig2b-plateau",
        "2b",
        f"at $L = {p['alg2_L']}$, the distance plateaus beyond $N = 20$",
        rf"median over heads of $\tilde d$ changes by ×{show_interval(iv.value, iv.lo, iv.hi)} from $N = {ns[0]}$ to "
        rf"$N = {ns[-1]}$ ({stated(iv)})",
        decide(iv.lo, iv.hi, PLATEAU),
        "reproduced when the 95 % interval (jackknife t over windows, on the log scale) of the factor by which the "
        "median over heads of each head's pooled d~ changes from N = 20 to the largest N lies in [0.8, 1.25], not "
        "reproduced when it lies outside, else inconclusive",
        iv.value,
        iv.lo,
        iv.hi,
        units=iv.units,
    )


def _convergence(res, reading: str, counting: str = "visible") -> tuple[Claim, str]:
    """Figure 2b's convergence under one reading: the median over heads of reading / d~ (each pooled per head)."""
    p = res.provenance["preset"]
    first, last = min(p["alg2_N"]), max(p["alg2_N"])
    pooled = Pooled(res.alg2(counting), ["d_tilde", reading], "N")

    def ratio_at(n):
        def statistic(counts):
            return pooled.median(pooled.heads(counts, reading) / pooled.heads(counts, "d_tilde"), n)

        return statistic

    start = pooled.value(ratio_at(first))
    iv = pooled.interval(ratio_at(last), ratio=True)
    closer = abs(np.log(iv.value)) < abs(np.log(start))
    claim = make_claim(
        res,
        "fig2b-convergence",
        "2b",
        f"true and expected distances converge as $N$ grows to {last}",
        rf"median over heads of {reading}$/\tilde d$ = {start:.3f} at $N = {first}$ and "
        rf"{show_interval(iv.value, iv.lo, iv.hi, 3)} at $N = {last}$ ({stated(iv)})",
        decide(iv.lo, iv.hi, CONVERGED) if closer else NOT,
        f"not reproduced when reading/d~ at N = {last} is no closer to 1 than at N = {first}; else decided on the "
        f"95 % interval (jackknife t over windows, on the log scale) of the median over heads of each head's pooled "
        f"reading / pooled d~ at N = {last}: reproduced inside [2/3, 3/2], not reproduced outside, else inconclusive",
        iv.value,
        iv.lo,
        iv.hi,
        units=iv.units,
    )
    return claim, show_interval(iv.value, iv.lo, iv.hi, 3)


def fig2b_convergence(res) -> Claim:
    """Figure 2b: true and expected distances converge as N grows to 100, under every reading of the expectation."""
    return _over_readings(res, "fig2b-convergence")


def _critical(res, reading: str = "E", counting: str = "visible") -> pd.DataFrame:
    """Algorithm 3's pooled critical N of the run's first window range at the KS level of Figure 2c, for one
    reading and counting (empty where the table has none)."""
    crit = res.critical
    if crit.empty:
        return crit
    keep = (crit.ks_level == KS_LEVEL) & (crit.windows == crit.windows.iloc[0])
    if "window" in crit.columns:
        keep &= crit.window.astype(str) == "all"
    keep &= (crit.reading == reading) if "reading" in crit.columns else reading == "E"
    keep &= (crit.counting == counting) if "counting" in crit.columns else counting == "visible"
    return crit[keep].sort_values("L")


def _critical_units(res, crit: pd.DataFrame) -> int | None:
    """How many windows the critical N's intervals rest on."""
    if "units" in crit.columns and crit["units"].notna().any():
        return int(crit["units"].dropna().iloc[0])
    heads = getattr(res, "critical_heads", None)
    if heads is not None and not heads.empty:
        return int(heads.window.nunique())
    return run_windows(res)


def _fractions(crit: pd.DataFrame) -> pd.DataFrame:
    """Per L, the critical N / L and its interval's ends (no N reached counts as N = L; NaN ends without an
    interval), with the verdict of each L against :data:`FRACTION`."""
    L = crit.L.astype(float).to_numpy()

    def of(column):
        if column not in crit.columns:
            return np.full(len(L), np.nan)
        return crit[column].astype("Float64").fillna(pd.Series(L, index=crit.index)).astype(float).to_numpy() / L

    t = pd.DataFrame({"L": crit.L.astype(int).to_numpy(), "fraction": of("critical_N")})
    t["lo"], t["hi"] = of("critical_N_lo"), of("critical_N_hi")
    t["verdict"] = [decide(lo, hi, FRACTION) for lo, hi in zip(t.lo, t.hi, strict=True)]
    return t


def _not_measured(res, key: str, figure: str, paper: str, why: str, rule: str) -> tuple[Claim, str]:
    """A claim the run has no number for."""
    return make_claim(res, key, figure, paper, f"{NOT_MEASURED}: {why}", NOT_MEASURED, rule, units=0), NOT_MEASURED


def _not_searched(res, key: str, paper: str, rule: str, reading: str, counting: str) -> tuple[Claim, str]:
    """A Figure 2c claim for a reading Algorithm 3 searched no critical N for."""
    why = f"Algorithm 3 searched no critical N for the reading {reading} ({counting} tokens) at KS level {KS_LEVEL:g}"
    return _not_measured(res, key, "2c", paper, why, rule)


_FRACTION_PAPER = r"critical $N \approx 0.06\,L$ (fewer than 6 % of the tokens)"
_FRACTION_RULE = (
    "decided per length, never on a summary over lengths: each L's critical N / L with its 95 % interval (bootstrap "
    "over windows of the per-head means, percentile; no N reached counts as N = L); reproduced when every L's "
    "interval lies in [0.03, 0.12], not reproduced when some L's interval lies wholly outside it, else inconclusive; "
    "value, lo, hi: the deciding length's (the largest L outside, else the largest L straddling, else the largest L)"
)


def _critical_fraction(res, reading: str, counting: str = "visible") -> tuple[Claim, str]:
    """Figure 2c's constant fraction under one reading, decided per length."""
    crit = _critical(res, reading, counting)
    if crit.empty:
        return _not_searched(res, "fig2c-critical", _FRACTION_PAPER, _FRACTION_RULE, reading, counting)
    t = _fractions(crit)
    verdict = combine(t.verdict)
    pick = t[t.verdict == verdict] if verdict != REPRODUCED else t
    row = pick.iloc[-1]
    units = _critical_units(res, crit)
    per_l = ", ".join(f"{r.L}: {show_interval(r.fraction, r.lo, r.hi, 3)}" for r in t.itertuples())
    outside = [int(r.L) for r in t.itertuples() if r.verdict == NOT]
    how = statistics.Interval(math.nan, math.nan, math.nan, units or 0, "percentile" if (units or 0) > 1 else "none")
    measured = (
        f"critical $N/L$ for {reading} by $L$ (KS level {KS_LEVEL:g}; 95 % interval, {stated(how)}): "
        + per_l
        + (f"; wholly outside [0.03, 0.12] at $L$ = {', '.join(map(str, outside))}" if outside else "")
    )
    claim = make_claim(res, "fig2c-critical", "2c", _FRACTION_PAPER, measured, verdict, _FRACTION_RULE,
                   row.fraction, row.lo, row.hi, units=units)  # fmt: skip
    return claim, f"$L = {int(row.L)}$: {show_interval(row.fraction, row.lo, row.hi, 3)}"


def fig2c_critical(res) -> Claim:
    """Figure 2c: the critical N is about 6 % of L (a constant fraction, the paper's "fewer than 6 %"), decided per
    length under every reading of the expectation."""
    return _over_readings(res, "fig2c-critical")


#: The critical N of every bootstrap draw (:func:`attnlimits.experiments.critical_reading.critical_draws`) of the last
#: :data:`_KEPT_DRAWS` ``critical_heads`` tables asked for, each kept with the table itself (so an id is never reused
#: while it is kept): a chapter that compares many runs reads each run's claims several times.
_DRAWS: OrderedDict[int, tuple[pd.DataFrame, pd.DataFrame]] = OrderedDict()
_KEPT_DRAWS = 32


def _critical_draws(res) -> pd.DataFrame | None:
    """The per-draw critical N at the KS level :data:`attnlimits.infra.ks.KS_LEVEL` of every reading
    ``critical_heads`` holds (None without the table); the same draws for every L, so that a slope across L can be
    read per draw."""
    heads = getattr(res, "critical_heads", None)
    if heads is None or heads.empty:
        return None
    hit = _DRAWS.get(id(heads))
    if hit is None or hit[0] is not heads:
        draws = critical_draws(heads, [KS_LEVEL], resamples=RESAMPLES, seed=SEED)
        _DRAWS[id(heads)] = hit = (heads, draws)
        while len(_DRAWS) > _KEPT_DRAWS:
            _DRAWS.popitem(last=False)
    _DRAWS.move_to_end(id(heads))
    return hit[1]


_PROPORTIONAL_PAPER = "critical $N$ grows in proportion to $L$"
_PROPORTIONAL_RULE = (
    "reproduced when the 95 % interval (percentile of the slopes of the bootstrap draws over windows of the "
    "per-head means, the same draws at every L) of the log-log slope of the critical N in L lies in [0.8, 1.2], not "
    "reproduced when outside, else inconclusive; lengths where no N < L reaches the KS level have no critical N "
    "and are left out (not reproduced when fewer than two remain); untrained controls show it too, so "
    "proportionality alone is no evidence that attention selects by content"
)


def _proportional(res, reading: str, counting: str = "visible") -> tuple[Claim, str]:
    """Figure 2c's proportionality under one reading: the log-log slope of the critical N in L."""
    crit = _critical(res, reading, counting)
    if crit.empty:
        return _not_searched(res, "fig2c-proportional", _PROPORTIONAL_PAPER, _PROPORTIONAL_RULE, reading, counting)
    units = _critical_units(res, crit)
    found = crit[crit.critical_N.notna()]
    if len(found) < 2:
        measured = (
            f"no critical N below L for {reading} at {len(crit) - len(found)} of {len(crit)} lengths (KS level "
            f"{KS_LEVEL:g}): fewer than two lengths with a critical N to grow"
        )
        claim = make_claim(res, "fig2c-proportional", "2c", _PROPORTIONAL_PAPER, measured, NOT, _PROPORTIONAL_RULE,
                       units=units)  # fmt: skip
        return claim, "no critical N"
    lengths = found.L.astype(int).to_numpy()
    value = loglog_slope(lengths, found.critical_N.astype(float))
    lo = hi = math.nan
    draws = _critical_draws(res)
    d = None if draws is None else draws[(draws.reading == reading) & (draws.ks_level == KS_LEVEL)]
    common = [] if d is None else [L for L in lengths if L in set(d.L)]  # the per-head table's lengths
    if len(common) >= 2:
        wide = d.pivot(index="draw", columns="L", values="critical_N").reindex(columns=common)
        slopes = log_slopes(common, wide.to_numpy(float))
        lo, hi = (float(v) for v in np.percentile(slopes, [2.5, 97.5]))
        units = int(res.critical_heads.window.nunique())
    missing = crit.L[crit.critical_N.isna()].astype(int).tolist()
    left = f"; no critical N at $L$ = {', '.join(map(str, missing))}, left out" if missing else ""
    how = statistics.Interval(value, lo, hi, units or 0, "percentile" if (units or 0) > 1 else "none")
    measured = (
        f"critical $N$ for {reading} grows as $L^{{{value:.2f}}}$ [{lo:.2f}, {hi:.2f}] (KS level {KS_LEVEL:g}; "
        f"{stated(how)}){left}"
    )
    claim = make_claim(res, "fig2c-proportional", "2c", _PROPORTIONAL_PAPER, measured, decide(lo, hi, LINEAR),
                   _PROPORTIONAL_RULE, value, lo, hi, units=units)  # fmt: skip
    return claim, show_interval(value, lo, hi)


def fig2c_proportional(res) -> Claim:
    """Figure 2c: the critical N grows in proportion to L, under every reading of the expectation."""
    return _over_readings(res, "fig2c-proportional")


#: The rules on the expectation, per claim key: the function that holds one reading to the rule.
READING_RULES = {
    "fig2a-expectation-linear": _expectation_growth,
    "fig2b-convergence": _convergence,
    "fig2c-critical": _critical_fraction,
    "fig2c-proportional": _proportional,
}


def _over_readings(res, key: str) -> Claim:
    """The claim ``key`` held to every reading the run holds: the common verdict of those measured when they agree,
    :data:`DEPENDS_ON_READING` when they differ; each reading's verdict in the measured text, the primary reading
    E's numbers in ``value``, ``value_lo``, ``value_hi``."""
    rule = READING_RULES[key]
    per = {reading: rule(res, reading) for reading in _readings_held(res)}
    verdict = combine((c.verdict for c, _ in per.values()), readings=True)
    primary = next(iter(per.values()))[0]
    said = "; ".join(
        f"{reading}: {c.verdict}" + ("" if c.verdict == NOT_MEASURED else f" ({brief})")
        for reading, (c, brief) in per.items()
    )
    return Claim(
        key,
        primary.figure,
        primary.paper,
        ("by reading — " if len(per) > 1 else f"on one reading only (the run holds {next(iter(per))} alone) — ")
        + f"{said}. {next(iter(per))}: {primary.measured}",
        verdict,
        f"{primary.rule}; {_BY_READING}: their common verdict when the readings measured agree, "
        f"'{DEPENDS_ON_READING}' when they differ; value, lo, hi: the reading E's",
        primary.value,
        primary.value_lo,
        primary.value_hi,
        primary.units,
        REPRODUCTION,
    )


#: The columns of :func:`readings_claims`.
READINGS_COLUMNS = ("key", "reading", "counting", "value", "lo", "hi", "units", "verdict", "measured")


def readings_claims(res, countings=("visible",)) -> pd.DataFrame:
    """Every rule of Figure 2 that reads the expectation (:data:`READING_RULES`: 2a's growth, 2b's convergence at
    the largest N, 2c's constant fraction decided per length, 2c's proportionality) held to every reading the run
    holds (E, E_mc, E_full, E_perm), one row per (key, reading, counting): columns :data:`READINGS_COLUMNS`.

    ``value``, ``lo``, ``hi``: the number the rule reads and its 95 % interval over ``units`` windows; ``verdict``
    by the claim's rule ("not measured" where the run has no number: Algorithm 3 searches neither E_mc nor the
    row counting). ``countings``: of :data:`COUNTINGS`, those the run holds (default the visible tokens, so one row
    per (key, reading)). :func:`claims` gives each key's rows one verdict: theirs when they agree, "depends on the
    reading" when they differ.
    """
    unknown = [c for c in countings if c not in COUNTINGS]
    if unknown:
        raise ValueError(f"countings: {unknown} are not among {list(COUNTINGS)}")
    rows = []
    for counting in (c for c in countings if c in res.countings):
        for key, rule in READING_RULES.items():
            for reading in _readings_held(res, counting):
                c, _ = rule(res, reading, counting)
                rows.append((key, reading, counting, c.value, c.value_lo, c.value_hi, c.units, c.verdict, c.measured))
    return pd.DataFrame(rows, columns=list(READINGS_COLUMNS))


#: :func:`figure2_readings`' names for the rules of :data:`READING_RULES`.
_WIDE = {
    "fig2a-expectation-linear": ("growth", "2a"),
    "fig2b-convergence": ("ratio", "2b"),
    "fig2c-critical": ("fraction", "2c"),
    "fig2c-proportional": ("slope", "2c_proportional"),
}


def figure2_readings(res) -> pd.DataFrame:
    """:func:`readings_claims` on both countings, one row per (reading, counting): for each rule its number and
    interval (``growth``, ``ratio``, ``fraction``: the deciding length's critical N / L, ``slope``: the critical N's
    exponent in L; each with ``_lo`` and ``_hi``) and its verdict (``verdict_2a``, ``verdict_2b``, ``verdict_2c``,
    ``verdict_2c_proportional``), and ``units``."""
    long = readings_claims(res, COUNTINGS)
    rows = []
    for (reading, counting), t in long.groupby(["reading", "counting"], sort=False):
        row = {"reading": reading, "counting": counting}
        for r in t.itertuples():
            number, claim = _WIDE[r.key]
            row |= {number: r.value, f"{number}_lo": r.lo, f"{number}_hi": r.hi, f"verdict_{claim}": r.verdict}
        row["units"] = int(t.units.max())
        rows.append(row)
    return pd.DataFrame(rows)


def reading_predictions(res) -> pd.DataFrame:
    """What each reading of the expectation predicts, so that a reader holding the paper's Figure 2 can tell which
    reading the paper computed: one row per reading the run holds (visible tokens).

    Columns, each number with its 95 % interval (``_lo``, ``_hi``; jackknife t over windows, of the
    median over heads of each head's mean over its rows and windows): ``expected`` and ``d_tilde``, the reading's
    and the true distance's magnitude at N = alg1_N and the largest alg1_L (Figure 2a's right end); ``ratio``, the
    median over heads of reading / d~ there; ``growth``, the exponent in L at N = alg1_N (Figure 2a's slope);
    ``change_in_N``, the factor by which the reading's median moves from the smallest to the largest alg2_N at
    alg2_L (Figure 2b: E_full barely moves, so its "convergence" is d~ rising to it); ``critical_growth``, the
    exponent in L of its critical N (Figure 2c; NaN where Algorithm 3 did not search the reading); ``units``, the
    windows; ``shows``, the same in words. ``attrs``: N, L, and the N range of ``change_in_N``.
    """
    p = res.provenance["preset"]
    top, n = max(p["alg1_L"]), p["alg1_N"]
    first, last = min(p["alg2_N"]), max(p["alg2_N"])
    held = _readings_held(res)
    alg1 = res.alg1()
    at = Pooled(alg1[alg1.L == top], ["d_tilde", *held], "L")
    by_n = Pooled(res.alg2(), held, "N")

    def median_of(column):
        return lambda counts: at.median(at.heads(counts, column), top)

    d = at.interval(median_of("d_tilde"))
    rows = []
    for reading in held:
        e = at.interval(median_of(reading))
        ratio = at.interval(
            lambda counts, r=reading: at.median(at.heads(counts, r) / at.heads(counts, "d_tilde"), top), ratio=True
        )

        def change(counts, r=reading):
            q = by_n.heads(counts, r)
            return by_n.median(q, last) / by_n.median(q, first)

        moved = by_n.interval(change, ratio=True)
        growth = _expectation_growth(res, reading)[0]
        critical = _proportional(res, reading)[0]
        numbers = {
            "expected": e,
            "d_tilde": d,
            "ratio": ratio,
            "growth": (growth.value, growth.value_lo, growth.value_hi),
            "change_in_N": moved,
            "critical_growth": (critical.value, critical.value_lo, critical.value_hi),
        }
        row = {"reading": reading}
        for name, (value, lo, hi, *_) in numbers.items():
            row |= {name: value, f"{name}_lo": lo, f"{name}_hi": hi}
        row["units"] = e.units
        row["shows"] = (
            f"at $N = {n}$, $L = {top}$: {e.value:.4g} against $\\tilde d$ = {d.value:.4g} (×{ratio.value:.2f}); "
            f"grows as $L^{{{growth.value:.2f}}}$; ×{moved.value:.2f} from $N = {first}$ to {last} at "
            f"$L = {p['alg2_L']}$; "
            + (
                f"critical $N$ grows as $L^{{{critical.value:.2f}}}$"
                if not np.isnan(critical.value)
                else "no critical N growth measured"
            )
        )
        rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs.update(N=n, L=top, change_in_N=(first, last), L_of_change=p["alg2_L"])
    return table


def critical_sensitivity(res, readings=("E", "E_full"), *, level: float = KS_LEVEL, size: int = 144) -> pd.DataFrame:
    """How Figure 2c's critical N depends on the heads the KS test compares, at the longest length of Algorithm 1's
    grid: one row per reading of the expectation.

    Columns: the run's critical N with every head; its median and 95 % range over seeded random subsets of ``size``
    heads (the paper's GPT-2 has 144;
    :func:`attnlimits.experiments.critical_reading.critical_head_subsets`); the critical N on one query head per
    key/value group (heads of a group read the same values,
    :func:`attnlimits.experiments.critical_reading.one_head_per_group`); and the p-value of the paired Wilcoxon
    signed-rank test of d~ against the reading at the run's critical N, with the number of heads it tested (NaN and
    0 where no N < L reaches ``level``). Why: the KS test's power grows with the number of heads, so a critical N is a
    statement about this model's head count as much as about its selection.
    """
    top = max(res.preset.alg1_L)
    crit, heads, facts = res.critical, res.critical_heads, res.provenance["model"]
    group = one_head_per_group(heads, facts["n_heads"], facts["n_kv_heads"])
    rows = []
    for reading in readings:
        at_top = crit[(crit.L == top) & (crit.reading == reading) & (crit.ks_level == level)]
        if at_top.empty:
            raise ValueError(
                f"readings, level: the run has no critical N for reading {reading!r} at KS level {level} "
                f"(readings: {sorted(set(crit.reading))}, levels: {sorted(set(crit.ks_level))})"
            )
        found = at_top.critical_N.iloc[0]
        median, lo, hi = critical_head_subsets(heads, top, reading, level, size=size)
        one = critical_from_heads(heads, top, reading, level, head_index=group)
        wilcoxon_p, tested = float("nan"), 0
        if not pd.isna(found):
            pick = (heads.L == top) & (heads.N == found) & (heads.reading == reading)
            _, wilcoxon_p, tested = statistics.wilcoxon_heads(heads[pick], "d_tilde", "expected")
        rows.append(
            {
                "reading": reading,
                f"critical N at L = {top}": found,
                f"{size} heads: median": median,
                f"{size} heads: 2.5 %": lo,
                f"{size} heads: 97.5 %": hi,
                "one head per key/value group": one,
                "Wilcoxon p at that N": wilcoxon_p,
                "heads": tested,
            }
        )
    return pd.DataFrame(rows).set_index("reading")
