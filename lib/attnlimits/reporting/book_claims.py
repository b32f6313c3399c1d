"""The reproducibility report's claims table, built from the checks and the experiments' results (one source).

Each row is a claim of the paper (Lemma 1, Corollaries 1-3, Theorems 1-2, Lemma 2, multi-head coverage, Figures
2a-4 and the guidelines): the paper's number, ours with what it was measured on (the model and text of the
experiments, or the seeded synthetic trials of a check) and the number the verdict reads, its kind, a verdict and
the chapter that shows it.

A row's kind (:data:`attnlimits.infra.verdicts.CLAIM_KINDS`) is "reproduction" when a measurement could refute it,
or "sanity check" when it holds by proof or by construction: a bound the book proves (Lemma 1, Corollary 1, the
book's reconstructions of Theorem 1 and of Theorem 2's lower bound, multi-head coverage), a statement true by
definition (Corollary 2 (ii): nothing is left at N = L) or a proved bound applied to the model (Figures 2a and 3).
A sanity check's verdict is "holds" or "violated" and it is never counted among the reproductions
(:func:`counts`); an experiment's kind is the one :mod:`attnlimits.experiments.paper_claims` gives it, where it
gives one. Verdicts are decided here by fixed rules from the registry's verdict records
(:mod:`attnlimits.theory.checks`) and from :mod:`attnlimits.experiments.paper_claims`'s experimental verdicts; nothing
in the table is
typed in by hand except the paper's side. ``make results`` writes the introduction's copy (:func:`write_include`,
from the checks run with :data:`CHECK_TRIALS` and :data:`CHECK_SEED` and the experiments' results at
:func:`attnlimits.experiments.book_preset`); the reproducibility report builds the same table from the same inputs,
shows it, and fails when the introduction's copy (:func:`read_include`) differs from it or is missing.

Verdicts (the book's words, :mod:`attnlimits.infra.verdicts`): "reproduced", "not reproduced", "corrected" (the
paper's statement fails and the book proves a replacement), "inconclusive" (the experiments' interval over windows
does not decide), "hinges on one passage" (leaving out one window changes it), "depends on the reading" (the rule
gives different verdicts under the readings of a formula the paper does not print, Eq. (10)), "depends on the
model" (the experiments on another trained model, chapter 34's, reproduce a claim that the book's model refutes,
or the other way round), "not testable here"; a sanity check's "holds" or "violated"; "(the book's
reconstruction)" marks a claim whose formula the paper does not print in full, so what is checked is the book's
reading of it. A row read from several measurements is "not reproduced" ("violated") when one of them is, else
"inconclusive" when one is, else "depends on the reading" when one does, else their common verdict ("not reproduced"
when they differ: :func:`attnlimits.infra.verdicts.combine`).

The table is markdown for the book: formulas are MyST math (``$\\tilde d$``), never ASCII. The introduction's copy
(:func:`markdown` with its default columns) puts the verdict second, says once above the table what the experiments
ran on and how many claims were tested, and carries the class :data:`TABLE_CLASS` that ``_static/claims.css``
styles so that long cells wrap inside the page.

One concept, one module (over 600 lines): the claims table, one short rule per row of the paper's claims,
read side by side.
"""

from __future__ import annotations

import json
import math
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from attnlimits.core import selection
from attnlimits.experiments import paper_claims
from attnlimits.infra import cache, provenance
from attnlimits.infra.verdicts import (
    CORRECTED,
    DEPENDS_ON_MODEL,
    DEPENDS_ON_READING,
    HINGES,
    HOLDS,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_TESTABLE,
    RECONSTRUCTION,
    REPRODUCED,
    REPRODUCTION,
    SANITY_CHECK,
    VIOLATED,
    across_models,
    combine,
)

__all__ = [
    "CHECK_SEED",
    "CHECK_TRIALS",
    "COLLAPSE_LENGTHS",
    "COLLAPSE_ROWS",
    "CORRECTED",
    "DEPENDS_ON_READING",
    "INCLUDE",
    "INCONCLUSIVE",
    "INTRO_COLUMNS",
    "NOT_TESTABLE",
    "REPEATS",
    "REPRODUCTION",
    "ROWS",
    "SANITY_CHECK",
    "TABLE_CLASS",
    "VERDICTS",
    "Chapter34",
    "Row",
    "check_verdicts",
    "claims",
    "code_hash",
    "collapse_at_full_selection",
    "counts",
    "markdown",
    "chapter34",
    "read_include",
    "training_guidelines",
    "write_include",
]

