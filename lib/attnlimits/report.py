"""The reproducibility report's claims table, built from the checks and the experiments' results (one source).

Each row is a claim of the paper (Lemma 1, Corollaries 1-3, Theorems 1-2, Lemma 2, multi-head coverage, Figures
2a-4 and the guidelines): the paper's number, ours with where it came from, a verdict and the chapter that shows
it. Verdicts are decided here by fixed rules from the registry's verdict records (:mod:`attnlimits.checks`) and
from :mod:`attnlimits.reproduction`'s experimental verdicts; nothing in the table is typed in by hand except the
paper's side. ``make results`` writes the introduction's copy (:func:`write_include`, from the checks run with
:data:`CHECK_TRIALS` and :data:`CHECK_SEED` and the experiments' results at
:func:`attnlimits.experiments.book_preset`); the
reproducibility report builds the same table from the same inputs, shows it, and fails when the introduction's copy
(:func:`read_include`) differs from it or is missing.

Verdicts: "reproduced", "reproduced with a different constant", "not reproduced", "corrected" (the paper's
statement fails and the book proves a replacement), "not testable here"; "(the book's reconstruction)" marks a
claim whose formula the paper does not print in full, so what is checked is the book's reading of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from attnlimits import cache, provenance, reproduction

__all__ = [
    "CHECK_SEED",
    "CHECK_TRIALS",
    "CORRECTED",
    "INCLUDE",
    "NOT_TESTABLE",
    "ROWS",
    "VERDICTS",
    "Row",
    "claims",
    "code_hash",
    "collapse_at_full_selection",
    "markdown",
    "read_include",
    "write_include",
]

REPRODUCED = reproduction.REPRODUCED
DIFFERENT = reproduction.DIFFERENT
NOT = reproduction.NOT
CORRECTED = "corrected"
NOT_TESTABLE = "not testable here"
#: The verdicts a row can get (a reconstructed claim's verdict is followed by "(the book's reconstruction)").
VERDICTS = (REPRODUCED, DIFFERENT, NOT, CORRECTED, NOT_TESTABLE)
RECONSTRUCTION = " (the book's reconstruction)"


#: The introduction's claims table, written by ``make results`` and included by ``chapters/intro.md``.
INCLUDE = (provenance.book_checkout() or Path.cwd()) / "chapters" / "_generated" / "claims.md"
#: The table's inputs, the same for ``make results`` and the reproducibility report: the checks' random trials and
#: seed (:func:`attnlimits.checks.run_all`); the experiments' preset is :func:`attnlimits.experiments.book_preset`.
CHECK_TRIALS = 2000
CHECK_SEED = 0


@dataclass(frozen=True)
class Row:
    """One claim: what the paper says and which measurements decide it.

    ``checks``: registry ids testing the paper's statement; ``book``: ids of the book's replacement (used when
    the paper's fails); ``experiments``: :mod:`attnlimits.reproduction` claim keys; ``synthetic``: the name of a
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
    Row("Lemma 1", "C1/L <= alpha_i <= C2/L, constants independent of L", "12_vanishing_attention", ("lem1",)),
    Row("Corollary 1", "(1/L) e^(-2 Delta/T) <= alpha_i <= (1/L) e^(2 Delta/T)", "12_vanishing_attention", ("cor1",)),
    Row(
        "Theorem 1: d_max",
        "d~ <= d_max for a fixed selection; valid but conservative",
        "13_distance_collapse",
        ("thm1-dmax-reconstructed",),
        reconstructed=True,
    ),
    Row(
        "Theorem 1: expectation E",
        "E = main term + eps with a Jensen residual eps >= 0",
        "13_distance_collapse",
        ("thm1-residual-sign",),
        reconstructed=True,
    ),
    Row(
        "Corollary 2 (i)",
        "N fixed: the distance grows about linearly in L",
        "22_distance_vs_length",
        experiments=("fig2a-distance-linear",),
    ),
    Row(
        "Corollary 2 (ii)",
        "L fixed, N -> L: E -> 0 (distance collapse)",
        "13_distance_collapse",
        synthetic="collapse_at_full_selection",
    ),
    Row(
        "Theorem 2: lower bound",
        "1 - (1/(N r)) sum xi_i <= E[N_s]/N",
        "14_geometric_separability",
        ("thm2-lower",),
        reconstructed=True,
    ),
    Row(
        "Theorem 2: upper bound",
        "E[N_s]/N <= (1/N) sum exp(-(xi_i - r)_+^2 / (2 M^2))",
        "14_geometric_separability",
        ("thm2-upper-reconstructed",),
        ("thm2-upper",),
        reconstructed=True,
    ),
    Row(
        "Multi-head coverage",
        "1 - (1 - p)^H; p = 0.8 needs H = 3 for 99 %",
        "14_geometric_separability",
        ("multihead",),
    ),
    Row(
        "Lemma 2",
        "the Jacobian of a general normaliser, large when min F -> 0",
        "15_gradient_sensitivity",
        ("lem2",),
        reconstructed=True,
    ),
    Row(
        "Corollary 3",
        "||grad_l alpha||_2 <= min{1/(4T), sqrt 2}",
        "15_gradient_sensitivity",
        ("cor3-printed",),
        ("cor3-spectral", "cor3-entry"),
    ),
    Row(
        "Figure 2a: d~",
        "at N = 5, d~ grows about linearly in L",
        "22_distance_vs_length",
        experiments=("fig2a-distance-linear",),
    ),
    Row(
        "Figure 2a: E",
        "at N = 5, E grows about linearly in L",
        "22_distance_vs_length",
        experiments=("fig2a-expectation-linear",),
    ),
    Row(
        "Figure 2a: d_max", "the bound is valid and conservative", "22_distance_vs_length", experiments=("fig2a-bound",)
    ),
    Row(
        "Figure 2b: plateau",
        "at L = 1024, d~ plateaus beyond N = 20",
        "22_distance_vs_length",
        experiments=("fig2b-plateau",),
    ),
    Row(
        "Figure 2b: convergence",
        "d~ and E converge as N -> 100",
        "22_distance_vs_length",
        experiments=("fig2b-convergence",),
    ),
    Row(
        "Figure 2c",
        "critical N = 0.06 L (fewer than 6 % of the tokens)",
        "23_critical_n",
        experiments=("fig2c-critical",),
    ),
    Row(
        "Figure 3: plateau",
        "N_s/N falls until N = 16, then 0.70-0.85",
        "24_separability",
        experiments=("fig3-plateau",),
    ),
    Row(
        "Figure 3: bounds",
        "lower bound conservative, upper tracks the maxima",
        "24_separability",
        experiments=("fig3-bounds",),
    ),
    Row("Figure 4: 1/T", "g follows 1/T for T < 0.1", "25_gradient_in_the_model", experiments=("fig4-slope",)),
    Row("Figure 4: drop", "g drops about 100x once T >= 1", "25_gradient_in_the_model", experiments=("fig4-drop",)),
    Row(
        "Figure 4: curve",
        "g under min{1/(4T), sqrt 2}",
        "25_gradient_in_the_model",
        experiments=("fig4-printed-bound",),
    ),
    Row(
        "Guideline: active set",
        "keep the active set below about 0.06 L",
        "23_critical_n",
        experiments=("fig2c-critical",),
    ),
    Row(
        "Guideline: N_s/N", "monitor N_s/N; it saturates near 70-80 %", "24_separability", experiments=("fig3-plateau",)
    ),
    Row(
        "Guideline: temperature",
        "avoid T <= 0.1 (the Jacobian grows as 1/T)",
        "15_gradient_sensitivity",
        ("cor3-spectral",),
        experiments=("fig4-drop",),
    ),
    Row(
        "Guideline: normalisers",
        "prefer sparse, length-aware or gradient-controlled normalisers",
        "33_alternative_normalizers",
        note="advice rather than a measurement; the chapter sets the normalisers side by side under the paper's "
        "diagnostics",
    ),
)


