"""attnlimits.report: the claims table's verdict rules, its vocabulary, and one source for the reproducibility
report and the introduction (the introduction includes the file the report writes; no claims table is typed in)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from attnlimits import checks, report, reproduction
from attnlimits.checks.registry import Verdict

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT_KEYS = (
    "fig2a-distance-linear",
    "fig2a-expectation-linear",
    "fig2a-bound",
    "fig2b-plateau",
    "fig2b-convergence",
    "fig2c-critical",
    "fig3-plateau",
    "fig3-bounds",
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


@pytest.fixture
def fake(monkeypatch):
    """Every check holds and every experimental claim is reproduced, unless a test says otherwise."""
    state = {"violated": set(), "experiments": {k: reproduction.REPRODUCED for k in EXPERIMENT_KEYS}}

    def claims(res):
        rows = [{"key": k, "measured": f"{k} measured", "verdict": v} for k, v in state["experiments"].items()]
        return pd.DataFrame(rows)

    monkeypatch.setattr(reproduction, "claims", claims)

    def table():
        verdicts = [_verdict(i, violations=int(i in state["violated"])) for i in checks.CHECKS]
        return report.claims(verdicts, _Results()).set_index("claim")

    return state, table


def test_rows_name_registered_checks_and_known_claims():
    for row in report.ROWS:
        assert set(row.checks) | set(row.book) <= set(checks.CHECKS), row.claim
        assert set(row.experiments) <= set(EXPERIMENT_KEYS), row.claim
        assert (ROOT / "chapters" / f"{row.where}.py").is_file(), row.where
    claims = [r.claim for r in report.ROWS]
    assert len(claims) == len(set(claims))
    for needed in ("Lemma 1", "Corollary 1", "Corollary 3", "Multi-head coverage", "Figure 2c", "Figure 4: 1/T"):
        assert needed in claims


def test_verdict_rules(fake):
    state, table = fake
    t = table()
    assert t.loc["Lemma 1", "verdict"] == "reproduced"
    assert t.loc["Theorem 1: d_max", "verdict"] == "reproduced (the book's reconstruction)"
    assert t.loc["Corollary 2 (ii)", "verdict"] == "reproduced"  # computed: E = d~ = 0 at N = L
    assert t.loc["Guideline: normalisers", "verdict"] == "not testable here"
    assert "some/model on some-text, preset paper, 2 windows" in t.loc["Figure 2c", "source"]
    # the paper's statement fails and the book's replacement holds: corrected, or for a reconstruction, refuted
    state["violated"] = {"cor3-printed", "thm2-upper-reconstructed"}
    t = table()
    assert t.loc["Corollary 3", "verdict"] == "corrected"
    assert t.loc["Theorem 2: upper bound", "verdict"] == "not reproduced (the book's reconstruction)"
    # ... and when the replacement fails too, nothing is corrected
    state["violated"] |= {"cor3-spectral"}
    assert table().loc["Corollary 3", "verdict"] == "not reproduced"
    state["violated"] = {"lem1"}
    assert table().loc["Lemma 1", "verdict"] == "not reproduced"
    # experimental rows take reproduction's verdict; a guideline follows its figure
    state["experiments"]["fig2c-critical"] = reproduction.DIFFERENT
    t = table()
    assert t.loc["Figure 2c", "verdict"] == t.loc["Guideline: active set", "verdict"] == reproduction.DIFFERENT
    # two measurements that disagree never add up to a reproduction
    state["experiments"]["fig4-drop"] = reproduction.NOT
    assert table().loc["Guideline: temperature", "verdict"] == "not reproduced"


def test_vocabulary_and_markdown(fake):
    _, table = fake
    t = table().reset_index()
    for v in t.verdict:
        assert v.removesuffix(report.RECONSTRUCTION) in report.VERDICTS
    md = report.markdown(t)
    lines = md.strip().splitlines()
    assert len(lines) == 2 + len(report.ROWS)
    assert all(line.count(" | ") == 3 for line in lines[2:])  # pipes inside cells are escaped
    assert "{doc}`15_gradient_sensitivity`" in md
    assert "\\|\\|grad_l alpha\\|\\|_2" in md


def test_collapse_is_computed_not_typed():
    value, sentence = report.collapse_at_full_selection()
    assert 0 <= value <= 1e-12 and "below" in sentence


def test_missing_check_is_an_error(fake):
    with pytest.raises(KeyError, match="were not run"):
        report.claims([_verdict("lem1")], _Results())


def test_write_include_records_the_table(fake, tmp_path):
    _, table = fake
    t = table().reset_index()
    path = report.write_include(t, tmp_path / "sub" / "claims.md")
    assert path.read_text() == report.markdown(t)
    record = json.loads(path.with_suffix(".json").read_text())
    assert record["code_sha256"] == report.code_hash() and len(record["table"]) == len(report.ROWS)


def test_intro_table_is_written_by_make_results_and_checked_by_the_report():
    """The introduction includes the file that `make results` writes and types in no claims table; the report
    builds the table from the same inputs and compares it with that file, but never writes it."""
    intro = (ROOT / "chapters" / "intro.md").read_text()
    chapter = (ROOT / "chapters" / "31_reproducibility_report.py").read_text()
    rel = report.INCLUDE.relative_to(ROOT / "chapters").as_posix()
    assert re.search(r"```\{include\}\s+" + re.escape(rel) + r"\s*\n```", intro), "intro must include " + rel
    assert "| Claim of the paper |" not in intro and "| Lemma 1" not in intro
    assert "write_include" not in chapter
    assert "al.report.claims(" in chapter and "al.report.read_include()" in chapter
    for name in ("report.CHECK_TRIALS", "report.CHECK_SEED", "experiments.book_preset()"):
        assert f"al.{name}" in chapter
    makefile = (ROOT / "Makefile").read_text()
    results = re.search(r"^results:.*?(?=^\S|\Z)", makefile, flags=re.M | re.S).group(0)
    for call in ("r.write_include(r.claims(", "al.checks.run_all(trials=r.CHECK_TRIALS, seed=r.CHECK_SEED)"):
        assert call in results, f"`make results` must write the include: {call}"
    assert "al.experiments.book_preset()" in results


def test_a_missing_include_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="`make results` writes it"):
        report.read_include(tmp_path / "claims.md")


def test_read_include_reads_what_write_include_wrote(fake, tmp_path):
    _, table = fake
    t = table().reset_index()
    path = report.write_include(t, tmp_path / "claims.md")
    assert report.read_include(path) == report.markdown(t)


def test_verdicts_replace(fake):
    """The rows are frozen dataclasses (a table cannot be edited in place by a chapter)."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.ROWS[0].claim = "x"  # type: ignore[misc]
