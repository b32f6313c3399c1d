"""The paper's experimental claims, each set beside what a run of :mod:`attnlimits.experiments` measures.

One function per claim turns a :class:`attnlimits.experiments.Results` into a :class:`Claim`: what the paper
reports, what we measure (a sentence with the numbers), and a verdict decided by a fixed rule stated in the
claim's ``rule``. The Experiments chapters show their rows and assert the verdicts their prose states; the
reproducibility report shows them all. Verdicts: "reproduced", "reproduced with a different constant",
"not reproduced".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

__all__ = ["CLAIMS", "DESCRIBED", "Claim", "assert_sentences", "claims", "describes", "expect", "loglog_slope"]

REPRODUCED = "reproduced"
DIFFERENT = "reproduced with a different constant"
NOT = "not reproduced"


@dataclass(frozen=True)
class Claim:
    """One claim of the paper and our measurement of it."""

    key: str
    figure: str
    paper: str
    measured: str
    verdict: str
    rule: str

    def as_dict(self) -> dict:
        """The claim as a plain dict (a table row)."""
        return asdict(self)


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x (the exponent of a power law)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _fig2a(res, column, key, name):
    p = res.provenance["preset"]
    med = res.alg1().groupby("L")[column].median()
    slope = loglog_slope(med.index, med.values)
    verdict = REPRODUCED if 0.8 <= slope <= 1.2 else NOT
    return Claim(
        key,
        "2a",
        f"at N = {p['alg1_N']}, the {name} grows about linearly with L",
        f"median over heads grows as L^{slope:.2f} (L = {min(p['alg1_L'])}..{max(p['alg1_L'])}; "
        f"x{med.iloc[-1] / med.iloc[0]:.1f} over a x{max(p['alg1_L']) // min(p['alg1_L'])} longer context)",
        verdict,
        "reproduced when the log-log slope of the median lies in [0.8, 1.2]",
    )


def fig2a_distance(res) -> Claim:
    """Figure 2a: the true distance grows about linearly in L."""
    return _fig2a(res, "d_tilde", "fig2a-distance-linear", "true distance")


def fig2a_expectation(res) -> Claim:
    """Figure 2a: the random-selection expectation grows about linearly in L."""
    return _fig2a(res, "E", "fig2a-expectation-linear", "expected distance E")


def fig2a_bound(res) -> Claim:
    """Figure 2a: the bound d_max is valid and conservative."""
    t = res.distance
    valid = float((t.d_tilde <= t.d_max * (1 + 1e-9)).mean())
    ratio = float((t.d_tilde / t.d_max).median())
    verdict = REPRODUCED if valid == 1.0 and ratio < 1 else NOT
    return Claim(
        "fig2a-bound",
        "2a",
        "the bound d_max is valid and conservative",
        f"d~ <= d_max in {valid:.1%} of {len(t):,} (head, window, L, N) means; median d~/d_max = {ratio:.3f}",
        verdict,
        "reproduced when every mean respects the bound and the median ratio is below 1",
    )


def fig2b_plateau(res) -> Claim:
    """Figure 2b: beyond N ~ 20 the distance plateaus (L fixed)."""
    p = res.provenance["preset"]
    med = res.alg2().groupby("N").d_tilde.median()
    ns = sorted(n for n in p["alg2_N"] if n >= 20)
    ns = ns if len(ns) >= 2 else sorted(p["alg2_N"])[-2:]  # a small preset: its two largest N
    ratio = float(med.loc[ns[-1]] / med.loc[ns[0]])
    verdict = REPRODUCED if 0.8 <= ratio <= 1.25 else NOT
    return Claim(
        "fig2b-plateau",
        "2b",
        f"at L = {p['alg2_L']}, the distance plateaus beyond N = 20",
        f"median d~ changes by x{ratio:.2f} from N = {ns[0]} to N = {ns[-1]}",
        verdict,
        "reproduced when the median changes by a factor in [0.8, 1.25] from N = 20 to the largest N",
    )


def fig2b_convergence(res) -> Claim:
    """Figure 2b: true and expected distances converge as N grows to 100."""
    p = res.provenance["preset"]
    t = res.alg2()
    ratio = (t.E / t.d_tilde).groupby(t.N).median()
    lo, hi = min(p["alg2_N"]), max(p["alg2_N"])
    closer = abs(np.log(ratio.loc[hi])) < abs(np.log(ratio.loc[lo]))
    verdict = REPRODUCED if closer and 2 / 3 <= ratio.loc[hi] <= 1.5 else NOT
    return Claim(
        "fig2b-convergence",
        "2b",
        f"true and expected distances converge as N grows to {hi}",
        f"median E/d~ = {ratio.loc[lo]:.3f} at N = {lo} and {ratio.loc[hi]:.3f} at N = {hi}",
        verdict,
        f"reproduced when E/d~ at N = {hi} is closer to 1 than at N = {lo} and within [2/3, 3/2]",
    )


def fig2c_critical(res) -> Claim:
    """Figure 2c: the critical N is about 6 % of L."""
    crit = res.critical[(res.critical.ks_level == 0.05) & (res.critical.windows == res.critical.windows.iloc[0])]
    found = crit.dropna(subset=["critical_N"])
    if found.empty:
        return Claim(
            "fig2c-critical",
            "2c",
            "critical N is about 0.06 L (fewer than 6 % of the tokens)",
            "the KS test tells d~ from E at every N < L",
            NOT,
            "reproduced when the median of N/L lies in [0.03, 0.12]",
        )
    frac = found.critical_N.astype(float) / found.L
    median = float(frac.median())
    if 0.03 <= median <= 0.12:
        verdict = REPRODUCED
    elif frac.std() / frac.mean() < 0.5:
        verdict = DIFFERENT
    else:
        verdict = NOT
    per_l = ", ".join(f"{int(r.L)}: {int(r.critical_N)}" for r in found.itertuples())
    return Claim(
        "fig2c-critical",
        "2c",
        "critical N is about 0.06 L (fewer than 6 % of the tokens)",
        f"critical N / L from {frac.min():.2f} to {frac.max():.2f}, median {median:.2f} (KS level 0.05; "
        f"L: N = {per_l})",
        verdict,
        "reproduced when the median of N/L lies in [0.03, 0.12]; a different constant when N/L is roughly "
        "constant in L (coefficient of variation below 0.5) elsewhere",
    )


def fig3_plateau(res) -> Claim:
    """Figure 3: N_s/N falls until N ~ 16, then saturates at 0.70-0.85."""
    t = res.separability
    med = t.groupby("N").ns_frac.median()
    tail = med[med.index >= min(16, med.index[-2])]  # a small preset: its two largest N
    level = float(tail.mean())
    flat = float(tail.max() - tail.min()) <= 0.1
    falls = med.iloc[0] > tail.iloc[0]
    if flat and falls and 0.70 <= level <= 0.85:
        verdict = REPRODUCED
    elif flat and falls:
        verdict = DIFFERENT
    else:
        verdict = NOT
    series = ", ".join(f"{n}: {v:.2f}" for n, v in med.items())
    return Claim(
        "fig3-plateau",
        "3",
        "N_s/N falls until N = 16, then saturates at 0.70-0.85",
        f"median N_s/N by N: {series}; level for N >= {tail.index[0]}: {level:.2f}",
        verdict,
        "reproduced when the median falls to N = 16, varies by at most 0.1 for N >= 16 and averages "
        "0.70-0.85 there; a different constant when it saturates elsewhere",
    )


def fig3_bounds(res) -> Claim:
    """Figure 3: the lower bound is conservative, the upper bound tracks the empirical maxima."""
    t = res.separability[res.separability.N > 1]
    lower_ok = float((t.lower <= t.ns_frac + 1e-12).mean())
    upper_ok = float((t.upper >= t.ns_frac - 1e-12).mean())
    gap = float((t.groupby("N").upper.median() - t.groupby("N").ns_frac.max()).abs().max())
    verdict = REPRODUCED if lower_ok == 1.0 and upper_ok == 1.0 and gap <= 0.05 else NOT
    return Claim(
        "fig3-bounds",
        "3",
        "the lower bound is conservative and the upper bound tracks the maxima",
        f"lower bound <= N_s/N for {lower_ok:.1%} of head means; the reconstructed upper bound >= N_s/N for "
        f"{upper_ok:.1%}; its median is within {gap:.3f} of the largest N_s/N at every N > 1",
        verdict,
        "reproduced when both bounds hold for every head's mean and the median upper bound is within 0.05 "
        "of the largest head's N_s/N at every N",
    )


def fig4_slope(res) -> Claim:
    """Figure 4: g follows 1/T for T < 0.1."""
    eps = min(res.gradient.eps)
    top = res.g_max(eps)
    low = top[top.index < 0.1]
    slope = loglog_slope(low.index, low.values)
    verdict = REPRODUCED if -1.2 <= slope <= -0.8 else NOT
    return Claim(
        "fig4-slope",
        "4",
        "g(T, eps) follows 1/T for T < 0.1",
        f"max over heads of g at eps = {eps:g} grows as T^{slope:.2f} for T < 0.1",
        verdict,
        "reproduced when the log-log slope lies in [-1.2, -0.8]",
    )


def fig4_drop(res) -> Claim:
    """Figure 4: g drops by about two orders of magnitude once T >= 1."""
    eps = min(res.gradient.eps)
    top = res.g_max(eps)
    at_one = float(top[top.index >= 1].iloc[0])
    drop = float(top.max() / at_one)
    verdict = REPRODUCED if 30 <= drop <= 300 else NOT
    return Claim(
        "fig4-drop",
        "4",
        "g drops by about two orders of magnitude once T >= 1",
        f"largest g / g at T = {top[top.index >= 1].index[0]:.3g}: x{drop:.0f} (eps = {eps:g})",
        verdict,
        "reproduced when the drop from the largest g to g at the first T >= 1 is x30..x300",
    )


def fig4_printed_bound(res) -> Claim:
    """Figure 4's dashed curve min{1/(4T), sqrt 2} against the measured g and the corrected 1/(2T)."""
    t = res.gradient
    printed = np.minimum(1 / (4 * t["T"]), np.sqrt(2))
    over = float((t.g / printed).max())
    corrected = float((t.g * 2 * t["T"]).max())
    verdict = REPRODUCED if over <= 1 else NOT
    return Claim(
        "fig4-printed-bound",
        "4",
        "the measured g stays under the printed min{1/(4T), sqrt 2}",
        f"largest g / printed bound = {over:.3f}; largest g / (1/(2T)) = {corrected:.3f} (the book's sharp "
        "bound, never above 1)",
        verdict,
        "reproduced when no head's g exceeds the printed curve",
    )


