"""attnlimits.reporting.book_claims: the claims table's verdict rules, its vocabulary, and one source for the
reproducibility
report and the introduction (the introduction includes the file the report writes; no claims table is typed in)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from attnlimits.experiments import paper_claims
from attnlimits.reporting import book_claims
from attnlimits.theory import checks
from attnlimits.theory.checks.registry import Verdict

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT_KEYS = (
    "fig2a-distance-linear",
    "fig2a-expectation-linear",
    "fig2a-bound",
    "fig2b-plateau",
    "fig2b-convergence",
    "fig2c-critical",
    "fig2c-proportional",
    "fig3-plateau",
    "fig3-lower-bound",
    "fig3-upper-tracks",
    "fig4-slope",
    "fig4-drop",
    "fig4-printed-bound",
)


def _verdict(check_id, violations=0):
    return Verdict(
        bound=check_id, statement="", trials=10, violations=violations, worst_ratio=1.0,
        verdict=f"{check_id} measured", expected="holds", id=check_id,
    )  # fmt: skip


class _Results:
    provenance = {
        "model": {"model_id": "some/model"},
        "text": {"name": "some-text"},
        "preset": {"name": "paper"},
        "windows": [0, 1],
    }


#: Chapter 32's tests of the guidelines, as :func:`attnlimits.studies.training.report.guideline_verdicts` gives them.
_GUIDELINES = pd.DataFrame(
    [
        ("the error rises past N/L = 6 %", "softmax", 0.2, 0.15, 0.25, 5, "reproduced"),
        ("a lower N_s/N comes with a higher error", "all", -0.1, -0.3, 0.1, 5, "inconclusive"),
    ],
    columns=["rule", "normalizer", "value", "lo", "hi", "seeds", "verdict"],
)


@pytest.fixture
def fake(monkeypatch):
    """Every check holds and every experimental claim is reproduced, unless a test says otherwise."""
    state = {"violated": set(), "experiments": {k: paper_claims.REPRODUCED for k in EXPERIMENT_KEYS}, "values": {}}

    def claims(res, *args, **kwargs):
        given = {**state["experiments"], **getattr(res, "verdicts", {})}  # another model's own verdicts
        rows = [
            {"key": k, "measured": f"{k} measured", "verdict": v, **state["values"].get(k, {})}
            for k, v in given.items()
        ]
        return pd.DataFrame(rows)

    monkeypatch.setattr(paper_claims, "claims", claims)
    monkeypatch.setattr(paper_claims, "decided", claims)  # the claims with each window left out: the same here

    def table():
        verdicts = [_verdict(i, violations=int(i in state["violated"])) for i in checks.CHECKS]
        return book_claims.claims(verdicts, _Results(), guidelines=_GUIDELINES).set_index("claim")

    return state, table


def test_rows_name_registered_checks_and_known_claims():
    for row in book_claims.ROWS:
        assert set(row.checks) | set(row.book) <= set(checks.CHECKS), row.claim
        assert set(row.experiments) <= set(EXPERIMENT_KEYS), row.claim
        assert (ROOT / "chapters" / f"{row.where}.py").is_file(), row.where
    claims = [r.claim for r in book_claims.ROWS]
    assert len(claims) == len(set(claims))
    for needed in ("Lemma 1", "Corollary 1", "Corollary 3", "Multi-head coverage", "Figure 2c", "Figure 4: $1/T$"):
        assert needed in claims


def test_verdict_rules(fake):
    state, table = fake
    t = table()
    assert t.loc["Figure 2c", "verdict"] == "reproduced"
    assert t.loc["Lemma 1", "verdict"] == "holds"  # a bound the book proves: a sanity check
    assert t.loc[r"Theorem 1: $d_{\max}$", "verdict"] == "holds (the book's reconstruction)"
    assert t.loc["Corollary 2 (ii)", "verdict"] == "holds"  # computed: E = d~ = 0 at N = L
    assert t.loc["Guideline: normalisers", "verdict"] == "not testable here"
    assert "some/model on some-text, preset paper, 2 windows" in t.loc["Figure 2c", "source"]
    assert t.loc["Lemma 1", "source"].startswith("synthetic, 10 seeded trials")
    # the paper's statement fails and the book's replacement holds: corrected, or for a reconstruction, refuted
    state["violated"] = {"cor3-printed", "thm2-upper-reconstructed"}
    t = table()
    assert t.loc["Corollary 3", "verdict"] == "corrected"
    assert t.loc["Theorem 2: upper bound", "verdict"] == "not reproduced (the book's reconstruction)"
    # ... and when the replacement fails too, nothing is corrected
    state["violated"] |= {"cor3-spectral"}
    assert table().loc["Corollary 3", "verdict"] == "not reproduced"
    state["violated"] = {"lem1"}
    assert table().loc["Lemma 1", "verdict"] == "violated"
    # experimental rows take reproduction's verdict; a guideline follows its figure
    state["experiments"]["fig2c-critical"] = paper_claims.INCONCLUSIVE
    t = table()
    assert t.loc["Figure 2c", "verdict"] == t.loc["Guideline: active set", "verdict"] == paper_claims.INCONCLUSIVE
    # two measurements that disagree never add up to a reproduction
    state["violated"] = {"cor3-spectral"}
    assert table().loc["Guideline: temperature", "verdict"] == "not reproduced"


def test_active_set_guideline_follows_the_constant_only(fake):
    state, table = fake
    state["experiments"]["fig2c-proportional"] = paper_claims.NOT  # N grows with L, but not as 0.06 L: no matter
    t = table()
    assert t.loc["Guideline: active set", "verdict"] == "reproduced"
    assert t.loc["Figure 2c: proportional", "verdict"] == "not reproduced"
    state["experiments"]["fig2c-critical"] = paper_claims.NOT
    assert table().loc["Guideline: active set", "verdict"] == "not reproduced"


def test_temperature_guideline_follows_the_model_below_T_one_tenth(fake):
    state, table = fake
    state["experiments"]["fig4-drop"] = paper_claims.NOT  # the drop at T >= 1 does not decide it
    assert table().loc["Guideline: temperature", "verdict"] == "reproduced"
    state["experiments"]["fig4-slope"] = paper_claims.NOT  # the bound holds, but g does not grow as 1/T
    t = table()
    assert t.loc["Guideline: temperature", "verdict"] == "not reproduced"
    assert t.loc["Guideline: temperature", "where"] == "25_gradient_in_the_model"


SANITY = {"Lemma 1", "Corollary 1", r"Theorem 1: $d_{\max}$", "Theorem 1: expectation $E$", "Corollary 2 (ii)",
          "Theorem 2: lower bound", "Multi-head coverage", r"Figure 2a: $d_{\max}$",
          "Figure 3: lower bound"}  # fmt: skip


def test_sanity_checks_are_shown_as_such_and_never_as_reproductions(fake):
    state, table = fake
    t = table()
    assert set(t.index[t.kind == book_claims.SANITY_CHECK]) == SANITY
    assert set(t.verdict[t.kind == book_claims.SANITY_CHECK].str.removesuffix(book_claims.RECONSTRUCTION)) == {"holds"}
    assert not t.verdict[t.kind == book_claims.REPRODUCTION].isin(["holds", "violated"]).any()
    # a proved bound applied to the model: the experiments' old words read as holds / violated
    state["experiments"]["fig3-lower-bound"] = paper_claims.NOT
    assert table().loc["Figure 3: lower bound", "verdict"] == "violated" + book_claims.RECONSTRUCTION
    assert table().loc["Corollary 2 (ii)", "kind"] == book_claims.SANITY_CHECK


def test_the_experiments_kind_wins(fake, monkeypatch):
    state, table = fake
    base = paper_claims.claims

    def with_kind(res, *args, **kwargs):
        out = base(res)
        out["kind"] = [
            book_claims.REPRODUCTION if k == "fig3-lower-bound" else book_claims.SANITY_CHECK if k == "fig2c-critical"
            else book_claims.REPRODUCTION for k in out.key
        ]  # fmt: skip
        return out

    monkeypatch.setattr(paper_claims, "decided", with_kind)
    t = table()
    assert t.loc["Figure 3: lower bound", "kind"] == book_claims.REPRODUCTION
    assert t.loc["Figure 3: lower bound", "verdict"] == "reproduced" + book_claims.RECONSTRUCTION
    assert t.loc["Figure 2c", "kind"] == book_claims.SANITY_CHECK and t.loc["Figure 2c", "verdict"] == "holds"
    # a row that reads claims of both kinds keeps its own
    assert t.loc["Guideline: active set", "kind"] == book_claims.SANITY_CHECK  # its one claim is fig2c-critical


def test_sanity_kinds_follow_what_the_book_proves(check_verdicts):
    """A row decided by checks alone is a sanity check exactly when the book proves every statement it checks
    (their expected verdict is "holds"); one whose statement the book refutes can fail, so it is a reproduction."""
    expected = {v.id: v.expected for v in check_verdicts}
    for row in book_claims.ROWS:
        if row.checks and not row.experiments:
            proved = all(expected[i] == "holds" for i in row.checks)
            assert (row.kind == book_claims.SANITY_CHECK) == proved, row.claim


def test_depends_on_the_reading(fake, monkeypatch):
    state, table = fake
    depends = book_claims.DEPENDS_ON_READING
    state["experiments"]["fig2a-expectation-linear"] = depends
    assert table().loc["Figure 2a: $E$", "verdict"] == depends
    assert depends in book_claims.VERDICTS
    row = book_claims.Row(
        "Mixed", "x", "22_distance_vs_length", experiments=("fig2a-expectation-linear", "fig2c-critical")
    )
    monkeypatch.setattr(book_claims, "ROWS", (row,))
    assert table().loc["Mixed", "verdict"] == depends  # with a reproduction: the reading decides
    for other in (paper_claims.INCONCLUSIVE, paper_claims.NOT):
        state["experiments"]["fig2c-critical"] = other
        assert table().loc["Mixed", "verdict"] == other  # an undecided or failed measurement outweighs it


def test_lemma_2_is_not_tested_by_the_books_own_bound(fake):
    """The check lem2 tests the book's Lemma 2, not the paper's: the row says so and counts as nothing."""
    state, table = fake
    t = table()
    assert t.loc["Lemma 2", "verdict"] == "not testable here" and t.loc["Lemma 2", "value"] == ""
    assert "`lem2`" in t.loc["Lemma 2", "ours"] and "no check tests the paper's bound" in t.loc["Lemma 2", "ours"]
    state["violated"] = {"lem2"}
    assert table().loc["Lemma 2", "verdict"] == "not testable here"


def test_counts_leave_out_sanity_checks_and_untestable_claims(fake):
    state, table = fake
    state["experiments"]["fig4-drop"] = paper_claims.NOT
    t = table().reset_index()
    c = book_claims.counts(t)
    # Lemma 2 and the normalisers' guideline are not testable; three rows read a measurement again
    reproductions = len(book_claims.ROWS) - len(SANITY) - 2 - 3
    assert sum(c[book_claims.REPRODUCTION].values()) == reproductions
    # the N_s/N guideline reads chapter 32's test, inconclusive in _GUIDELINES
    assert c[book_claims.REPRODUCTION] == {"reproduced": reproductions - 2, "not reproduced": 1, "inconclusive": 1}
    assert c[book_claims.SANITY_CHECK] == {"holds": len(SANITY)}
    assert c["not testable here"] == {"not testable here": 2}
    lead = book_claims.markdown(t).split("````")[0]
    assert f"**{reproductions} claims tested**" in lead and f"**{len(SANITY)} sanity checks**" in lead
    assert f"*reproduced* {reproductions - 2}, *not reproduced* 1, *inconclusive* 1" in lead


def test_an_inconclusive_experiment_makes_its_rows_inconclusive(fake):
    state, table = fake
    inconclusive = book_claims.INCONCLUSIVE
    state["experiments"]["fig4-slope"] = state["experiments"]["fig2c-critical"] = inconclusive
    t = table()
    for claim in ("Guideline: temperature", "Guideline: active set", "Figure 2c", "Figure 4: $1/T$"):
        assert t.loc[claim, "verdict"] == inconclusive, claim
    # ... unless another measurement of the claim fails outright
    state["violated"] = {"cor3-spectral"}
    assert table().loc["Guideline: temperature", "verdict"] == "not reproduced"


def test_a_claim_that_hinges_on_one_passage_says_which_and_is_not_counted_as_decided(fake):
    state, table = fake
    state["experiments"]["fig4-slope"] = paper_claims.HINGES
    state["values"]["fig4-slope"] = {"value": -0.37, "value_lo": -0.8, "value_hi": 0.06, "loo_lo": -0.38,
                                     "loo_hi": -0.15, "hinges_on": "window 3: not reproduced"}  # fmt: skip
    t = table()
    for claim in ("Figure 4: $1/T$", "Guideline: temperature"):  # the guideline reads it too
        assert t.loc[claim, "verdict"] == paper_claims.HINGES, claim
    cell = t.loc["Figure 4: $1/T$", "value"]
    assert cell == "-0.37 [-0.8, 0.06] (one window left out: -0.38 to -0.15; without window 3: not reproduced)"
    counted = book_claims.counts(t.reset_index())
    assert counted["reproduction"][paper_claims.HINGES] == 1  # counted apart, never as reproduced or not reproduced
    assert counted[book_claims.REPEATS][paper_claims.HINGES] == 1  # the guideline reads it again: not counted twice
    assert "*hinges on one passage* 1" in book_claims.markdown(t.reset_index())


def test_corollary_2_i_expectation_is_corrected_and_the_distance_has_its_own_row(fake):
    state, table = fake
    state["violated"] = {"cor2-expectation-linear"}  # the printed linear growth of E fails, the bound holds
    t = table()
    assert t.loc["Corollary 2 (i): $E$", "verdict"] == "corrected"
    assert t.loc["Corollary 2 (i): $E$", "where"] == "13_distance_collapse"
    assert t.loc[r"Corollary 2 (i): $\tilde d$", "verdict"] == "reproduced"
    state["experiments"]["fig2a-distance-linear"] = paper_claims.NOT
    assert table().loc[r"Corollary 2 (i): $\tilde d$", "verdict"] == "not reproduced"
    state["violated"] = {"cor2-expectation-linear", "cor2-expectation-bounded"}  # the bound fails too
    assert table().loc["Corollary 2 (i): $E$", "verdict"] == "not reproduced"
    state["violated"] = set()  # linear growth would hold: nothing to correct
    assert table().loc["Corollary 2 (i): $E$", "verdict"] == "reproduced"


def test_measured_values_carry_their_interval(fake):
    state, table = fake
    state["values"] = {
        "fig2c-critical": {"value": 0.0912, "value_lo": 0.05, "value_hi": 0.12},
        "fig4-slope": {"value": -0.36, "value_lo": math.nan, "value_hi": math.nan},
        "fig4-drop": {"value": math.nan, "value_lo": math.nan, "value_hi": math.nan},
    }
    t = table()
    assert t.loc["Figure 2c", "value"] == "0.0912 [0.05, 0.12]"
    assert t.loc["Figure 4: $1/T$", "value"] == "-0.36"
    assert t.loc["Figure 4: drop", "value"] == ""  # no number
    assert t.loc["Figure 2b: plateau", "value"] == ""  # results computed before claims carried values
    assert t.loc["Guideline: temperature", "value"] == "worst ratio 1; -0.36"
    assert t.loc["Corollary 3", "value"] == "worst ratios 1, 1, 1"


def test_a_claim_the_results_do_not_have(fake, monkeypatch):
    state, table = fake
    del state["experiments"]["fig2c-proportional"]  # results from before the claim existed
    t = table()
    assert t.loc["Figure 2c: proportional", "verdict"] == "not testable here"
    assert t.loc["Figure 2c: proportional", "source"] == ""
    assert t.loc["Figure 2c", "verdict"] == "reproduced"
    monkeypatch.setattr(
        book_claims,
        "ROWS",
        (book_claims.Row("Mixed", "x", "23_critical_n", experiments=("fig2c-critical", "fig2c-proportional")),),
    )
    with pytest.raises(KeyError, match="fig2c-proportional"):
        table()


#: ASCII formulas the book never prints outside math: comparisons, arrows, tildes, subscripts, norms, powers and
#: Greek letters or functions spelled out.
ASCII_FORMULA = re.compile(
    r"<=|>=|->|!=|\w~|~\w|\\?\|\\?\||\^|\b[A-Za-z]+_[A-Za-z0-9{]|\b(?:alpha|Delta|eps|xi|mu|sigma|sqrt|inf)\b"
)


def ascii_formulas(markdown: str) -> list[str]:
    """The ASCII formulas left in ``markdown`` outside math, code and roles, and every cell with an unpaired $."""
    found = []
    for line in markdown.splitlines():
        for cell in re.split(r"(?<!\\)\|", line):
            if cell.count("$") % 2:
                found.append(f"unpaired $ in {cell.strip()!r}")
                continue
            prose = re.sub(r"\$[^$]*\$|\{\w+\}`[^`]*`|`[^`]*`", " ", cell)
            found += [m.group(0) for m in ASCII_FORMULA.finditer(prose)]
    return found


def test_the_formula_detector_flags_ascii():
    for bad in ("C1/L <= alpha_i", "d~ grows", "N_s/N falls", r"\|\|grad\|\|", "L^1.04", "E -> 0", "a $x$ and $y"):
        assert ascii_formulas(bad), bad
    for good in (r"$C_1/L \le \alpha_i$", r"$\tilde d$ grows", "{doc}`15_gradient_sensitivity`", "`cor3-printed`"):
        assert not ascii_formulas(good), good


@pytest.fixture(scope="module")
def check_verdicts():
    """Every registered check's verdict on a few trials: their statements are what the table prints."""
    return checks.run_all(trials=24, seed=0)