#: The verdicts a row can get (a reconstructed claim's verdict is followed by :data:`RECONSTRUCTION`): a
#: reproduction's, then a sanity check's "holds" and "violated".
VERDICTS = (
    REPRODUCED,
    NOT_REPRODUCED,
    CORRECTED,
    INCONCLUSIVE,
    HINGES,
    DEPENDS_ON_READING,
    DEPENDS_ON_MODEL,
    NOT_TESTABLE,
    HOLDS,
    VIOLATED,
)
#: A sanity check's verdict for the verdict a rule of the experiments gives it (until they speak its words).
_SANITY_WORDS = {REPRODUCED: HOLDS, NOT_REPRODUCED: VIOLATED}
#: The introduction's columns: the verdict second, so that a reader sees it first; ``measured`` is the number the
#: verdict reads after what it was measured on in a word (``on``: "model" or "synthetic").
INTRO_COLUMNS = ("claim", "verdict", "paper", "measured", "where")
#: The class of the introduction's table (``_static/claims.css`` lets its long cells wrap inside the page).
TABLE_CLASS = "claims-table"


#: The introduction's claims table, written by ``make results`` and included by ``chapters/intro.md``.
INCLUDE = (provenance.book_checkout() or Path.cwd()) / "chapters" / "_generated" / "claims.md"
#: The table's inputs, the same for ``make results`` and the reproducibility report: the checks' random trials and
#: seed (:func:`attnlimits.theory.checks.run_all`); the experiments' preset is
#: :func:`attnlimits.experiments.book_preset`.
CHECK_TRIALS = 2000
CHECK_SEED = 0
#: The module whose code (with every module it imports) keys the checks' stored verdicts.
_CHECKS_MODULE = "attnlimits.theory.checks"
#: The seeded synthetic rows of :func:`collapse_at_full_selection` (Corollary 2 (ii)): lengths and rows per length.
COLLAPSE_LENGTHS = (16, 64, 256)
COLLAPSE_ROWS = 8


@dataclass(frozen=True)
class Row:
    """One claim: what the paper says and which measurements decide it.

    ``checks``: registry ids testing the paper's statement; ``book``: ids of the book's replacement (used when
    the paper's fails, or shown beside a "not testable here" when no check tests the paper's statement);
    ``experiments``: :mod:`attnlimits.experiments.paper_claims` claim keys; ``synthetic``: the name of a computation
    of this module. ``reconstructed``: the paper does not print the formula in full. ``kind``: "reproduction" or
    "sanity check" (a statement true by proof or construction; the experiments' own kind wins where they give one).
    ``note``: what the row says when nothing decides it (the verdict is then "not testable here"). ``repeats``: the
    claim of the row whose measurements this row reads again (a corollary or guideline restating a figure): shown
    with its verdict, never counted a second time (:func:`counts`). ``training``: the rule of chapter 32's training
    sweep that tests the claim (a ``rule`` of :func:`attnlimits.studies.training.report.guideline_verdicts`).
    """

    claim: str
    paper: str
    where: str
    checks: tuple[str, ...] = ()
    book: tuple[str, ...] = ()
    experiments: tuple[str, ...] = ()
    synthetic: str = ""
    reconstructed: bool = False
    kind: str = REPRODUCTION
    note: str = "not measured by this book"
    repeats: str = ""
    training: str = ""


