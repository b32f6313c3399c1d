"""The paper's experimental claims, each set beside what a run of :mod:`attnlimits.experiments` measures.

One function per claim turns a run into a :class:`Claim`: what the paper reports, what we measure (a sentence with
the numbers), and a verdict decided by a fixed rule stated in the claim's ``rule``. A run is read as its windows'
summaries (:class:`attnlimits.experiments.summaries.Summaries`, what the book ships; a per-head
:class:`attnlimits.experiments.Results` is summarised first,
:meth:`attnlimits.experiments.summaries.Summaries.of`). A rule reads one number
(``value``) and its 95 % interval over the run's windows (``lo``, ``hi``) and compares the interval with a band
(:func:`attnlimits.infra.verdicts.decide`), so a verdict never claims more than the windows support. The windows
(passages of text) are the units: the number is, per window, a statistic over its heads (e.g. the median over a
window's heads, or the window's own critical N), then each window's own number (its slope, ratio, level), then
the median over the windows with its exact order-statistic interval (:class:`.rules.PerWindow`,
:func:`attnlimits.infra.medians.median_interval`, :data:`.rules.METHOD`: it covers whatever the passages' tails
do), and every claim says how many windows it rests on (``units``). Trends are decided per length or by their
slope, never by a median over a grid of lengths.

Verdicts (the book's words, :mod:`attnlimits.infra.verdicts`): "reproduced" (the interval lies inside the band),
"not reproduced" (wholly outside it, or the claim's shape fails), "inconclusive" (the interval straddles an edge),
"not measured" (the run has no number for the claim), "depends on the reading" (a claim on Eq. (10)'s expectation
whose rule gives different verdicts under its readings E, E_mc, E_full, E_perm: :func:`readings_claims` has each,
:func:`reading_predictions` what would tell them apart). A claim's ``kind`` says whether it is a reproduction (a
rule that can fail) or a sanity check (a proved bound: "holds" or "violated", never counted as a reproduction). The
Experiments chapters show the rows and assert the verdicts their prose states
(:func:`attnlimits.infra.sentences.expect`); the reproducibility report shows them all.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from attnlimits.experiments.paper_claims.figure2 import (
    COUNTINGS,
    READING_RULES,
    READINGS,
    READINGS_COLUMNS,
    critical_sensitivity,
    fig2a_bound,
    fig2a_distance,
    fig2a_expectation,
    fig2b_convergence,
    fig2b_plateau,
    fig2c_critical,
    fig2c_proportional,
    figure2_readings,
    reading_predictions,
    readings_claims,
    untrained_passes,
)
from attnlimits.experiments.paper_claims.figure3 import FLAT, TRACKS, fig3_lower_bound, fig3_plateau, fig3_upper_tracks
from attnlimits.experiments.paper_claims.figure4 import (
    G_QUANTILE,
    fig4_drop,
    fig4_printed_bound,
    fig4_slope,
    g_quantile,
)
from attnlimits.experiments.paper_claims.rules import (
    CONVERGED,
    DROP,
    FRACTION,
    INVERSE_T,
    LINEAR,
    PLATEAU,
    SATURATION,
    SINK_VARIANT,
    Claim,
    as_summaries,
    loglog_slope,
)
from attnlimits.experiments.paper_claims.sentences import rows_read
from attnlimits.infra import sentences
from attnlimits.infra.statistics import RESAMPLES, SEED
from attnlimits.infra.verdicts import (
    DEPENDS_ON_READING,
    HINGES,
    HOLDS,
    INCONCLUSIVE,
    NOT_MEASURED,
    REPRODUCED,
    REPRODUCTION,
    SANITY_CHECK,
    VIOLATED,
    decide,
)
from attnlimits.infra.verdicts import NOT_REPRODUCED as NOT

__all__ = [
    "CLAIMS",
    "CONVERGED",
    "COUNTINGS",
    "DEPENDS_ON_READING",
    "DROP",
    "FLAT",
    "FRACTION",
    "G_QUANTILE",
    "HINGES",
    "HOLDS",
    "INCONCLUSIVE",
    "INVERSE_T",
    "LINEAR",
    "NOT",
    "NOT_MEASURED",
    "PLATEAU",
    "READINGS",
    "READINGS_COLUMNS",
    "READING_RULES",
    "REPRODUCED",
    "REPRODUCTION",
    "RESAMPLES",
    "SANITY_CHECK",
    "SATURATION",
    "SEED",
    "SINK_VARIANT",
    "TABLES",
    "TRACKS",
    "VIOLATED",
    "Claim",
    "across_runs",
    "assert_second_text",
    "claims",
    "critical_sensitivity",
    "decide",
    "decided",
    "figure2_readings",
    "g_quantile",
    "leave_one_out",
    "loglog_slope",
    "markdown",
    "on_a_second_text",
    "reading_predictions",
    "readings_claims",
    "rows_read",
    "run_label",
    "save_tables",
    "untrained_passes",
    "windows_left_out",
    "with_hinges",
]


CLAIMS = (
    fig2a_distance,
    fig2a_expectation,
    fig2a_bound,
    fig2b_plateau,
    fig2b_convergence,
    fig2c_critical,
    fig2c_proportional,
    fig3_plateau,
    fig3_lower_bound,
    fig3_upper_tracks,
    fig4_slope,
    fig4_drop,
    fig4_printed_bound,
)


def claims(res, figure: str | None = None, cannot_tell=frozenset()) -> pd.DataFrame:
    """Every claim (or those of one ``figure``: "2a", "2b", "2c", "3", "4") decided on a run ``res`` (its
    :class:`attnlimits.experiments.summaries.Summaries`, or a per-head :class:`attnlimits.experiments.Results`,
    summarised once here) as a table, one row per claim, with its ``units`` (windows) and ``kind`` (a sanity check
    never counts as a reproduction).

    Only the asked figure's claims are computed (a claim function's name starts with ``fig<figure>_``). The claims
    on the expectation (:data:`READING_RULES`) are held to every reading; :func:`readings_claims` has each.
    ``cannot_tell``: the ``(key, reading)`` pairs an untrained network reproduces (:func:`untrained_passes`), left
    out of those claims' verdicts.
    """
    figures = {c.__name__.split("_")[0].removeprefix("fig") for c in CLAIMS}
    if figure is not None and figure not in figures:
        raise ValueError(f"figure: must be one of {sorted(figures)} or None, got {figure!r}")
    chosen = [c for c in CLAIMS if figure is None or c.__name__.startswith(f"fig{figure}_")]
    res = as_summaries(res)
    return pd.DataFrame([_claim_of(c, res, cannot_tell).as_dict() for c in chosen])


def _claim_of(claim, res, cannot_tell) -> Claim:
    """One claim function on ``res``; a rule on the expectation also told which readings cannot tell."""
    return claim(res, cannot_tell) if claim.__name__ in _ON_READINGS else claim(res)


#: The claim functions held to every reading of the expectation (they take the readings an untrained network
#: reproduces).
_ON_READINGS = {"fig2a_expectation", "fig2b_convergence", "fig2c_critical", "fig2c_proportional"}


def leave_one_out(res, figure: str | None = None, cannot_tell=frozenset()) -> pd.DataFrame:
    """Each claim of :func:`claims` (of one ``figure``, or all) decided again on the run with each window left out
    in turn: one row per claim (``key``) with ``loo_lo`` and ``loo_hi``, the range of its number over those runs, and
    ``flipped_by``, ``{window: verdict}`` for each window whose leaving out gives the claim another verdict than the
    whole run's (empty when none does). The windows are the run's passages of text, the units every interval
    resamples: a verdict one of them changes is not decided by the run."""
    res = as_summaries(res)
    base = claims(res, figure, cannot_tell)
    return windows_left_out(base, res.windows, lambda w: claims(res.without(w), figure, cannot_tell))


def windows_left_out(base: pd.DataFrame, windows, claims_without) -> pd.DataFrame:
    """:func:`leave_one_out`'s table for any claims: ``base`` (columns ``key``, ``value``, ``verdict``) decided on
    the whole run, and ``claims_without(window)`` the same claims with ``window`` left out, for each of
    ``windows``."""
    base = base.set_index("key")
    values = {key: [] for key in base.index}
    flipped = {key: {} for key in base.index}
    for window in windows:
        left = claims_without(window).set_index("key")
        for key in base.index:
            values[key].append(float(left.loc[key, "value"]))
            if left.loc[key, "verdict"] != base.loc[key, "verdict"]:
                flipped[key][int(window)] = str(left.loc[key, "verdict"])
    rows = [
        {"key": key, "loo_lo": min(v, default=math.nan), "loo_hi": max(v, default=math.nan), "flipped_by": flipped[key]}
        for key, v in values.items()
    ]
    return pd.DataFrame(rows, columns=["key", "loo_lo", "loo_hi", "flipped_by"])


def decided(res, figure: str | None = None, cannot_tell=frozenset()) -> pd.DataFrame:
    """:func:`claims` with :func:`leave_one_out`'s columns, and the rule that a run decides only what no single
    window decides for it: a reproduction's verdict that leaving out one window changes becomes :data:`HINGES`
    ("hinges on one passage"), never counted as decided; ``verdict_all`` keeps the whole run's verdict, and
    ``hinges_on`` says which windows and what the verdict is without each ("window 3: not reproduced").
    ``cannot_tell``: as :func:`claims`'."""
    res = as_summaries(res)
    base = claims(res, figure, cannot_tell)
    left = windows_left_out(base, res.windows, lambda w: claims(res.without(w), figure, cannot_tell))
    return with_hinges(base, left)


