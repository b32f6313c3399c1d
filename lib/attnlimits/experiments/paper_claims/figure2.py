"""Figure 2's claims (Algorithms 1-3): the distance and its expectation against L and N, the critical N; every rule
on the expectation held to every reading of Eq. (10), and what tells the readings apart.

Each claim reads a run's summaries per window (:class:`attnlimits.experiments.summaries.Summaries`; a per-head
:class:`attnlimits.experiments.Results` is summarised first): per window a statistic over its heads (the median
by default), then each window's own number (a slope, a ratio, a critical N), then their median over windows with
its interval over windows."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnlimits.experiments.paper_claims.rules import (
    CONVERGED,
    FRACTION,
    LINEAR,
    PLATEAU,
    Claim,
    PerWindow,
    as_summaries,
    log_slopes,
    make_claim,
    show_interval,
    stated,
    windows_text,
)
from attnlimits.infra.ks import KS_LEVEL
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
from attnlimits.infra.verdicts import INCONCLUSIVE as UNSURE
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
#: How the texts name the per-window statistic every claim of Algorithms 1-2 reads.
_MEDIAN = "the median over a window's heads"


def _readings_held(res, counting: str = "visible") -> list[str]:
    """The readings of the expectation the run's distance summaries hold (a run without token 0 computes E alone),
    :data:`READINGS`' order."""
    held = set(res.counted(counting)["quantity"])
    return [r for r in READINGS if r in held]


def _growth_claim(res, quantity: str, key: str, name: str, counting: str = "visible") -> tuple[Claim, str]:
    """Figure 2a: the median over windows of each window's log-log slope in L of its median over heads of
    ``quantity`` at N = alg1_N."""
    p = res.provenance["preset"]
    pw = PerWindow(res.alg1(counting), "L")

    def statistic(counts):
        return log_slopes(pw.levels, pw.means(counts, quantity))

    iv = pw.interval(statistic)
    mean = pw.medians(quantity)
    claim = make_claim(
        res,
        key,
        "2a",
        f"at $N = {p['alg1_N']}$, the {name} grows about linearly with $L$",
        f"{_MEDIAN} grows as $L^{{{iv.value:.2f}}}$ [{iv.lo:.2f}, {iv.hi:.2f}] (each window's own slope, their "
        f"median over the windows; $L$ = {min(p['alg1_L'])}...{max(p['alg1_L'])}; ×{mean[-1] / mean[0]:.1f} over a "
        f"×{max(p['alg1_L']) // min(p['alg1_L'])} longer context; {stated(iv)})",
        decide(iv.lo, iv.hi, LINEAR),
        "reproduced when the 95 % interval (order statistics over windows) of the median over windows of each "
        "window's log-log slope in L of the median over its heads lies in [0.8, 1.2], not reproduced when it lies "
        "outside, else inconclusive",
        iv.value,
        iv.lo,
        iv.hi,
        units=iv.units,
    )
    return claim, show_interval(iv.value, iv.lo, iv.hi)


def fig2a_distance(res) -> Claim:
    """Figure 2a: the true distance grows about linearly in L."""
    return _growth_claim(as_summaries(res), "d_tilde", "fig2a-distance-linear", r"true distance $\tilde d$")[0]


def _expectation_growth(res, reading: str, counting: str = "visible") -> tuple[Claim, str]:
    """Figure 2a's expectation growth under one reading."""
    return _growth_claim(res, reading, "fig2a-expectation-linear", f"expected distance ({READING_NAMES[reading]})",
                         counting)  # fmt: skip


def fig2a_expectation(res, cannot_tell=frozenset()) -> Claim:
    """Figure 2a: the random-selection expectation grows about linearly in L, under every reading of it."""
    return _over_readings(as_summaries(res), "fig2a-expectation-linear", cannot_tell)