ROWS = (
    Row(
        "Lemma 1",
        r"$C_1/L \le \alpha_i \le C_2/L$, constants independent of $L$",
        "12_vanishing_attention",
        ("lem1",),
        kind=SANITY_CHECK,
    ),
    Row(
        "Corollary 1",
        r"$\tfrac1L e^{-2\Delta/T} \le \alpha_i \le \tfrac1L e^{2\Delta/T}$",
        "12_vanishing_attention",
        ("cor1",),
        kind=SANITY_CHECK,
    ),
    Row(
        r"Theorem 1: $d_{\max}$",
        r"$\tilde d \le d_{\max}$ for a fixed selection; valid but conservative",
        "13_distance_collapse",
        ("thm1-dmax-reconstructed",),
        reconstructed=True,
        kind=SANITY_CHECK,
    ),
    Row(
        "Theorem 1: expectation $E$",
        r"$E$ = main term $+\ \varepsilon$ with a Jensen residual $\varepsilon \ge 0$",
        "13_distance_collapse",
        ("thm1-residual-sign",),
        reconstructed=True,
        kind=SANITY_CHECK,
    ),
    Row(
        "Corollary 2 (i): $E$",
        r"$N$ fixed: the expected distance $E_{I_N}[\tilde d]$ grows about linearly in $L$",
        "13_distance_collapse",
        ("cor2-expectation-linear",),
        ("cor2-expectation-bounded",),
    ),
    Row(
        r"Corollary 2 (i): $\tilde d$",
        r"$N$ fixed: the distance $\tilde d$ of the top-$N$ selection grows about linearly in $L$",
        "22_distance_vs_length",
        experiments=("fig2a-distance-linear",),
        repeats=r"Figure 2a: $\tilde d$",
    ),
    Row(
        "Corollary 2 (ii)",
        r"$L$ fixed, $N \to L$: $E \to 0$ (distance collapse)",
        "13_distance_collapse",
        synthetic="collapse_at_full_selection",
        kind=SANITY_CHECK,
    ),
    Row(
        "Theorem 2: lower bound",
        r"$1 - \frac{1}{N r} \sum_i \xi_i \le E[N_s]/N$",
        "14_geometric_separability",
        ("thm2-lower",),
        reconstructed=True,
        kind=SANITY_CHECK,
    ),
    Row(
        "Theorem 2: upper bound",
        r"$E[N_s]/N \le \frac1N \sum_i \exp(-(\xi_i - r)_+^2 / (2 M^2))$",
        "14_geometric_separability",
        ("thm2-upper-reconstructed",),
        ("thm2-upper",),
        reconstructed=True,
    ),
    Row(
        "Multi-head coverage",
        r"$1 - (1 - p)^H$; $p = 0.8$ needs $H = 3$ for 99 %",
        "14_geometric_separability",
        ("multihead",),
        kind=SANITY_CHECK,
    ),
    Row(
        "Lemma 2",
        r"the Jacobian of a general normaliser, large when $\min F \to 0$",
        "15_gradient_sensitivity",
        book=("lem2",),
        note=r"no check tests the paper's bound (its exact form is not available, and its growth as $\min F \to 0$ "
        "is never measured); the book proves a bound of its own instead, which says nothing about the paper's",
    ),
    Row(
        "Corollary 3",
        r"$\lVert \nabla_l \alpha \rVert_2 \le \min\{1/(4T), \sqrt 2\}$",
        "15_gradient_sensitivity",
        ("cor3-printed",),
        ("cor3-spectral", "cor3-entry"),
    ),
    Row(
        r"Figure 2a: $\tilde d$",
        r"at $N = 5$, $\tilde d$ grows about linearly in $L$",
        "22_distance_vs_length",
        experiments=("fig2a-distance-linear",),
    ),
    Row(
        "Figure 2a: $E$",
        r"at $N = 5$, $E$ grows about linearly in $L$",
        "22_distance_vs_length",
        experiments=("fig2a-expectation-linear",),
    ),
    Row(
        r"Figure 2a: $d_{\max}$",
        "the bound is valid and conservative",
        "22_distance_vs_length",
        experiments=("fig2a-bound",),
        kind=SANITY_CHECK,
    ),
    Row(
        "Figure 2b: plateau",
        r"at $L = 1024$, $\tilde d$ plateaus beyond $N = 20$",
        "22_distance_vs_length",
        experiments=("fig2b-plateau",),
    ),
    Row(
        "Figure 2b: convergence",
        r"$\tilde d$ and $E$ converge as $N \to 100$",
        "22_distance_vs_length",
        experiments=("fig2b-convergence",),
    ),
    Row(
        "Figure 2c",
        r"critical $N \approx 0.06\,L$ (fewer than 6 % of the tokens)",
        "23_critical_n",
        experiments=("fig2c-critical",),
    ),
    Row(
        "Figure 2c: proportional",
        r"the critical $N$ grows in proportion to $L$",
        "23_critical_n",
        experiments=("fig2c-proportional",),
    ),
    Row(
        "Figure 3: plateau",
        r"$N_s/N$ falls until $N = 16$, then 0.70–0.85",
        "24_separability",
        experiments=("fig3-plateau",),
    ),
    Row(
        "Figure 3: lower bound",
        "the lower bound is conservative",
        "24_separability",
        experiments=("fig3-lower-bound",),
        reconstructed=True,
        kind=SANITY_CHECK,
    ),
    Row(
        "Figure 3: upper bound",
        "the upper bound tracks the maxima",
        "24_separability",
        experiments=("fig3-upper-tracks",),
        reconstructed=True,
    ),
    Row(
        "Figure 4: $1/T$",
        r"$g$ follows $1/T$ for $T < 0.1$",
        "25_gradient_in_the_model",
        experiments=("fig4-slope",),
    ),
    Row(
        "Figure 4: drop",
        r"$g$ drops about 100× once $T \ge 1$",
        "25_gradient_in_the_model",
        experiments=("fig4-drop",),
    ),
    Row(
        "Figure 4: curve",
        r"$g$ under $\min\{1/(4T), \sqrt 2\}$",
        "25_gradient_in_the_model",
        experiments=("fig4-printed-bound",),
    ),
    Row(
        "Guideline: active set",
        r"keep the active set below about 6 % of the tokens ($N \lesssim 0.06\,L$)",
        "23_critical_n",
        experiments=("fig2c-critical",),
        repeats="Figure 2c",
    ),
    Row(
        "Guideline: $N_s/N$",
        r"monitor $N_s/N$ (a lower $N_s/N$ warns of a selection that fails); it saturates near 70–80 %",
        "32_training_low_temperature",
        training="a lower N_s/N comes with a higher error",
        note="chapter 32's training sweep was not read",
    ),
    Row(
        "Guideline: temperature",
        r"avoid $T \le 0.1$, where the model's sensitivity $g$ grows as $1/T$ (as the Jacobian's bound does)",
        "25_gradient_in_the_model",
        ("cor3-spectral",),
        experiments=("fig4-slope",),
        repeats="Figure 4: $1/T$",
    ),
    Row(
        "Guideline: normalisers",
        "prefer sparse, length-aware or gradient-controlled normalisers",
        "33_alternative_normalizers",
        note="advice rather than a measurement; the chapter sets the normalisers side by side under the paper's "
        "diagnostics",
    ),
)