def test_the_table_prints_formulas_typeset(fake, check_verdicts):
    state, _ = fake
    state["values"] = {"fig2c-critical": {"value": 0.09, "value_lo": 0.05, "value_hi": 0.12}}
    t = book_claims.claims(check_verdicts, _Results())
    assert ascii_formulas(book_claims.markdown(t)) == []  # the introduction's table
    columns = ("claim", "paper", "ours", "source", "value", "verdict", "where")
    assert ascii_formulas(book_claims.markdown(t, columns=columns)) == []  # every column, check statements included
    shown = {i for row in book_claims.ROWS for i in (*row.checks, *row.book)}
    assert all(f"`{v.id}` {v.statement}" in " ".join(t.ours) for v in check_verdicts if v.id in shown)


def _table_lines(md: str) -> list[str]:
    return [line for line in md.splitlines() if line.startswith("|")]


def test_vocabulary_and_markdown(fake):
    _, table = fake
    t = table().reset_index()
    for v in t.verdict:
        assert v.removesuffix(book_claims.RECONSTRUCTION) in book_claims.VERDICTS
    md = book_claims.markdown(t)
    lines = _table_lines(md)
    assert len(lines) == 2 + len(book_claims.ROWS)
    assert lines[0] == "| Claim of the paper | Verdict | The paper | Measured | Chapter |"  # the verdict second
    assert all(line.count(" | ") == 4 for line in lines[2:])
    assert "| Lemma 1 | **holds** (sanity check) |" in md
    assert "| **not testable here** |" in md
    assert "**holds** (sanity check, the book's reconstruction)" in md
    assert "| *synthetic:* worst ratio 1 |" in md
    assert "{doc}`15 <15_gradient_sensitivity>`" in md
    assert r"$\lVert \nabla_l \alpha \rVert_2 \le \min\{1/(4T), \sqrt 2\}$" in md
    # the table carries the class the book's stylesheet lets wrap inside the page
    assert f"````{{table}}\n:class: {book_claims.TABLE_CLASS}\n" in md and md.rstrip().endswith("````")
    css = (ROOT / "_static" / "claims.css").read_text()
    assert f"table.{book_claims.TABLE_CLASS}" in css and "white-space: normal" in css
    plain = book_claims.markdown(t, columns=("claim", "paper", "ours", "source", "value", "verdict", "where"))
    assert "````" not in plain and plain.rstrip().endswith(" |")  # the report's table: plain, for the notebook too
    piped = t.assign(paper="a | b")  # pipes inside cells are escaped
    assert all(line.count(" | ") == 4 for line in _table_lines(book_claims.markdown(piped))[2:])