def fig2a_bound(res) -> Claim:
    """Figure 2a: the bound d_max is valid and conservative. A sanity check: Theorem 1 (the book's reconstruction)
    is proved, so the bound holds on any data; the conservativeness is shown, not decided.

    Valid: every window's largest head ratio d~ / d_max at every (L, N) is at most 1 (a maximum over heads, read
    per window). Shown: each window's median head ratio, averaged over the (L, N) and the windows."""
    res = as_summaries(res)
    t = res.counted()
    t = t[t.quantity == "d_tilde/d_max"]
    valid = float((t["max"] <= 1 + 1e-9).mean())
    ratio = float(t.groupby("window")["q50"].mean().mean())
    windows = t.window.nunique()
    return make_claim(
        res,
        "fig2a-bound",
        "2a",
        r"the bound $d_{\max}$ is valid and conservative",
        rf"every head's $\tilde d \le d_{{\max}}$ in {valid:.1%} of {len(t):,} (window, $L$, $N$) points (each "
        rf"window's largest head ratio $\tilde d / d_{{\max}}$ at most 1); the median over a window's heads of "
        rf"$\tilde d / d_{{\max}}$, averaged over the $(L, N)$ and the windows, is {ratio:.3f}; "
        rf"{windows_text(windows)}",
        HOLDS if valid == 1.0 else VIOLATED,
        "a sanity check, not a reproduction: Theorem 1's bound is proved (chapter 13), so it holds on any data; "
        "holds when every window's largest head ratio d~ / d_max is at most 1 at every (L, N), violated otherwise "
        "(a bug); how conservative it is (the median head ratio, averaged over the windows) is shown",
        ratio,
        units=windows,
        kind=SANITY_CHECK,
    )


def fig2b_plateau(res) -> Claim:
    """Figure 2b: beyond N ~ 20 the distance plateaus (L fixed)."""
    res = as_summaries(res)
    p = res.provenance["preset"]
    ns = sorted(n for n in p["alg2_N"] if n >= 20)
    ns = ns if len(ns) >= 2 else sorted(p["alg2_N"])[-2:]  # a small preset: its two largest N
    pw = PerWindow(res.alg2(), "N")

    def statistic(counts):
        return pw.mean(counts, "d_tilde", ns[-1]) / pw.mean(counts, "d_tilde", ns[0])

    iv = pw.interval(statistic, ratio=True)
    return make_claim(
        res,
        "fig2b-plateau",
        "2b",
        f"at $L = {p['alg2_L']}$, the distance plateaus beyond $N = 20$",
        rf"{_MEDIAN} of $\tilde d$ changes by ×{show_interval(iv.value, iv.lo, iv.hi)} from $N = {ns[0]}$ to "
        rf"$N = {ns[-1]}$ (each window's own factor, their median over the windows; {stated(iv)})",
        decide(iv.lo, iv.hi, PLATEAU),
        "reproduced when the 95 % interval (order statistics over windows) of the median over windows of the "
        "factor by which each window's median over its heads of d~ changes from N = 20 to the largest N lies in "
        "[0.8, 1.25], not reproduced when it lies outside, else inconclusive",
        iv.value,
        iv.lo,
        iv.hi,
        units=iv.units,
    )


def _convergence(res, reading: str, counting: str = "visible") -> tuple[Claim, str]:
    """Figure 2b's convergence under one reading: each window's median head ratio reading / d~, its median over the
    windows, at the smallest and the largest N of Algorithm 2."""
    p = res.provenance["preset"]
    first, last = min(p["alg2_N"]), max(p["alg2_N"])
    pw = PerWindow(res.alg2(counting), "N")
    quantity = f"{reading}/d_tilde"
    start = pw.interval(lambda counts: pw.mean(counts, quantity, first), ratio=True).value
    iv = pw.interval(lambda counts: pw.mean(counts, quantity, last), ratio=True)
    closer = abs(np.log(iv.value)) < abs(np.log(start))
    claim = make_claim(
        res,
        "fig2b-convergence",
        "2b",
        f"true and expected distances converge as $N$ grows to {last}",
        rf"{_MEDIAN} of {reading}$/\tilde d$ (each head's ratio), its median over the windows, = {start:.3f} at "
        rf"$N = {first}$ and {show_interval(iv.value, iv.lo, iv.hi, 3)} at $N = {last}$ ({stated(iv)})",
        decide(iv.lo, iv.hi, CONVERGED) if closer else NOT,
        f"not reproduced when reading/d~ at N = {last} is no closer to 1 than at N = {first}; else decided on the "
        f"95 % interval (order statistics over windows) of the median over windows of each window's median over "
        f"its heads of each head's reading / d~ at N = {last}: reproduced inside [2/3, 3/2], not "
        f"reproduced outside, else inconclusive",
        iv.value,
        iv.lo,
        iv.hi,
        units=iv.units,
    )
    return claim, show_interval(iv.value, iv.lo, iv.hi, 3)


def fig2b_convergence(res, cannot_tell=frozenset()) -> Claim:
    """Figure 2b: true and expected distances converge as N grows to 100, under every reading of the expectation."""
    return _over_readings(as_summaries(res), "fig2b-convergence", cannot_tell)