def check_verdicts(trials: int = CHECK_TRIALS, seed: int = CHECK_SEED) -> list:
    """Every check's verdict (:func:`attnlimits.theory.checks.run_all` with ``trials`` and ``seed``), kept in the
    results cache (``<results>/theory-checks/trials<trials>-seed<seed>``, keyed by the checks' code): the claims
    table of ``make results`` and the reproducibility report read one run of the checks instead of running them
    each time (20 s on 2 cores)."""
    from attnlimits.theory import checks

    folder = provenance.results_root() / "theory-checks" / f"trials{trials}-seed{seed}"

    def save(verdicts, path: Path) -> None:
        (path / "verdicts.pkl").write_bytes(pickle.dumps(verdicts))

    def load(path: Path):
        return pickle.loads((path / "verdicts.pkl").read_bytes())

    key = cache.study_key(_CHECKS_MODULE, trials=trials, seed=seed)
    return cache.cached(folder, key, lambda: checks.run_all(trials=trials, seed=seed), save, load)


def collapse_at_full_selection(
    lengths=COLLAPSE_LENGTHS, *, rows: int = COLLAPSE_ROWS, seed: int = 0
) -> tuple[float, str]:
    """Corollary 2 (ii) on seeded synthetic rows: the largest |E| and d~ at N = L (both must be 0), and E at
    N = L - 1 against N = 1 (it falls). Returns ``(largest value at N = L, sentence)``; the sentence is markdown."""
    from attnlimits.theory import synthetic

    worst, falls = 0.0, True
    for L in lengths:
        alpha, x = synthetic.attention_rows(L, 8, rows, seed=seed + L)
        at_full = selection.random_selection_expectation(alpha, x, L).abs().max().item()
        d_full = selection.cumulative_distance(alpha, x, L).abs().max().item()
        worst = max(worst, at_full, d_full)
        e1 = selection.random_selection_expectation(alpha, x, 1).mean().item()
        e_last = selection.random_selection_expectation(alpha, x, L - 1).mean().item()
        falls &= e_last < e1
    text = (
        rf"$\lvert E \rvert$ and $\tilde d$ at $N = L$ are at most {_number(worst)} ($L$ = "
        f"{', '.join(map(str, lengths))}; {rows} seeded rows each); $E$ at $N = L - 1$ is "
        f"{'below' if falls else 'NOT below'} $E$ at $N = 1$"
    )
    return (worst if falls else float("inf")), text


def _number(v: float) -> str:
    """A measured number for the table: three significant digits, thousands grouped."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def _float(v) -> float:
    """A claim's number, NaN where it gives none (``None``, or results from before claims carried numbers)."""
    return math.nan if v is None else float(v)


