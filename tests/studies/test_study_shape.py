"""Every study has one shape: a preset registry, ``results(...)`` returning a typed result that saves and loads its
tables, and a report module for the chapter."""

from __future__ import annotations

import importlib
import importlib.resources
import inspect
import typing

import pytest

from attnlimits import studies
from attnlimits.infra import presets


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