CLAIMS = (
    fig2a_distance,
    fig2a_expectation,
    fig2a_bound,
    fig2b_plateau,
    fig2b_convergence,
    fig2c_critical,
    fig3_plateau,
    fig3_bounds,
    fig4_slope,
    fig4_drop,
    fig4_printed_bound,
)


def claims(res, figure: str | None = None) -> pd.DataFrame:
    """Every claim (or those of one ``figure``: "2a", "2b", "2c", "3", "4") as a table, one row per claim."""
    rows = [c(res).as_dict() for c in CLAIMS]
    table = pd.DataFrame(rows)
    if figure is not None:
        table = table[table.figure == figure].reset_index(drop=True)
    return table


#: The run whose results the chapters' prose describes (the machines that build the book): model id, text name and
#: preset name. A page computed on another preset, or on several models, replaces the entries that differ.
DESCRIBED = {"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "text": "pydoc-topics", "preset": "paper"}


def describes(run, described: Mapping | None = None) -> bool:
    """Whether ``run`` is the run a page's prose was written from.

    ``run``: a :class:`attnlimits.experiments.Results` (its provenance names the model id, the text and the preset)
    or a ``(model, text, preset)`` tuple of names (a comparison of several models passes a tuple of their labels as
    ``model``). ``described``: what the prose was written from, as :data:`DESCRIBED` (the default) with any of its
    entries replaced, e.g. ``{"preset": "reduced"}``.
    """
    unknown = sorted(set(described or {}) - set(DESCRIBED))
    if unknown:
        raise ValueError(f"described: unknown entries {unknown}; allowed: {list(DESCRIBED)}")
    want = {**DESCRIBED, **(described or {})}
    if isinstance(run, tuple):
        if len(run) != 3:
            raise ValueError(f"run: expected a Results or a (model, text, preset) tuple, got a {len(run)}-tuple")
        got = run
    elif hasattr(run, "provenance"):
        p = run.provenance
        got = (p["model"].get("model_id"), p["text"].get("name"), p["preset"]["name"])
    else:
        raise ValueError(f"run: expected a Results or a (model, text, preset) tuple, got {type(run).__name__}")
    return got == (want["model"], want["text"], want["preset"])


def assert_sentences(
    statements: Mapping[str, bool], *, described: bool, about: str = "the run that builds the book"
) -> pd.Series:
    """Check a page's sentences on the numbers of the run it shows; ``statements`` maps each sentence to whether
    the numbers bear it out.

    When ``described`` (the run is the one the prose was written from, see :func:`describes`) every sentence must
    hold: an AssertionError names those that do not. On any other run (a reader's own model, text or preset) the
    prose does not apply: the sentences that do not hold are printed, naming ``about`` (what the prose describes),
    and the page runs to the end. Returns whether each sentence holds (a boolean Series named ``holds``).
    """
    bad = [s for s, ok in statements.items() if not isinstance(ok, bool | np.bool_)]
    if bad:
        raise TypeError(f"statements: each sentence must map to a single bool (use .all() or .any()); not so for {bad}")
    holds = pd.Series({s: bool(ok) for s, ok in statements.items()}, name="holds", dtype=bool)
    failed = list(holds.index[~holds])
    if described:
        assert not failed, f"the text no longer matches the numbers: {failed}"
    elif failed:
        print(f"note: the text describes {about}; on this run {len(failed)} of its sentences do not hold:")
        for sentence in failed:
            print(f"  - {sentence}")
    return holds


def expect(res, table: pd.DataFrame, expected: dict[str, str]) -> dict[str, str]:
    """The verdicts of ``table`` by key; asserted equal to ``expected`` when the prose describes ``res``.

    Each expected verdict is a sentence for :func:`assert_sentences`: for another model or text (a reader's own
    run) the prose does not apply, the differences are printed instead, and the chapter runs to the end.
    """
    verdicts = dict(zip(table.key, table.verdict, strict=True))
    statements = {}
    for key, want in expected.items():
        got = verdicts.get(key)
        sentence = f"{key} is {want!r}" if got == want else f"{key} is {want!r} (measured: {got!r})"
        statements[sentence] = got == want
    assert_sentences(statements, described=describes(res), about=f"{DESCRIBED['model']} on {DESCRIBED['text']}")
    return verdicts
