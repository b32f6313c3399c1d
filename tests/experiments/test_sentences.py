"""A chapter's sentences are asserted for the run its prose describes and printed for any other run
(attnlimits.experiments.paper_claims.describes, assert_sentences and expect;
attnlimits.studies.several_models.report.run_id)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from attnlimits.experiments import paper_claims
from attnlimits.studies import several_models

BOOK = (paper_claims.DESCRIBED["model"], paper_claims.DESCRIBED["text"], paper_claims.DESCRIBED["preset"])


def _results(model=BOOK[0], text=BOOK[1], preset=BOOK[2]):
    """Anything with the provenance of :class:`attnlimits.experiments.Results`."""
    return SimpleNamespace(
        provenance={"model": {"model_id": model}, "text": {"name": text}, "preset": {"name": preset}}
    )


def test_describes_a_results_or_a_tuple():
    assert paper_claims.describes(_results())
    assert paper_claims.describes(BOOK)
    assert not paper_claims.describes(_results(model="gpt2"))
    assert not paper_claims.describes(_results(text="war-and-peace"))
    assert not paper_claims.describes((BOOK[0], BOOK[1], "reduced"))
    assert paper_claims.describes((BOOK[0], BOOK[1], "reduced"), {"preset": "reduced"})
    assert not paper_claims.describes(BOOK, {"preset": "reduced"})


def test_describes_rejects_what_it_cannot_read():
    with pytest.raises(ValueError, match="described: unknown entries \\['models'\\]"):
        paper_claims.describes(BOOK, {"models": "x"})
    with pytest.raises(ValueError, match="run: .*2-tuple"):
        paper_claims.describes(BOOK[:2])
    with pytest.raises(ValueError, match="run: .*got str"):
        paper_claims.describes("gpt2")


def test_holding_sentences_pass_silently(capsys):
    holds = paper_claims.assert_sentences({"a": True, "b": np.bool_(True)}, described=True)
    assert holds.to_dict() == {"a": True, "b": True} and holds.name == "holds" and holds.dtype == bool
    assert capsys.readouterr().out == ""


def test_a_failing_sentence_raises_only_for_the_described_run(capsys):
    statements = {"softmax decays fastest": True, "sparsemax trains at T = 0.01": False}
    with pytest.raises(AssertionError, match="sparsemax trains at T = 0.01"):
        paper_claims.assert_sentences(statements, described=True)
    holds = paper_claims.assert_sentences(statements, described=False, about="SmolLM2 on pydoc-topics")
    out = capsys.readouterr().out
    assert "the text describes SmolLM2 on pydoc-topics" in out and "1 of its sentences" in out
    assert "- sparsemax trains at T = 0.01" in out and "softmax decays fastest" not in out
    assert holds.to_dict() == statements


def test_a_sentence_must_be_one_bool():
    with pytest.raises(TypeError, match="statements: .*'all heads'"):
        paper_claims.assert_sentences({"all heads": pd.Series([True, False])}, described=False)


def test_expect_asserts_verdicts_only_for_the_described_run(capsys):
    table = pd.DataFrame({"key": ["fig2a", "fig4"], "verdict": [paper_claims.REPRODUCED, paper_claims.NOT]})
    want = {"fig2a": paper_claims.REPRODUCED, "fig4": paper_claims.REPRODUCED}
    with pytest.raises(AssertionError, match="fig4 is 'reproduced' \\(measured: 'not reproduced'\\)"):
        paper_claims.expect(_results(), table, want)
    verdicts = paper_claims.expect(_results(model="gpt2"), table, want)
    assert verdicts == {"fig2a": paper_claims.REPRODUCED, "fig4": paper_claims.NOT}
    out = capsys.readouterr().out
    assert BOOK[0] in out and "fig4 is 'reproduced'" in out and "fig2a" not in out
    assert paper_claims.expect(_results(), table, {"fig4": paper_claims.NOT}) == verdicts


def test_a_comparison_run_is_described_by_its_present_trained_models():
    entry = {"present": True, "trained": True}
    manifest = {
        "preset": {"name": "reduced"},
        "text": {"name": "pydoc-topics"},
        "models": [
            {**entry, "label": "SmolLM2-135M"},
            {**entry, "label": "SmolLM2-135M (untrained)", "trained": False},
            {**entry, "label": "Gemma-3-270M"},
            {**entry, "label": "GPT-2", "present": False},
        ],
    }
    assert several_models.report.trained_labels(manifest) == ["SmolLM2-135M", "Gemma-3-270M"]
    run = several_models.report.run_id(manifest)
    assert run == (("SmolLM2-135M", "Gemma-3-270M"), "pydoc-topics", "reduced")
    chapter_34 = {"model": ("SmolLM2-135M", "Gemma-3-270M"), "preset": "reduced"}
    assert paper_claims.describes(run, chapter_34)
    manifest["models"][3]["present"] = True  # GPT-2 loaded: the prose no longer describes the run
    assert not paper_claims.describes(several_models.report.run_id(manifest), chapter_34)
    assert several_models.report.run_id({**manifest, "text": None})[1] is None