def test_what_the_experiments_ran_on_is_said_once(fake):
    state, table = fake
    state["values"] = {"fig2c-critical": {"value": 0.09, "value_lo": 0.05, "value_hi": 0.12}}
    t = table().reset_index()
    run = "some/model on some-text, preset paper, 2 windows"
    md = book_claims.markdown(t)
    assert md.count(run) == 1 and run not in "\n".join(_table_lines(md))
    assert md.index(run) < md.index("| Claim of the paper")
    assert "| *model:* 0.09 [0.05, 0.12] |" in md  # each row says in a word what it was measured on
    # the report's table, which shows where each row was measured, says it in its rows instead
    full = book_claims.markdown(t, columns=("claim", "source", "verdict"))
    assert full.count(run) == len(t[t.on.str.contains("model")]) and "Measured on —" not in full


def test_collapse_is_computed_not_typed():
    value, sentence = book_claims.collapse_at_full_selection()
    assert 0 <= value <= 1e-12 and "below" in sentence


def test_missing_check_is_an_error(fake):
    with pytest.raises(KeyError, match="were not run"):
        book_claims.claims([_verdict("lem1")], _Results())


def test_write_include_records_the_table(fake, tmp_path):
    _, table = fake
    t = table().reset_index()
    path = book_claims.write_include(t, tmp_path / "sub" / "claims.md")
    assert path.read_text() == book_claims.markdown(t)
    record = json.loads(path.with_suffix(".json").read_text())
    assert record["code_sha256"] == book_claims.code_hash() and len(record["table"]) == len(book_claims.ROWS)