def _critical(res, reading: str = "E", counting: str = "visible") -> PerWindow | None:
    """Each window's own critical N (Algorithm 3 run on that window's heads alone) at the KS level of Figure 2c,
    for one reading and counting, per L: quantity ``critical_N`` (a window where no evaluated N reached the level
    counts as N = L) and ``reached`` (1 where one did, else 0). None where Algorithm 3 searched none."""
    crit = res.critical
    if crit.empty:
        return None
    keep = (crit.ks_level == KS_LEVEL) & (crit.reading == reading)
    keep &= (crit.counting == counting) if "counting" in crit.columns else counting == "visible"
    t = crit[keep]
    if t.empty:
        return None
    found = t.critical_N.astype("Float64")
    n = found.fillna(t.L.astype("Float64")).astype(float)
    values = pd.concat(
        [t.assign(quantity="critical_N", value=n), t.assign(quantity="reached", value=found.notna().astype(float))]
    )
    return PerWindow(values, "L", stat="value")


def _missed(pw: PerWindow) -> dict[int, int]:
    """Per L, how many windows reached no N below L (only the lengths where some window did not)."""
    reached = pw.per_window("reached")
    missed = np.isfinite(reached).sum(axis=0) - np.nansum(reached, axis=0)
    return {int(L): int(m) for L, m in zip(pw.levels, missed, strict=True) if m}


def _missed_text(pw: PerWindow) -> str:
    """How many windows reached no N below L, by L, in words ("" where every window reached one at every L)."""
    missed = _missed(pw)
    if not missed:
        return ""
    each = ", ".join(f"{L}: {m}" for L, m in missed.items())
    return f"windows (of {len(pw.units)}) where no $N < L$ reached the level, by $L$: {each}"


def _fractions(pw: PerWindow) -> pd.DataFrame:
    """Per L, the median over windows of each window's critical N / L and its interval over windows, with the verdict
    of each L against :data:`FRACTION`."""
    rows = []
    for L in pw.levels:
        iv = pw.interval(lambda counts, L=L: pw.mean(counts, "critical_N", L) / L)
        rows.append((int(L), iv.value, iv.lo, iv.hi, decide(iv.lo, iv.hi, FRACTION), iv))
    return pd.DataFrame(rows, columns=["L", "fraction", "lo", "hi", "verdict", "interval"])


def _not_measured(res, key: str, figure: str, paper: str, why: str, rule: str) -> tuple[Claim, str]:
    """A claim the run has no number for."""
    return make_claim(res, key, figure, paper, f"{NOT_MEASURED}: {why}", NOT_MEASURED, rule, units=0), NOT_MEASURED


def _not_searched(res, key: str, paper: str, rule: str, reading: str, counting: str) -> tuple[Claim, str]:
    """A Figure 2c claim for a reading Algorithm 3 searched no critical N for."""
    why = f"Algorithm 3 searched no critical N for the reading {reading} ({counting} tokens) at KS level {KS_LEVEL:g}"
    return _not_measured(res, key, "2c", paper, why, rule)


#: How Figure 2c's texts name the critical N they read.
_OWN = "each window's own critical $N$ (Algorithm 3 on that window's heads alone)"
_FRACTION_PAPER = r"critical $N \approx 0.06\,L$ (fewer than 6 % of the tokens)"
_FRACTION_RULE = (
    "decided per length, never on a summary over lengths: each L's median over windows of each window's own critical "
    "N / L (Algorithm 3 run on that window's heads alone; a window where no N < L reaches the KS level counts as "
    "N = L) with its 95 % interval (order statistics over windows); reproduced when every L's interval lies in "
    "[0.03, 0.12], not reproduced when some L's interval lies wholly outside it, else inconclusive; value, lo, hi: "
    "the deciding length's (the largest L outside, else the largest L straddling, else the largest L)"
)