def _with_interval(value: float, lo: float, hi: float) -> str:
    """``value [lo, hi]`` (the interval when the experiments give one), "" when there is no value."""
    if not math.isfinite(value):
        return ""
    if math.isfinite(lo) and math.isfinite(hi):
        return f"{_number(value)} [{_number(lo)}, {_number(hi)}]"
    return _number(value)


def _held(ok: bool, kind: str) -> str:
    """A rule's outcome in the words of the row's kind: reproduced / not reproduced, or holds / violated."""
    if kind == SANITY_CHECK:
        return HOLDS if ok else VIOLATED
    return REPRODUCED if ok else NOT_REPRODUCED


def _check_row(row: Row, by_id: dict, kind: str) -> tuple[str, str, str, str]:
    missing = [i for i in (*row.checks, *row.book) if i not in by_id]
    if missing:
        raise KeyError(f"checks {missing} were not run: pass every registered check's verdict")
    paper = [by_id[i] for i in row.checks]
    book = [by_id[i] for i in row.book]
    ours = "; ".join(
        f"`{v.id}` {v.statement}: "
        + (HOLDS if v.violations == 0 else f"fails in {v.violations:,} of {v.trials:,} trials")
        + f" (worst ratio {_number(v.worst_ratio)})"
        for v in paper + book
    )
    trials = sum(v.trials for v in paper + book)
    source = f"synthetic, {trials:,} seeded trials and adversarial cases"
    ratios = ", ".join(_number(v.worst_ratio) for v in paper + book)
    value = f"worst ratio{'s' if len(paper + book) > 1 else ''} {ratios}"
    if not paper:  # only the book's own statement is checked: it decides nothing about the paper's
        return f"{row.note}; the book's: {ours}", source, "", NOT_TESTABLE
    if kind == SANITY_CHECK or all(v.violations == 0 for v in paper):
        verdict = _held(all(v.violations == 0 for v in paper), kind)
    elif book and all(v.violations == 0 for v in book):
        verdict = NOT_REPRODUCED if row.reconstructed else CORRECTED
    else:
        verdict = NOT_REPRODUCED
    return ours, source, value, verdict


def _experiment_row(row: Row, by_model: dict, where: dict, kind: str) -> tuple[str, str, str, str]:
    """A row's experimental side: each model's measurement, number and verdict (:func:`_one_model`); measured on
    several trained models, each model named, and one verdict across them
    (:func:`attnlimits.infra.verdicts.across_models`: "depends on the model" where one reproduces the claim and
    another does not)."""
    found = {label: _one_model(row, by_key, kind) for label, by_key in by_model.items()}
    found = {label: f for label, f in found.items() if f is not None}
    if not found:  # results computed before the claim existed
        return "the experiments' results do not measure it (computed before the claim existed)", "", "", NOT_TESTABLE
    if len(found) == 1:
        label, (ours, value, verdict) = next(iter(found.items()))
        return ours, where[label], value, verdict
    ours = " ".join(f"*{label}:* {o}" for label, (o, _, _) in found.items())
    value = "; ".join(f"{label}: {v} ({verdict})" for label, (_, v, verdict) in found.items())
    source = "; ".join(where[label] for label in found)
    return ours, source, value, across_models(v for _, _, v in found.values())


def _one_model(row: Row, by_key: dict, kind: str) -> tuple[str, str, str] | None:
    """One model's measurements of a row's experimental claims: what was measured, the numbers (each with its
    interval and its range with one window left out) and one verdict; None when the run does not measure them."""
    missing = [k for k in row.experiments if k not in by_key]
    if len(missing) == len(row.experiments):
        return None
    if missing:
        raise KeyError(
            f"experimental claims {missing} are missing from attnlimits.experiments.paper_claims.claims(results)"
        )
    found = [by_key[k] for k in row.experiments]
    values = [_with_interval(*(_float(c.get(f)) for f in ("value", "value_lo", "value_hi"))) for c in found]
    values = [v + _left_out(c) for v, c in zip(values, found, strict=True)]
    verdicts = [c["verdict"] for c in found]
    if kind == SANITY_CHECK:
        verdicts = [_SANITY_WORDS.get(v, v) for v in verdicts]
    return "; ".join(c["measured"] for c in found), "; ".join(v for v in values if v), combine(verdicts)


