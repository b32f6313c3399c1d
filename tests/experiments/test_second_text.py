"""The Experiments chapters' second text: the King James Version at chapter 34's preset, never another text."""

from __future__ import annotations

import pytest

from attnlimits.experiments import PRESET_VARIABLE, runs
from attnlimits.models import texts


@pytest.fixture
def recorded(monkeypatch):
    """runs.results replaced by a recorder of (model, text name, preset name)."""
    calls = []

    def results(model, text, preset, **options):
        calls.append((model, text if isinstance(text, str) else text.provenance.name, preset.name))
        return calls[-1]

    monkeypatch.setattr(runs, "results", results)
    return calls


def test_the_second_text_is_read_at_the_reduced_preset_beside_the_first(monkeypatch, recorded):
    monkeypatch.delenv(PRESET_VARIABLE, raising=False)
    monkeypatch.setattr(texts, "load", lambda name, allow_fallback=True: _named(name, allow_fallback))
    pair, why = runs.on_two_texts("model", "docs")
    assert why == "" and pair == [("model", "docs", "reduced"), ("model", texts.KJV, "reduced")]


def test_a_smoke_run_reads_the_second_text_at_its_own_preset(monkeypatch, recorded):
    monkeypatch.setenv(PRESET_VARIABLE, "quick")
    monkeypatch.setattr(texts, "load", lambda name, allow_fallback=True: _named(name, allow_fallback))
    assert runs.second_text("model") == (("model", texts.KJV, "quick"), "")


def test_without_the_second_text_nothing_runs_and_the_reason_is_given(monkeypatch, recorded):
    def missing(name, allow_fallback=True):
        assert not allow_fallback  # never the first text again
        raise texts.TextUnavailableError("the program 'bible' is not installed (apt-get install bible-kjv)")

    monkeypatch.setattr(texts, "load", missing)
    pair, why = runs.on_two_texts("model", "docs")
    assert pair == [] and recorded == []
    assert "King James Version" in why and "apt-get install bible-kjv" in why


class _Named:
    def __init__(self, name):
        self.provenance = type("P", (), {"name": name})()


def _named(name, allow_fallback):
    assert name == texts.KJV and not allow_fallback
    return _Named(name)