def _critical_fraction(res, reading: str, counting: str = "visible") -> tuple[Claim, str]:
    """Figure 2c's constant fraction under one reading, decided per length on the windows' own critical N."""
    pw = _critical(res, reading, counting)
    if pw is None:
        return _not_searched(res, "fig2c-critical", _FRACTION_PAPER, _FRACTION_RULE, reading, counting)
    t = _fractions(pw)
    verdict = combine(t.verdict)
    pick = t[t.verdict == verdict] if verdict != REPRODUCED else t
    row = pick.iloc[-1]
    per_l = ", ".join(f"{r.L}: {show_interval(r.fraction, r.lo, r.hi, 3)}" for r in t.itertuples())
    outside = [int(r.L) for r in t.itertuples() if r.verdict == NOT]
    measured = (
        f"{_OWN} over $L$ for {reading}, its median over the windows, by $L$ (KS level {KS_LEVEL:g}; 95 % interval, "
        f"{stated(row.interval)}): {per_l}"
        + (f"; wholly outside [0.03, 0.12] at $L$ = {', '.join(map(str, outside))}" if outside else "")
        + (f"; {_missed_text(pw)}, counted as $N = L$" if _missed(pw) else "")
    )
    claim = make_claim(res, "fig2c-critical", "2c", _FRACTION_PAPER, measured, verdict, _FRACTION_RULE,
                       row.fraction, row.lo, row.hi, units=row.interval.units)  # fmt: skip
    return claim, f"$L = {int(row.L)}$: {show_interval(row.fraction, row.lo, row.hi, 3)}"


def fig2c_critical(res, cannot_tell=frozenset()) -> Claim:
    """Figure 2c: the critical N is about 6 % of L (a constant fraction, the paper's "fewer than 6 %"), decided per
    length under every reading of the expectation."""
    return _over_readings(as_summaries(res), "fig2c-critical", cannot_tell)


_PROPORTIONAL_PAPER = "critical $N$ grows in proportion to $L$"
_PROPORTIONAL_RULE = (
    "reproduced when the 95 % interval (order statistics over windows) of the median over windows of each window's "
    "log-log slope in L of its own critical N (Algorithm 3 run on that window's heads alone) lies in [0.8, 1.2], not "
    "reproduced when outside, else inconclusive; a length where some window reaches no N < L at the KS level is left "
    "out (counted as N = L it would grow as L by construction; not reproduced when fewer than two lengths remain); "
    "untrained controls show it too, so proportionality alone is no evidence that attention selects by content"
)


def _proportional(res, reading: str, counting: str = "visible") -> tuple[Claim, str]:
    """Figure 2c's proportionality under one reading: the median over windows of each window's log-log slope in L
    of its own critical N, over the lengths where every window reached one."""
    pw = _critical(res, reading, counting)
    if pw is None:
        return _not_searched(res, "fig2c-proportional", _PROPORTIONAL_PAPER, _PROPORTIONAL_RULE, reading, counting)
    missed = _missed(pw)
    lengths = np.array([L for L in pw.levels if int(L) not in missed])
    left = f"; left out, the lengths with {_missed_text(pw)}" if missed else ""
    if len(lengths) < 2:
        measured = (
            f"{_OWN} for {reading} (KS level {KS_LEVEL:g}): fewer than two lengths where every window reached an "
            f"$N < L$, no growth to read ({windows_text(len(pw.units))}){left}"
        )
        claim = make_claim(res, "fig2c-proportional", "2c", _PROPORTIONAL_PAPER, measured, NOT, _PROPORTIONAL_RULE,
                           units=len(pw.units))  # fmt: skip
        return claim, "no critical N"
    at = np.searchsorted(pw.levels, lengths)
    iv = pw.interval(lambda counts: log_slopes(lengths, pw.means(counts, "critical_N")[..., at]))
    measured = (
        f"{_OWN} for {reading} grows as $L^{{{iv.value:.2f}}}$ [{iv.lo:.2f}, {iv.hi:.2f}] (each window's own "
        f"slope, their median over the windows; KS level {KS_LEVEL:g}; "
        f"$L$ = {', '.join(str(int(L)) for L in lengths)}; {stated(iv)}){left}"
    )
    claim = make_claim(res, "fig2c-proportional", "2c", _PROPORTIONAL_PAPER, measured, decide(iv.lo, iv.hi, LINEAR),
                       _PROPORTIONAL_RULE, iv.value, iv.lo, iv.hi, units=iv.units)  # fmt: skip
    return claim, show_interval(iv.value, iv.lo, iv.hi)


def fig2c_proportional(res, cannot_tell=frozenset()) -> Claim:
    """Figure 2c: the critical N grows in proportion to L, under every reading of the expectation."""
    return _over_readings(as_summaries(res), "fig2c-proportional", cannot_tell)


#: The rules on the expectation, per claim key: the function that holds one reading to the rule.
READING_RULES = {
    "fig2a-expectation-linear": _expectation_growth,
    "fig2b-convergence": _convergence,
    "fig2c-critical": _critical_fraction,
    "fig2c-proportional": _proportional,
}