def _training_row(row: Row, guidelines: pd.DataFrame) -> tuple[str, str, str, str]:
    """A row read from chapter 32's test of a guideline on its training sweep (over every normaliser's runs)."""
    g = guidelines[(guidelines["rule"] == row.training) & (guidelines["normalizer"] == "all")].iloc[0]
    ours = f"chapter 32's training sweep: {row.training}, Spearman's correlation of N_s/N with the error"
    source = f"training sweep, {int(g.seeds)} seeds"
    return ours, source, _with_interval(g.value, g.lo, g.hi), g.verdict


def training_guidelines(preset: str | None = None) -> pd.DataFrame:
    """Chapter 32's tests of the paper's guidelines (:func:`attnlimits.studies.training.report.guideline_verdicts`)
    on its training sweep at ``preset`` (the book's, :func:`attnlimits.studies.book_preset`, by default), read from
    the shipped results."""
    from attnlimits import studies
    from attnlimits.studies import training

    studies.restore()
    final = training.results(training.get_preset(preset or studies.book_preset())).final
    return training.report.guideline_verdicts(training.report.fraction_runs(final))


def _left_out(claim: dict) -> str:
    """What leaving out one window does to a claim (:func:`attnlimits.experiments.paper_claims.decided`): the range
    of its number, and the verdict without each window that changes it; "" for a claim without a number."""
    lo, hi = _float(claim.get("loo_lo")), _float(claim.get("loo_hi"))
    if math.isnan(_float(claim.get("value"))) or math.isnan(lo) or math.isnan(hi):
        return ""
    hinges = f"; without {claim['hinges_on']}" if claim.get("hinges_on") else ""
    return f" (one window left out: {_number(lo)} to {_number(hi)}{hinges})"


def _kind(row: Row, by_key: dict) -> str:
    """The row's kind: the one the experiments give all of its claims (where they give one), else the row's."""
    given = {by_key[k].get("kind") for k in row.experiments if k in by_key}
    given = {k for k in given if isinstance(k, str) and k}
    if row.experiments and len(given) == 1:
        return given.pop()
    return row.kind


def claims(verdicts, results, others=None, guidelines=None, controls=None) -> pd.DataFrame:
    """The claims table: columns ``claim, kind, paper, source, on, run, value, ours, verdict, where`` (``where``:
    the chapter's file name; ``kind``: "reproduction" or "sanity check"; ``source``: what the verdict was measured
    on; ``on``: the same in a word ("synthetic", "model" or both); ``run``: the experiments' model, text, preset and
    windows where the row reads them, else ""; ``value``: the number it reads, with its 95 % interval over windows
    where the experiments give one).

    ``verdicts``: the registry's verdict records (:func:`attnlimits.theory.checks.run_all`); ``results``: the
    experiments' :class:`attnlimits.experiments.Results` the Experiments part reads; ``others``: the same experiments
    on other trained models, ``{label: Summaries}`` (:func:`chapter34`). A row measured on several
    models reads each model's verdict, and "depends on the model" where one reproduces the claim and another does
    not. ``guidelines``: chapter 32's tests of the paper's guidelines on its training sweep
    (:func:`training_guidelines`), which the rows with a ``training`` rule read. ``controls``: each model's untrained
    control (``{label: Summaries}``, :func:`chapter34`): a reading of the expectation whose rule the control passes
    too cannot tell, and is left out of that model's verdict
    (:func:`attnlimits.experiments.paper_claims.untrained_passes`).
    """
    by_id = {v.id: v for v in verdicts}
    runs = {_label(results): results, **(others or {})}
    controls = controls or {}
    blind = {label: paper_claims.untrained_passes([controls[label]]) if label in controls else frozenset()
             for label in runs}  # fmt: skip
    by_model = {
        label: {c["key"]: c for c in paper_claims.decided(r, cannot_tell=blind[label]).to_dict("records")}
        for label, r in runs.items()
    }
    where = {label: _where_from(r) for label, r in runs.items()}
    by_key = by_model[_label(results)]
    where_from = "; ".join(where.values())
    rows = []
    for row in ROWS:
        kind = _kind(row, by_key)
        parts, on = [], []
        if row.checks or row.book:
            parts.append(_check_row(row, by_id, kind))
            on.append("synthetic")
        if row.experiments:
            parts.append(_experiment_row(row, by_model, where, kind))
            on.append("model" if parts[-1][1] else "")
        if row.training and guidelines is not None:
            parts.append(_training_row(row, guidelines))
            on.append("training")
        if row.synthetic:
            value, sentence = globals()[row.synthetic]()
            source = f"synthetic, {COLLAPSE_ROWS} seeded rows at each of $L$ = {', '.join(map(str, COLLAPSE_LENGTHS))}"
            parts.append((sentence, source, _number(value), _held(value <= 1e-12, kind)))
            on.append("synthetic")
        if not parts:
            parts.append((row.note, "", "", NOT_TESTABLE))
        ours, source, value = ("; ".join(x[i] for x in parts if x[i]) for i in range(3))
        verdict = combine([x[3] for x in parts])
        if row.reconstructed and verdict in (REPRODUCED, NOT_REPRODUCED, HOLDS, VIOLATED):
            verdict += RECONSTRUCTION
        rows.append(
            {"claim": row.claim, "kind": kind, "paper": row.paper, "source": source,
             "on": ", ".join(dict.fromkeys(o for o in on if o)), "run": where_from if "model" in on else "",
             "value": value, "ours": ours, "verdict": verdict, "where": row.where, "repeats": row.repeats}
        )  # fmt: skip
    return pd.DataFrame(rows)