def test_intro_table_is_written_by_make_results_and_checked_by_the_report(fake, monkeypatch, tmp_path):
    """The introduction includes the file that `make results` writes and types in no claims table; the report
    builds the table from the same inputs and compares it with that file, but never writes it. `make results` runs
    `attnlimits results`, whose `claims` study (after the experiments) writes the include from the checks' verdicts
    and the experiments' run at the book's preset (the shipped one: shipped.summaries_of)."""
    from types import SimpleNamespace

    from attnlimits import experiments
    from attnlimits.experiments import shipped
    from attnlimits.reporting import book_results

    intro = (ROOT / "chapters" / "intro.md").read_text()
    chapter = (ROOT / "chapters" / "31_reproducibility_report.py").read_text()
    rel = book_claims.INCLUDE.relative_to(ROOT / "chapters").as_posix()
    assert re.search(r"```\{include\}\s+" + re.escape(rel) + r"\s*\n```", intro), "intro must include " + rel
    assert "| Claim of the paper |" not in intro and "| Lemma 1" not in intro
    assert "write_include" not in chapter
    assert "book_claims.claims(" in chapter and "book_claims.read_include()" in chapter
    for name in ("book_claims.check_verdicts()", "shipped.book_run("):  # the book's preset: shipped.book_run
        assert name in chapter
    makefile = (ROOT / "Makefile").read_text()
    results = re.search(r"^results:.*?(?=^\S|\Z)", makefile, flags=re.M | re.S).group(0)
    assert re.search(r"^\t\$\(BIN\)/attnlimits results(?!.*--study)", results, flags=re.M), "run every study"
    studies = list(book_results.STUDIES)
    assert studies.index("experiments") < studies.index("claims")

    calls = {}

    def run_all(**options):
        calls["checks"] = options
        return [_verdict(i) for i in checks.CHECKS]

    def results_of(model, text, preset, **options):
        calls["experiments"] = (model, text, preset)
        return _Results()

    monkeypatch.setattr(checks, "run_all", run_all)
    monkeypatch.setattr(shipped, "summaries_of", results_of)
    monkeypatch.setattr(book_claims, "chapter34", lambda res: calls.setdefault("chapter34", ({}, {})))
    monkeypatch.setattr(book_claims, "training_guidelines", lambda: calls.setdefault("guidelines", _GUIDELINES))
    monkeypatch.setattr(book_claims, "INCLUDE", tmp_path / "claims.md")
    monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path / "results"))  # no stored verdicts: the checks run
    monkeypatch.delenv(experiments.PRESET_VARIABLE, raising=False)
    study = book_results.STUDIES["claims"]
    book_results.run([(study, study.preset())], inputs=SimpleNamespace(model="model", text="text"))
    assert calls["checks"] == {"trials": book_claims.CHECK_TRIALS, "seed": book_claims.CHECK_SEED}
    assert calls["experiments"] == ("model", "text", experiments.book_preset())
    assert calls["chapter34"] == ({}, {})  # chapter 34's other trained models and controls were asked for
    assert calls["guidelines"] is _GUIDELINES  # and chapter 32's tests of the guidelines
    _, table = fake
    assert (tmp_path / "claims.md").read_text() == book_claims.markdown(table().reset_index())