def collapse_at_full_selection(lengths=(16, 64, 256), *, rows: int = 8, seed: int = 0) -> tuple[float, str]:
    """Corollary 2 (ii) on seeded synthetic rows: the largest |E| and d~ at N = L (both must be 0), and E at
    N = L - 1 against N = 1 (it falls). Returns ``(largest value at N = L, sentence)``."""
    from attnlimits import selection, synthetic

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
        f"|E| and d~ at N = L are at most {worst:.1e} (L = {', '.join(map(str, lengths))}; {rows} seeded rows "
        f"each); E at N = L - 1 is {'below' if falls else 'NOT below'} E at N = 1"
    )
    return (worst if falls else float("inf")), text


def _check_row(row: Row, by_id: dict) -> tuple[str, str, str]:
    missing = [i for i in (*row.checks, *row.book) if i not in by_id]
    if missing:
        raise KeyError(f"checks {missing} were not run: pass every registered check's verdict")
    paper = [by_id[i] for i in row.checks]
    book = [by_id[i] for i in row.book]
    ours = "; ".join(f"{v.id}: {v.verdict}" for v in paper + book)
    trials = sum(v.trials for v in paper + book)
    source = f"{trials:,} seeded trials and adversarial cases ({', '.join(v.id for v in paper + book)})"
    if all(v.violations == 0 for v in paper):
        verdict = REPRODUCED
    elif book and all(v.violations == 0 for v in book):
        verdict = NOT if row.reconstructed else CORRECTED
    else:
        verdict = NOT
    return ours, source, verdict