def _label(res) -> str:
    """A run's model as the table names it (its id without the organisation)."""
    return res.provenance["model"].get("model_id", "model").split("/")[-1]


def _where_from(res) -> str:
    """What a run measured on: its model, text, preset and windows."""
    p = res.provenance
    return (
        f"{p['model'].get('model_id')} on {p['text'].get('name')}, preset {p['preset']['name']}, "
        f"{len(p['windows'])} windows"
    )


class Chapter34(NamedTuple):
    """What the claims table reads of chapter 34's shipped run (:func:`chapter34`): ``others``, the Experiments on
    its other trained models (``{label: Summaries}``), and ``controls``, each model's untrained control by the label
    the table gives the model (the experiments' own model included)."""

    others: dict
    controls: dict


def chapter34(results) -> Chapter34:
    """Chapter 34's shipped run (read without loading a model), as the claims table reads it beside the
    experiments' run ``results``: its trained models other than ``results``' own, and each model's untrained
    control."""
    from attnlimits.studies import several_models

    run = several_models.results()
    own = results.provenance["model"].get("model_id")
    present = [e for e in run.manifest["models"] if e.get("present")]
    trained = {e["model"]: e for e in present if e.get("control") is None}
    others = {e["label"]: run.results[e["label"]] for e in trained.values() if e.get("model_id") != own}
    controls = {}
    for e in present:
        if e.get("control") == "untrained" and e["model"] in trained:
            mine = trained[e["model"]].get("model_id") == own
            controls[_label(results) if mine else e["model"]] = run.results[e["label"]]
    return Chapter34(others, controls)


#: :func:`counts`' group of the rows that read again a measurement counted in another row.
REPEATS = "repeats"


def counts(table: pd.DataFrame) -> dict[str, dict[str, int]]:
    """How many rows of each verdict, apart for the reproductions (claims a measurement could refute), the sanity
    checks (never counted as reproductions), the claims nothing here tests and the rows that read again another
    row's measurement (``repeats``: a corollary or guideline restating a figure; each measurement is counted once):
    ``{"reproduction": {verdict: n}, "sanity check": {verdict: n}, "not testable here": {verdict: n}, "repeats":
    {verdict: n}}``, verdicts without the reconstruction mark, in the order of :data:`VERDICTS`."""
    out: dict[str, dict[str, int]] = {REPRODUCTION: {}, SANITY_CHECK: {}, NOT_TESTABLE: {}, REPEATS: {}}
    for r in table.to_dict("records"):
        verdict = r["verdict"].removesuffix(RECONSTRUCTION)
        group = (
            NOT_TESTABLE if verdict == NOT_TESTABLE else REPEATS if r.get("repeats") else r.get("kind", REPRODUCTION)
        )
        out[group][verdict] = out[group].get(verdict, 0) + 1
    order = {v: i for i, v in enumerate(VERDICTS)}
    return {g: dict(sorted(c.items(), key=lambda kv: order.get(kv[0], len(order)))) for g, c in out.items()}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _lead(table: pd.DataFrame, columns) -> str:
    """The lines above the table: how many claims were tested and with which verdicts, and (when the table has no
    ``source`` column) once, what the experiments and the checks ran on."""
    c = counts(table)
    tested = ", ".join(f"*{v}* {n}" for v, n in c[REPRODUCTION].items())
    sanity = ", ".join(f"*{v}* {n}" for v, n in c[SANITY_CHECK].items())
    lines = [
        f"**{_plural(sum(c[REPRODUCTION].values()), 'claim')} tested** (a measurement could refute each): {tested}. "
        f"**{_plural(sum(c[SANITY_CHECK].values()), 'sanity check')}**, not counted among them (proved bounds and "
        f"statements true by construction): {sanity or 'none'}. "
        f"**{sum(c[NOT_TESTABLE].values())} not testable here.** "
        f"{_plural(sum(c[REPEATS].values()), 'row')} read again a measurement counted above (a corollary or "
        "guideline restating a figure), and are not counted again."
    ]
    if "source" not in columns:
        runs = [r for r in dict.fromkeys(table.get("run", pd.Series(dtype=str))) if r]
        lines.append(
            "Measured on — *model:* the Experiments part's runs on "
            + ("; ".join(runs) or "no model")
            + "; *synthetic:* the Theory part's seeded random trials and adversarial searches (the "
            "{doc}`reproducibility report <31_reproducibility_report>` gives their counts)."
        )
    return "\n\n".join(lines)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _verdict_cell(verdict: str, kind: str, repeats: str = "") -> str:
    """The verdict in bold, then what kind of row it is, whether it reads the book's reconstruction and which row's
    measurement it reads again."""
    base = verdict.removesuffix(RECONSTRUCTION)
    notes = [SANITY_CHECK] * (kind == SANITY_CHECK) + ["the book's reconstruction"] * (base != verdict)
    notes += [f"the measurement of {repeats}, not counted again"] * bool(repeats)
    return f"**{_cell(base)}**" + (f" ({', '.join(notes)})" if notes else "")