def test_a_missing_include_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="`make results` writes it"):
        book_claims.read_include(tmp_path / "claims.md")


def test_read_include_reads_what_write_include_wrote(fake, tmp_path):
    _, table = fake
    t = table().reset_index()
    path = book_claims.write_include(t, tmp_path / "claims.md")
    assert book_claims.read_include(path) == book_claims.markdown(t)


def test_verdicts_replace(fake):
    """The rows are frozen dataclasses (a table cannot be edited in place by a chapter)."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        book_claims.ROWS[0].claim = "x"  # type: ignore[misc]


# ----------------------------------------------------------------------------------------------------------------
# the checks' verdicts, kept in the results cache
# ----------------------------------------------------------------------------------------------------------------
def test_check_verdicts_run_once_per_trials_and_seed(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path))
    calls = []

    def run_all(trials, seed):
        calls.append((trials, seed))
        return [_verdict(f"check-{trials}-{seed}", violations=seed)]

    monkeypatch.setattr(checks, "run_all", run_all)
    first = book_claims.check_verdicts(trials=3, seed=1)
    assert book_claims.check_verdicts(trials=3, seed=1) == first  # read back, not run again
    assert calls == [(3, 1)]
    other = book_claims.check_verdicts(trials=3, seed=2)
    assert calls == [(3, 1), (3, 2)] and other[0].violations == 2 != first[0].violations
    assert (tmp_path / "theory-checks" / "trials3-seed1" / "verdicts.pkl").is_file()


def test_check_verdicts_rerun_when_the_checks_code_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path))
    calls = []
    monkeypatch.setattr(checks, "run_all", lambda trials, seed: calls.append(1) or [_verdict("a")])
    book_claims.check_verdicts(trials=3, seed=0)
    monkeypatch.setattr(book_claims.cache, "code_hash", lambda *modules: "another version of the checks")
    book_claims.check_verdicts(trials=3, seed=0)
    assert len(calls) == 2


class _Other(_Results):
    provenance = {**_Results.provenance, "model": {"model_id": "org/Other-1B"}, "windows": list(range(8))}
    verdicts = {"fig3-plateau": paper_claims.NOT, "fig4-slope": paper_claims.INCONCLUSIVE}


def test_a_claim_measured_on_several_models_reads_each_models_verdict(fake):
    """Where one trained model reproduces a claim and another does not, the row says "depends on the model" and
    names each model's verdict and number; a model that does not decide leaves the claim undecided."""
    state, _ = fake
    verdicts = [_verdict(i) for i in checks.CHECKS]
    t = book_claims.claims(verdicts, _Results(), {"Other-1B": _Other()}).set_index("claim")
    row = t.loc["Figure 3: plateau"]
    assert row.verdict == "depends on the model"
    assert "*model:* fig3-plateau measured" in row.ours and "*Other-1B:* fig3-plateau measured" in row.ours
    assert "org/Other-1B on some-text, preset paper, 8 windows" in row.source
    assert t.loc["Figure 4: $1/T$", "verdict"] == "inconclusive"
    assert t.loc["Figure 2c", "verdict"] == "reproduced"  # both models agree
    counted = book_claims.counts(t.reset_index())["reproduction"]
    assert counted.get("depends on the model", 0) >= 1
    alone = book_claims.claims(verdicts, _Results()).set_index("claim")
    assert (
        alone.loc["Figure 3: plateau", "verdict"] == "reproduced"
        and "*model:*" not in alone.loc["Figure 3: plateau", "ours"]
    )