def _experiment_row(row: Row, by_key: dict, where_from: str) -> tuple[str, str, str]:
    found = [by_key[k] for k in row.experiments]
    verdicts = {c["verdict"] for c in found}
    verdict = verdicts.pop() if len(verdicts) == 1 else NOT
    return "; ".join(c["measured"] for c in found), where_from, verdict


def claims(verdicts, results) -> pd.DataFrame:
    """The claims table: columns ``claim, paper, ours, source, verdict, where`` (``where``: the chapter's file name).

    ``verdicts``: the registry's verdict records (:func:`attnlimits.checks.run_all`); ``results``: the
    experiments' :class:`attnlimits.experiments.Results` the Experiments part reads.
    """
    by_id = {v.id: v for v in verdicts}
    by_key = {c["key"]: c for c in reproduction.claims(results).to_dict("records")}
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
            parts.append((sentence, "seeded synthetic rows", REPRODUCED if value <= 1e-12 else NOT))
        if not parts:
            ours, source, verdict = row.note, "", NOT_TESTABLE
        else:
            ours = "; ".join(x[0] for x in parts)
            source = "; ".join(x[1] for x in parts if x[1])
            found = {x[2] for x in parts}
            verdict = found.pop() if len(found) == 1 else NOT
        if row.reconstructed and verdict in (REPRODUCED, NOT):
            verdict += RECONSTRUCTION
        rows.append(
            {"claim": row.claim, "paper": row.paper, "ours": ours, "source": source, "verdict": verdict,
             "where": row.where}
        )  # fmt: skip
    return pd.DataFrame(rows)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(table: pd.DataFrame, *, columns=("claim", "paper", "verdict", "where")) -> str:
    """The table as MyST markdown, ``where`` as a ``{doc}`` link (relative to chapters/)."""
    names = {"claim": "Claim of the paper", "paper": "The paper", "ours": "This book measures",
             "source": "From", "verdict": "Verdict", "where": "Where"}  # fmt: skip
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
    (:func:`attnlimits.cache.code_hash`)."""
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