def _over_readings(res, key: str, cannot_tell=frozenset()) -> Claim:
    """The claim ``key`` held to every reading the run holds: the common verdict of those measured when they agree,
    :data:`DEPENDS_ON_READING` when they differ; each reading's verdict in the measured text, the primary reading
    E's numbers in ``value``, ``value_lo``, ``value_hi``. A reading that reproduces the claim where an untrained
    network reproduces it too (``(key, reading)`` in ``cannot_tell``, :func:`untrained_passes`) cannot tell a
    trained model from a random one: it is shown, and left out of the verdict (with every reading left out, the
    verdict is "inconclusive")."""
    rule = READING_RULES[key]
    per = {reading: rule(res, reading) for reading in _readings_held(res)}
    blind = {r for r, (c, _) in per.items() if c.verdict == REPRODUCED and (key, r) in cannot_tell}
    counted = [c.verdict for r, (c, _) in per.items() if r not in blind]
    verdict = combine(counted, readings=True) if counted else UNSURE
    primary = next(iter(per.values()))[0]
    said = "; ".join(
        f"{reading}: {c.verdict}"
        + ("" if c.verdict == NOT_MEASURED else f" ({brief})")
        + (" — an untrained network passes too: this reading cannot tell" if reading in blind else "")
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
        f"'{DEPENDS_ON_READING}' when they differ; a reading that reproduces the claim where an untrained network "
        "(chapter 34's control) reproduces it too cannot tell, and is left out of the verdict; value, lo, hi: the "
        "reading E's",
        primary.value,
        primary.value_lo,
        primary.value_hi,
        primary.units,
        REPRODUCTION,
    )


def untrained_passes(controls) -> frozenset:
    """The ``(key, reading)`` pairs of :data:`READING_RULES` whose rule an untrained network reproduces: the rule
    applied to each run of ``controls`` (untrained controls' :class:`~attnlimits.experiments.summaries.Summaries`,
    chapter 34's), a pair kept when any of them reproduces it. A reading's rule that passes on random weights cannot
    tell the trained model's attention from a random network's (:func:`_over_readings` leaves it out)."""
    out = set()
    for res in controls:
        res = as_summaries(res)
        for key, rule in READING_RULES.items():
            out |= {(key, r) for r in _readings_held(res) if rule(res, r)[0].verdict == REPRODUCED}
    return frozenset(out)


#: The columns of :func:`readings_claims`.
READINGS_COLUMNS = ("key", "reading", "counting", "value", "lo", "hi", "units", "verdict", "measured")


