"""The reproducibility report's claims table, built from the checks and the experiments' results (one source).

Each row is a claim of the paper (Lemma 1, Corollaries 1-3, Theorems 1-2, Lemma 2, multi-head coverage, Figures
2a-4 and the guidelines): the paper's number, ours with what it was measured on (the model and text of the
experiments, or the seeded synthetic trials of a check) and the number the verdict reads, a verdict and the chapter
that shows it. Verdicts are decided here by fixed rules from the registry's verdict records
(:mod:`attnlimits.theory.checks`) and from :mod:`attnlimits.experiments.paper_claims`'s experimental verdicts; nothing
in the table is
typed in by hand except the paper's side. ``make results`` writes the introduction's copy (:func:`write_include`,
from the checks run with :data:`CHECK_TRIALS` and :data:`CHECK_SEED` and the experiments' results at
:func:`attnlimits.experiments.book_preset`); the reproducibility report builds the same table from the same inputs,
shows it, and fails when the introduction's copy (:func:`read_include`) differs from it or is missing.

Verdicts (the book's words, :mod:`attnlimits.infra.verdicts`): "reproduced", "not reproduced", "corrected" (the
paper's statement fails and the book proves a replacement), "inconclusive" (the experiments' interval over windows
does not decide), "not testable here"; "(the book's reconstruction)" marks a claim whose formula the paper does not
print in full, so what is checked is the book's reading of it. A row read from several measurements is "not reproduced"
when one of them is, else "inconclusive" when one is, else their common verdict ("not reproduced" when they differ).

The table is markdown for the book: formulas are MyST math (``$\\tilde d$``), never ASCII.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from attnlimits.experiments import paper_claims
from attnlimits.infra import cache, provenance
from attnlimits.infra.verdicts import (
    CORRECTED,
    HOLDS,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_TESTABLE,
    RECONSTRUCTION,
    REPRODUCED,
)

__all__ = [
    "CHECK_SEED",
    "CHECK_TRIALS",
    "COLLAPSE_LENGTHS",
    "COLLAPSE_ROWS",
    "CORRECTED",
    "INCLUDE",
    "INCONCLUSIVE",
    "NOT_TESTABLE",
    "ROWS",
    "VERDICTS",
    "Row",
    "bounds_table",
    "claims",
    "code_hash",
    "collapse_at_full_selection",
    "markdown",
    "read_include",
    "write_include",
]

#: The verdicts a row can get (a reconstructed claim's verdict is followed by :data:`RECONSTRUCTION`).
VERDICTS = (REPRODUCED, NOT_REPRODUCED, CORRECTED, INCONCLUSIVE, NOT_TESTABLE)


#: The introduction's claims table, written by ``make results`` and included by ``chapters/intro.md``.
INCLUDE = (provenance.book_checkout() or Path.cwd()) / "chapters" / "_generated" / "claims.md"
#: The table's inputs, the same for ``make results`` and the reproducibility report: the checks' random trials and
#: seed (:func:`attnlimits.theory.checks.run_all`); the experiments' preset is
#: :func:`attnlimits.experiments.book_preset`.
CHECK_TRIALS = 2000
CHECK_SEED = 0
#: The seeded synthetic rows of :func:`collapse_at_full_selection` (Corollary 2 (ii)): lengths and rows per length.
COLLAPSE_LENGTHS = (16, 64, 256)
COLLAPSE_ROWS = 8


@dataclass(frozen=True)
class Row:
    """One claim: what the paper says and which measurements decide it.

    ``checks``: registry ids testing the paper's statement; ``book``: ids of the book's replacement (used when
    the paper's fails); ``experiments``: :mod:`attnlimits.experiments.paper_claims` claim keys; ``synthetic``: the name
    of a
    computation of this module. ``reconstructed``: the paper does not print the formula in full. ``note``: what
    the row says when nothing decides it (the verdict is then "not testable here").
    """

    claim: str
    paper: str
    where: str
    checks: tuple[str, ...] = ()
    book: tuple[str, ...] = ()
    experiments: tuple[str, ...] = ()
    synthetic: str = ""
    reconstructed: bool = False
    note: str = "not measured by this book"


ROWS = (
    Row(
        "Lemma 1",
        r"$C_1/L \le \alpha_i \le C_2/L$, constants independent of $L$",
        "12_vanishing_attention",
        ("lem1",),
    ),
    Row(
        "Corollary 1",
        r"$\tfrac1L e^{-2\Delta/T} \le \alpha_i \le \tfrac1L e^{2\Delta/T}$",
        "12_vanishing_attention",
        ("cor1",),
    ),
    Row(
        r"Theorem 1: $d_{\max}$",
        r"$\tilde d \le d_{\max}$ for a fixed selection; valid but conservative",
        "13_distance_collapse",
        ("thm1-dmax-reconstructed",),
        reconstructed=True,
    ),
    Row(
        "Theorem 1: expectation $E$",
        r"$E$ = main term $+\ \varepsilon$ with a Jensen residual $\varepsilon \ge 0$",
        "13_distance_collapse",
        ("thm1-residual-sign",),
        reconstructed=True,
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
    ),
    Row(
        "Corollary 2 (ii)",
        r"$L$ fixed, $N \to L$: $E \to 0$ (distance collapse)",
        "13_distance_collapse",
        synthetic="collapse_at_full_selection",
    ),
    Row(
        "Theorem 2: lower bound",
        r"$1 - \frac{1}{N r} \sum_i \xi_i \le E[N_s]/N$",
        "14_geometric_separability",
        ("thm2-lower",),
        reconstructed=True,
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
    ),
    Row(
        "Lemma 2",
        r"the Jacobian of a general normaliser, large when $\min F \to 0$",
        "15_gradient_sensitivity",
        ("lem2",),
        reconstructed=True,
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
        "Figure 3: bounds",
        "lower bound conservative, upper tracks the maxima",
        "24_separability",
        experiments=("fig3-bounds",),
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
    ),
    Row(
        "Guideline: $N_s/N$",
        r"monitor $N_s/N$; it saturates near 70–80 %",
        "24_separability",
        experiments=("fig3-plateau",),
    ),
    Row(
        "Guideline: temperature",
        r"avoid $T \le 0.1$, where the model's sensitivity $g$ grows as $1/T$ (as the Jacobian's bound does)",
        "25_gradient_in_the_model",
        ("cor3-spectral",),
        experiments=("fig4-slope",),
    ),
    Row(
        "Guideline: normalisers",
        "prefer sparse, length-aware or gradient-controlled normalisers",
        "33_alternative_normalizers",
        note="advice rather than a measurement; the chapter sets the normalisers side by side under the paper's "
        "diagnostics",
    ),
)


def collapse_at_full_selection(
    lengths=COLLAPSE_LENGTHS, *, rows: int = COLLAPSE_ROWS, seed: int = 0
) -> tuple[float, str]:
    """Corollary 2 (ii) on seeded synthetic rows: the largest |E| and d~ at N = L (both must be 0), and E at
    N = L - 1 against N = 1 (it falls). Returns ``(largest value at N = L, sentence)``; the sentence is markdown."""
    from attnlimits.core import selection
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


def _combine(verdicts: list[str]) -> str:
    """One verdict from several measurements of a claim: "not reproduced" when one of them is, else "inconclusive"
    when one is, else the common verdict; measurements that differ otherwise never add up to a reproduction."""
    found = set(verdicts)
    if len(found) == 1:
        return found.pop()
    if NOT_REPRODUCED in found:
        return NOT_REPRODUCED
    if INCONCLUSIVE in found:
        return INCONCLUSIVE
    return NOT_REPRODUCED


def _check_row(row: Row, by_id: dict) -> tuple[str, str, str, str]:
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
    if all(v.violations == 0 for v in paper):
        verdict = REPRODUCED
    elif book and all(v.violations == 0 for v in book):
        verdict = NOT_REPRODUCED if row.reconstructed else CORRECTED
    else:
        verdict = NOT_REPRODUCED
    return ours, source, value, verdict


def _experiment_row(row: Row, by_key: dict, where_from: str) -> tuple[str, str, str, str]:
    missing = [k for k in row.experiments if k not in by_key]
    if len(missing) == len(row.experiments):  # results computed before the claim existed
        return "the experiments' results do not measure it (computed before the claim existed)", "", "", NOT_TESTABLE
    if missing:
        raise KeyError(
            f"experimental claims {missing} are missing from attnlimits.experiments.paper_claims.claims(results)"
        )
    found = [by_key[k] for k in row.experiments]
    values = [_with_interval(*(_float(c.get(f)) for f in ("value", "value_lo", "value_hi"))) for c in found]
    value = "; ".join(v for v in values if v)
    return "; ".join(c["measured"] for c in found), where_from, value, _combine([c["verdict"] for c in found])


def claims(verdicts, results) -> pd.DataFrame:
    """The claims table: columns ``claim, paper, source, value, ours, verdict, where`` (``where``: the chapter's file
    name; ``source``: what the verdict was measured on; ``value``: the number it reads, with its 95 % interval over
    windows where the experiments give one).

    ``verdicts``: the registry's verdict records (:func:`attnlimits.theory.checks.run_all`); ``results``: the
    experiments' :class:`attnlimits.experiments.Results` the Experiments part reads.
    """
    by_id = {v.id: v for v in verdicts}
    by_key = {c["key"]: c for c in paper_claims.claims(results).to_dict("records")}
    p = results.provenance
    where_from = (
        f"{p['model'].get('model_id')} on {p['text'].get('name')}, preset {p['preset']['name']}, "
        f"{len(p['windows'])} windows"
    )
    rows = []
    for row in ROWS:
        parts = []
        if row.checks:
            parts.append(_check_row(row, by_id))
        if row.experiments:
            parts.append(_experiment_row(row, by_key, where_from))
        if row.synthetic:
            value, sentence = globals()[row.synthetic]()
            source = f"synthetic, {COLLAPSE_ROWS} seeded rows at each of $L$ = {', '.join(map(str, COLLAPSE_LENGTHS))}"
            parts.append((sentence, source, _number(value), REPRODUCED if value <= 1e-12 else NOT_REPRODUCED))
        if not parts:
            parts.append((row.note, "", "", NOT_TESTABLE))
        ours, source, value = ("; ".join(x[i] for x in parts if x[i]) for i in range(3))
        verdict = _combine([x[3] for x in parts])
        if row.reconstructed and verdict in (REPRODUCED, NOT_REPRODUCED):
            verdict += RECONSTRUCTION
        rows.append(
            {"claim": row.claim, "paper": row.paper, "source": source, "value": value, "ours": ours,
             "verdict": verdict, "where": row.where}
        )  # fmt: skip
    return pd.DataFrame(rows)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(table: pd.DataFrame, *, columns=("claim", "paper", "source", "value", "verdict", "where")) -> str:
    """The table as MyST markdown, ``where`` as a ``{doc}`` link (relative to chapters/); the default columns are
    the introduction's."""
    names = {"claim": "Claim of the paper", "paper": "The paper", "ours": "This book measures",
             "source": "Measured on", "value": "Measured", "verdict": "Verdict", "where": "Where"}  # fmt: skip
    lines = ["| " + " | ".join(names[c] for c in columns) + " |", "|" + "---|" * len(columns)]
    for r in table.to_dict("records"):
        cells = []
        for c in columns:
            if c == "where":
                cells.append(f"{{doc}}`{r[c]}`")
            elif c == "verdict":
                cells.append(f"**{_cell(r[c])}**")
            else:
                cells.append(_cell(r[c]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


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


def bounds_table(verdicts) -> pd.DataFrame:
    """The check verdicts (:func:`attnlimits.theory.checks.run_all`) as the report's table of bounds, one row per
    bound: its trials and violations, the worst measured/bound ratio, what the book claims after proving it
    (``expected``), whether the measurement agrees ("yes" or "NO", so a disagreement stands out) and the verdict."""
    return pd.DataFrame(
        [
            {
                "bound": v.bound,
                "trials": v.trials,
                "violations": v.violations,
                "worst ratio": v.worst_ratio,
                "expected": v.expected,
                "agrees": "yes" if v.as_expected else "NO",
                "verdict": v.verdict,
            }
            for v in verdicts
        ]
    )