def with_hinges(base: pd.DataFrame, left: pd.DataFrame) -> pd.DataFrame:
    """``base`` claims (with ``key``, ``verdict``, ``kind``) joined to their :func:`windows_left_out` table, each
    reproduction that one window flips reading :data:`HINGES` (:func:`decided`'s rule)."""
    table = base.merge(left, on="key", how="left")
    table["verdict_all"] = table["verdict"]
    table["hinges_on"] = [
        "; ".join(f"window {w}: {v}" for w, v in flips.items()) if kind == REPRODUCTION else ""
        for flips, kind in zip(table["flipped_by"], table["kind"], strict=True)
    ]
    table.loc[table["hinges_on"] != "", "verdict"] = HINGES
    return table


def run_label(res) -> str:
    """A run as a column heading: its text, preset and windows, e.g. "kjv, reduced preset, 8 windows"."""
    about = res.provenance
    return f"{about['text']['name']}, {about['preset']['name']} preset, {len(about['windows'])} windows"


def across_runs(runs, figures=None, compare: tuple[int, int] = (-2, -1)) -> pd.DataFrame:
    """The claims of :func:`claims` (those of ``figures``, e.g. ``["2a", "2b"]``; None: every claim) decided on
    several runs, side by side: one row per claim (``key``), then per run (a column headed :func:`run_label`) its
    verdict and number with its 95 % interval over that run's windows, e.g. "reproduced: 1.03 [1.01, 1.05]", and
    ``same verdict``: whether the runs at the positions ``compare`` agree (the last two by default: two texts at
    one preset, so that a difference is the text's and not the grid's). A run whose label repeats an earlier one's
    (the book's own preset is the comparison's) is shown once."""
    by_label = {}
    for res in runs:
        if run_label(res) not in by_label:
            by_label[run_label(res)] = as_summaries(res)
    if len(by_label) < 2:
        raise ValueError(f"runs: at least two different runs to compare, got {list(by_label)}")
    tables = {
        label: pd.concat([claims(res, f) for f in figures or [None]]).set_index("key")
        for label, res in by_label.items()
    }
    first = next(iter(tables.values()))
    out = pd.DataFrame({"key": first.index})
    for label, table in tables.items():
        out[label] = [_verdict_cell(table.loc[key]) for key in out["key"]]
    a, b = (list(tables.values())[i] for i in compare)
    out["same verdict"] = [bool(a.loc[key, "verdict"] == b.loc[key, "verdict"]) for key in out["key"]]
    return out