def readings_claims(res, countings=("visible",)) -> pd.DataFrame:
    """Every rule of Figure 2 that reads the expectation (:data:`READING_RULES`: 2a's growth, 2b's convergence at
    the largest N, 2c's constant fraction decided per length, 2c's proportionality) held to every reading the run
    holds (E, E_mc, E_full, E_perm), one row per (key, reading, counting): columns :data:`READINGS_COLUMNS`.

    ``value``, ``lo``, ``hi``: the number the rule reads (a median over windows of each window's statistic over its
    heads, or of its own critical N) and its 95 % interval over ``units`` windows; ``verdict`` by the claim's rule
    ("not measured" where the run has no number: Algorithm 3 searches neither E_mc nor the row counting).
    ``countings``: of :data:`COUNTINGS`, those the run holds (default the visible tokens, so one row per (key,
    reading)). :func:`claims` gives each key's rows one verdict: theirs when they agree, "depends on the reading"
    when they differ.
    """
    unknown = [c for c in countings if c not in COUNTINGS]
    if unknown:
        raise ValueError(f"countings: {unknown} are not among {list(COUNTINGS)}")
    res = as_summaries(res)
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
    interval (``growth``, ``ratio``, ``fraction``: the deciding length's median over windows of each window's
    critical N / L, ``slope``: the median over windows of each window's exponent in L of its critical N; each with
    ``_lo`` and ``_hi``) and its verdict (``verdict_2a``, ``verdict_2b``, ``verdict_2c``,
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

    Columns, each number with its 95 % interval (``_lo``, ``_hi``; order statistics over windows), each a median over
    the windows of each window's own number from the median over its heads: ``expected`` and ``d_tilde``, the reading's
    and the true distance's magnitude at N = alg1_N and the largest alg1_L (Figure 2a's right end); ``ratio``, the
    median head ratio reading / d~ there; ``growth``, the exponent in L at N = alg1_N (Figure 2a's slope);
    ``change_in_N``, the factor by which the reading moves from the smallest to the largest alg2_N at alg2_L (Figure 2b:
    E_full barely moves, so its "convergence" is d~ rising to it); ``critical_growth``, the median over windows of each
    window's exponent in L of its critical N (Figure 2c, :func:`fig2c_proportional`'s; NaN where Algorithm 3 did not
    search the reading or where fewer than two lengths have a critical N in every window); ``units``, the windows;
    ``shows``, the same in words.
    ``attrs``: N, L, and the N range of ``change_in_N``.
    """
    res = as_summaries(res)
    p = res.provenance["preset"]
    top, n = max(p["alg1_L"]), p["alg1_N"]
    first, last = min(p["alg2_N"]), max(p["alg2_N"])
    at = PerWindow(res.alg1(), "L")
    by_n = PerWindow(res.alg2(), "N")

    def at_top(quantity):
        return lambda counts: at.mean(counts, quantity, top)

    d = at.interval(at_top("d_tilde"))
    rows = []
    for reading in _readings_held(res):
        e = at.interval(at_top(reading))
        ratio = at.interval(at_top(f"{reading}/d_tilde"), ratio=True)
        moved = by_n.interval(
            lambda counts, r=reading: by_n.mean(counts, r, last) / by_n.mean(counts, r, first), ratio=True
        )
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


#: The p-value below which :func:`critical_sensitivity` counts a window's paired test as separating d~ from the
#: reading head by head.
WILCOXON_ALPHA = 0.05


def critical_sensitivity(res, readings=("E", "E_full")) -> pd.DataFrame:
    """How Figure 2c's critical N depends on the heads the KS test compares, at the longest length of Algorithm 1's
    grid: one row per reading of the expectation, from each window's own search
    (:func:`attnlimits.experiments.summaries.sensitivity`), averaged over the windows.

    Columns: ``windows``; ``windows without a critical N`` (no N < L reached the KS level: such a window counts as
    N = L in every mean); the mean over windows of each window's critical N with every head (``critical N, every
    head``), of its median and of the ends of its 95 % range over seeded random subsets of k heads (``critical N, k
    heads: median``, ``: 2.5 %``, ``: 97.5 %``; k: the paper's GPT-2 has 144), and of its critical N on one query
    head per key/value group (``critical N, one head per key/value group``: heads of a group read the same values);
    ``share of windows with Wilcoxon p < 0.05``: of the windows with a critical N, those where the paired Wilcoxon
    signed-rank test of d~ against the reading at that N separates them head by head; ``heads per Wilcoxon test``:
    the mean over those windows of the heads it tested. ``attrs``: L and k. Why: the KS test's power grows with the
    number of heads, so a critical N is a statement about this model's head count as much as about its selection.
    """
    res = as_summaries(res)
    t = res.sensitivity
    if t.empty:
        raise ValueError(
            "res: the run has no per-window sensitivity table (it is computed when a window is summarised alone: "
            "the shipped results, not a run of several windows read at once)"
        )
    size = int(t.subset.iloc[0])
    rows = []
    for reading in readings:
        r = t[t.reading == reading]
        if r.empty:
            raise ValueError(f"readings: the run has no critical N for reading {reading!r} ({sorted(set(t.reading))})")
        top = int(r.L.iloc[0])

        def mean(column, r=r, top=top):
            return float(r[column].astype("Float64").fillna(top).astype(float).mean())

        tested = r[r.wilcoxon_p.notna()]
        rows.append(
            {
                "reading": reading,
                "windows": len(r),
                "windows without a critical N": int(r.critical_N.isna().sum()),
                "critical N, every head": mean("critical_N"),
                f"critical N, {size} heads: median": mean("subset_median"),
                f"critical N, {size} heads: 2.5 %": mean("subset_lo"),
                f"critical N, {size} heads: 97.5 %": mean("subset_hi"),
                "critical N, one head per key/value group": mean("one_per_group"),
                f"share of windows with Wilcoxon p < {WILCOXON_ALPHA:g}": (
                    float((tested.wilcoxon_p < WILCOXON_ALPHA).mean()) if len(tested) else np.nan
                ),
                "heads per Wilcoxon test": float(tested.heads.mean()) if len(tested) else np.nan,
            }
        )
    table = pd.DataFrame(rows).set_index("reading")
    table.attrs.update(L=int(t.L.max()), heads=size)
    return table
