"""A chapter's sentences are asserted for the run its prose describes and printed for any other run
(attnlimits.infra.sentences: describes, assert_sentences and expect; attnlimits.studies.several_models.report.run_id
and attnlimits.experiments.paper_claims.rows_read, what a run's sentences on its rows read)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from attnlimits.experiments import PRESETS, paper_claims
from attnlimits.experiments.summaries import Summaries
from attnlimits.infra import sentences
from attnlimits.infra.verdicts import NOT_REPRODUCED, REPRODUCED
from attnlimits.studies import several_models

BOOK = (sentences.DESCRIBED["model"], sentences.DESCRIBED["text"], sentences.DESCRIBED["preset"])


def _results(model=BOOK[0], text=BOOK[1], preset=BOOK[2]):
    """Anything with the provenance of :class:`attnlimits.experiments.Results`."""
    return SimpleNamespace(
        provenance={"model": {"model_id": model}, "text": {"name": text}, "preset": {"name": preset}}
    )


def test_describes_a_results_or_a_tuple():
    assert sentences.describes(_results())
    assert sentences.describes(BOOK)
    assert not sentences.describes(_results(model="gpt2"))
    assert not sentences.describes(_results(text="war-and-peace"))
    assert not sentences.describes((BOOK[0], BOOK[1], "reduced"))
    assert sentences.describes((BOOK[0], BOOK[1], "reduced"), {"preset": "reduced"})
    assert not sentences.describes(BOOK, {"preset": "reduced"})


def test_describes_rejects_what_it_cannot_read():
    with pytest.raises(ValueError, match="described: unknown entries \\['models'\\]"):
        sentences.describes(BOOK, {"models": "x"})
    with pytest.raises(ValueError, match="run: .*2-tuple"):
        sentences.describes(BOOK[:2])
    with pytest.raises(ValueError, match="run: .*got str"):
        sentences.describes("gpt2")


def test_holding_sentences_pass_silently(capsys):
    holds = sentences.assert_sentences({"a": True, "b": np.bool_(True)}, described=True)
    assert holds.to_dict() == {"a": True, "b": True} and holds.name == "holds" and holds.dtype == bool
    assert capsys.readouterr().out == ""


def test_a_failing_sentence_raises_only_for_the_described_run(capsys):
    statements = {"softmax decays fastest": True, "sparsemax trains at T = 0.01": False}
    with pytest.raises(AssertionError, match="sparsemax trains at T = 0.01"):
        sentences.assert_sentences(statements, described=True)
    holds = sentences.assert_sentences(statements, described=False, about="SmolLM2 on pydoc-topics")
    out = capsys.readouterr().out
    assert "the text describes SmolLM2 on pydoc-topics" in out and "1 of its sentences" in out
    assert "- sparsemax trains at T = 0.01" in out and "softmax decays fastest" not in out
    assert holds.to_dict() == statements


def test_a_sentence_must_be_one_bool():
    with pytest.raises(TypeError, match="statements: .*'all heads'"):
        sentences.assert_sentences({"all heads": pd.Series([True, False])}, described=False)


def test_expect_asserts_verdicts_only_for_the_described_run(capsys):
    table = pd.DataFrame({"key": ["fig2a", "fig4"], "verdict": [REPRODUCED, NOT_REPRODUCED]})
    want = {"fig2a": REPRODUCED, "fig4": REPRODUCED}
    with pytest.raises(AssertionError, match="fig4 is 'reproduced' \\(measured: 'not reproduced'\\)"):
        sentences.expect(_results(), table, want)
    verdicts = sentences.expect(_results(model="gpt2"), table, want)
    assert verdicts == {"fig2a": REPRODUCED, "fig4": NOT_REPRODUCED}
    out = capsys.readouterr().out
    assert BOOK[0] in out and "fig4 is 'reproduced'" in out and "fig2a" not in out
    assert sentences.expect(_results(), table, {"fig4": NOT_REPRODUCED}) == verdicts


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
    assert sentences.describes(run, chapter_34)
    manifest["models"][3]["present"] = True  # GPT-2 loaded: the prose no longer describes the run
    assert not sentences.describes(several_models.report.run_id(manifest), chapter_34)
    assert several_models.report.run_id({**manifest, "text": None})[1] is None


def test_rows_read_names_each_sample_of_the_run():
    from attnlimits.experiments.row_sample import SAMPLE_FROM, row_samples

    run = SimpleNamespace(preset=SimpleNamespace(row_stride=32))
    assert paper_claims.rows_read(run) == {**row_samples(32), "from": SAMPLE_FROM}
    # a shipped run (its windows' summaries) reads its preset from its provenance
    paper = PRESETS["paper"]
    shipped = Summaries({}, {"preset": paper.as_dict(), "windows": [0, 1]})
    assert paper_claims.rows_read(shipped) == {**row_samples(paper.row_stride), "from": SAMPLE_FROM}
    assert paper.row_stride is not None and row_samples(paper.row_stride) != row_samples(None)