def test_the_n_s_guideline_reads_chapter_32s_own_test_and_each_measurement_counts_once(fake):
    """The N_s/N guideline is chapter 32's test on the training sweep, not Figure 3's verdict again; a row that reads
    a figure's measurement again (a corollary, a guideline) shows its verdict but is not counted a second time."""
    state, table = fake
    t = table()
    row = t.loc["Guideline: $N_s/N$"]
    assert row.verdict == "inconclusive" and row.value == "-0.1 [-0.3, 0.1]" and row.on == "training"
    assert "5 seeds" in row["source"] and row["where"] == "32_training_low_temperature"
    state["experiments"]["fig3-plateau"] = paper_claims.NOT
    assert table().loc["Guideline: $N_s/N$", "verdict"] == "inconclusive"  # not Figure 3's
    repeats = {c: r for c, r in zip(t.index, t.repeats, strict=True) if r}
    assert repeats == {
        r"Corollary 2 (i): $\tilde d$": r"Figure 2a: $\tilde d$",
        "Guideline: active set": "Figure 2c",
        "Guideline: temperature": "Figure 4: $1/T$",
    }
    assert all(r in t.index for r in repeats.values())
    c = book_claims.counts(t.reset_index())
    assert sum(c[book_claims.REPEATS].values()) == 3
    text = book_claims.markdown(t.reset_index())
    assert "3 rows read again a measurement counted above" in text
    assert "the measurement of Figure 2c, not counted again" in text
    unread = book_claims.claims([_verdict(i) for i in checks.CHECKS], _Results()).set_index("claim")
    assert unread.loc["Guideline: $N_s/N$", "verdict"] == "not testable here"