def on_a_second_text(res, figures=None) -> tuple[str, bool | None]:
    """The table a page shows in its section on the second text, as markdown: :func:`across_runs` of ``res`` (the
    page's run) beside the same model's run on the King James Version at the same preset (shipped with the book at
    its own preset: :func:`attnlimits.experiments.shipped.second_text`), for the claims of ``figures``; and whether
    the second text changes no verdict (None, with the reason in place of the table, where it is neither read here
    nor shipped)."""
    from attnlimits.experiments import shipped

    second, why = shipped.second_text(res.preset, exclude_sink=bool(res.provenance.get("exclude_sink")))
    if second is None:
        return why, None
    table = across_runs([res, second], figures)
    shown = table.assign(**{"same verdict": table["same verdict"].map({True: "yes", False: "no"})})
    return markdown(shown, columns=list(table.columns)), bool(table["same verdict"].all())


def assert_second_text(res, same: bool | None, what: str) -> None:
    """A page's sentence "the second text changes no verdict of ``what``", checked on ``same`` (from
    :func:`on_a_second_text`) where ``res`` is the run the prose describes; nothing to check where the second text
    could not be read here (``same`` None)."""
    if same is not None:
        sentences.assert_sentences(
            {f"the second text changes no verdict of {what}": same}, described=sentences.describes(res)
        )


def _verdict_cell(row) -> str:
    """A claim's verdict and number, with its interval where the rule reads one."""
    if pd.isna(row["value"]):
        return str(row["verdict"])
    interval = "" if pd.isna(row["value_lo"]) else f" [{row['value_lo']:.3g}, {row['value_hi']:.3g}]"
    return f"{row['verdict']}: {row['value']:.3g}{interval}"


#: The tables :func:`save_tables` writes beside a run's own.
TABLES = ("claims", "readings", "predictions")


def save_tables(res, folder) -> Path:
    """Write ``claims.csv`` (:func:`claims`: every claim decided on the run, its number beside its 95 % interval
    over windows, ``value_lo`` and ``value_hi``, its ``units`` and ``kind``), ``readings.csv``
    (:func:`readings_claims` on every counting the run holds) and ``predictions.csv`` (:func:`reading_predictions`)
    into ``folder``; returns it."""
    folder, res = Path(folder), as_summaries(res)
    claims(res).to_csv(folder / "claims.csv", index=False, float_format="%.17g")
    readings_claims(res, COUNTINGS).to_csv(folder / "readings.csv", index=False, float_format="%.17g")
    reading_predictions(res).to_csv(folder / "predictions.csv", index=False, float_format="%.17g")
    return folder


def markdown(table: pd.DataFrame, columns=("paper", "measured", "verdict", "rule")) -> str:
    """A table of :func:`claims` as MyST markdown: a chapter shows it with ``IPython.display.Markdown``, so that the
    book typesets the formulas in its cells (an HTML table from pandas would show them as raw TeX)."""
    unknown = [c for c in columns if c not in table.columns]
    if unknown:
        raise ValueError(f"columns: {unknown} are not columns of the table; it has {list(table.columns)}")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in table[list(columns)].itertuples(index=False):
        cells = [str(v).replace("|", "\\|").replace("\n", " ") for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
