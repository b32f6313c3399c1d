"""Every study has one shape: a preset registry, ``results(...)`` returning a typed result that saves and loads its
tables, a report module for the chapter and a pipeline module declaring its place in ``attnlimits results``; the
Beyond chapters read their preset through :func:`attnlimits.studies.book_preset`."""

from __future__ import annotations

import importlib
import importlib.resources
import inspect
import typing
from pathlib import Path

import pytest

from attnlimits import studies
from attnlimits.infra import presets
from attnlimits.infra.pipeline import Study
from attnlimits.reporting import book_results

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"


@pytest.mark.parametrize("name", studies.MODULES)
def test_a_study_has_presets_results_and_a_report(name):
    study = importlib.import_module(f"attnlimits.studies.{name}")
    assert isinstance(study.PRESETS, presets.Registry) and len(study.PRESETS) >= 2
    for preset in study.PRESETS:
        assert study.get_preset(preset).name == preset
    with pytest.raises(ValueError, match="preset"):
        study.get_preset("no-such-preset")
    parameters = inspect.signature(study.results).parameters
    assert {"preset", "root", "progress"} <= set(parameters), f"{name}.results{inspect.signature(study.results)}"
    result = typing.get_type_hints(study.results)["return"]
    assert callable(getattr(result, "save", None)) and isinstance(inspect.getattr_static(result, "load"), classmethod)
    assert inspect.ismodule(study.report) and study.report.__name__ == f"attnlimits.studies.{name}.report"


def test_every_study_package_is_listed():
    found = {p.parent.name for p in importlib.resources.files(studies).glob("*/study.py")}
    assert found == set(studies.MODULES)


@pytest.mark.parametrize("name", studies.MODULES)
def test_a_study_declares_its_place_in_the_results_pipeline(name):
    declared = importlib.import_module(f"attnlimits.studies.{name}.pipeline").STUDY
    assert isinstance(declared, Study) and book_results.STUDIES[declared.name] is declared
    study = importlib.import_module(f"attnlimits.studies.{name}")
    assert list(declared.presets()) == list(study.PRESETS)


def test_the_chapters_preset_is_read_from_its_variable(monkeypatch):
    monkeypatch.delenv(studies.PRESET_VARIABLE, raising=False)
    assert studies.book_preset() == "reduced"
    monkeypatch.setenv(studies.PRESET_VARIABLE, "full")
    assert studies.book_preset() == "full"
    monkeypatch.setenv(studies.PRESET_VARIABLE, "huge")
    with pytest.raises(
        ValueError, match=r"ATTNLIMITS_PRESET: must be one of \['reduced', 'full', 'quick'\], got 'huge'"
    ):
        studies.book_preset()


@pytest.mark.parametrize(
    "chapter", ["32_training_low_temperature", "33_alternative_normalizers", "36_recent_normalizers"]
)
def test_the_beyond_chapters_read_their_preset_through_the_library(chapter):
    source = (CHAPTERS / f"{chapter}.py").read_text()
    assert "studies.book_preset()" in source and "environ" not in source