def markdown(table: pd.DataFrame, *, columns=INTRO_COLUMNS) -> str:
    """The table as MyST markdown: the lines of :func:`_lead`, then the table, ``where`` as a ``{doc}`` link named by
    the chapter's number (relative to chapters/), ``measured`` as ``value`` after ``on`` ("*model:* 1.04 [1.03,
    1.05]"). The default columns are the introduction's, whose table sits in a ``{table}`` directive with the class
    :data:`TABLE_CLASS` (the book's stylesheet wraps its cells); other columns give a plain markdown table, which a
    notebook shows as a table too."""
    names = {"claim": "Claim of the paper", "kind": "Kind", "paper": "The paper", "ours": "This book measures",
             "source": "Measured on", "on": "On", "run": "Run", "value": "Measured", "measured": "Measured",
             "verdict": "Verdict", "where": "Chapter"}  # fmt: skip
    lines = ["| " + " | ".join(names[c] for c in columns) + " |", "|" + "---|" * len(columns)]
    for r in table.to_dict("records"):
        cells = []
        for c in columns:
            if c == "where":
                cells.append(f"{{doc}}`{r[c].split('_')[0]} <{r[c]}>`")
            elif c == "verdict":
                cells.append(_verdict_cell(r[c], r.get("kind", REPRODUCTION), r.get("repeats", "")))
            elif c == "measured":
                cells.append(f"*{r['on']}:* {_cell(r['value'])}" if r["value"] and r["on"] else _cell(r["value"]))
            else:
                cells.append(_cell(r[c]))
        lines.append("| " + " | ".join(cells) + " |")
    body = "\n".join(lines) + "\n"
    if tuple(columns) == INTRO_COLUMNS:
        body = f"````{{table}}\n:class: {TABLE_CLASS}\n\n{body}````\n"
    return f"{_lead(table, columns)}\n\n{body}"


def code_hash() -> str:
    """SHA-256 of the code that builds the table: this module and every module it imports
    (:func:`attnlimits.infra.cache.code_hash`)."""
    return cache.code_hash(__name__)


def write_include(table: pd.DataFrame, path=None) -> Path:
    """Write the introduction's claims table (:func:`markdown`) to ``path`` (default :data:`INCLUDE`) and a JSON
    copy of the table beside it (with the code hash), creating folders as needed."""
    path = Path(INCLUDE if path is None else path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown(table))
    record = {"code_sha256": code_hash(), "table": table.to_dict("records")}
    path.with_suffix(".json").write_text(json.dumps(record, indent=1))
    return path


def read_include(path=None) -> str:
    """The claims table that ``make results`` wrote for the introduction (``path``, default :data:`INCLUDE`);
    ``FileNotFoundError`` naming the command when it is not there."""
    path = Path(INCLUDE if path is None else path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist: the introduction includes it; `make results` writes it (the book's build runs "
            "`make results` first)"
        )
    return path.read_text()
