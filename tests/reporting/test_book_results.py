"""The results pipeline's scheduling (:func:`attnlimits.reporting.book_results.run`): every part once, longest
first, in worker processes with one job and their share of the threads when given several jobs, each study's
collect step fed its parts' values in their order; and the same tables for any number of jobs."""

from __future__ import annotations

import importlib
import os

import joblib
import pandas as pd
import pipeline_parts
import pytest

from attnlimits import experiments
from attnlimits.infra import cache
from attnlimits.infra.pipeline import Part, Study
from attnlimits.reporting import book_results as br
from attnlimits.studies import training


def _study(name: str, parts: list[Part], seen: dict) -> Study:
    """A study of ``parts`` whose collect step keeps its values in ``seen[name]``."""

    def collect(preset, values, inputs, n_jobs, progress):
        seen[name] = values
        return f"{name}: {len(values)} parts"

    return Study(name, name, lambda: ["p"], lambda: "p", lambda preset: parts, collect)


def _pipeline(seen: dict) -> list[tuple[Study, str]]:
    tag = pipeline_parts.record
    first = _study("first", [Part("a", 1.0, tag, ("a",)), Part("b", 30.0, tag, ("b",))], seen)
    second = _study("second", [Part("c", 20.0, tag, ("c",)), Part("d", 0.5, tag, ("d",))], seen)
    return [(first, "p"), (second, "p")]


def test_one_job_runs_every_part_here_longest_first(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path))
    monkeypatch.setattr(pipeline_parts, "STARTED", [])
    seen = {}
    done = br.run(_pipeline(seen), n_jobs=1, progress=False)
    assert pipeline_parts.STARTED == ["b", "c", "a", "d"]
    assert [[v["tag"] for v in seen[name]] for name in ("first", "second")] == [["a", "b"], ["c", "d"]]
    assert {v["pid"] for vs in seen.values() for v in vs} == {os.getpid()}
    assert [where for _, _, where, _ in done] == ["first: 2 parts", "second: 2 parts"]


def test_several_jobs_run_the_parts_in_worker_processes_with_the_callers_variables(monkeypatch, tmp_path):
    lines = []
    for run in ("one", "two"):  # a reused worker must see the variable of the second run, not the first's
        monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path / run))
        seen = {}
        br.run(_pipeline(seen), n_jobs=2, progress="lines", say=lines.append)
        values = [v for name in ("first", "second") for v in seen[name]]
        assert [v["tag"] for v in values] == ["a", "b", "c", "d"]  # each study's values in its parts' order
        assert os.getpid() not in {v["pid"] for v in values}
        assert {v["n_jobs"] for v in values} == {1}
        assert {v["threads"] for v in values} == {max(1, joblib.cpu_count() // 2)}
        assert {v["results"] for v in values} == {str(tmp_path / run)}
    assert sorted(line.split(": ")[1].split(" (")[0] for line in lines) == sorted(["a", "b", "c", "d"] * 2)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_failing_part_is_named_in_the_error(n_jobs):
    seen = {}
    tag = pipeline_parts.record
    study = _study("s", [Part("fine", 1.0, tag, ("x",)), Part("broken", 2.0, pipeline_parts.fail)], seen)
    with pytest.raises(ValueError, match="no such thing") as caught:
        br.run([(study, "p")], n_jobs=n_jobs, progress=False)
    assert "in the part 'broken' (p) of the results pipeline" in "".join(getattr(caught.value, "__notes__", []))


def test_the_tables_do_not_depend_on_the_number_of_jobs(monkeypatch, tmp_path):
    """The quick experiments (each window a part) and training, once here with one job and once in two worker
    processes (the offline model and text, loaded in each process): the same tables, but for the times they
    record. A worker runs torch on fewer threads, which may sum a float32 product in another order: floats agree to
    float32 rounding (seen: 1e-7 relative), integers, counts and words exactly."""
    chosen = [(br.STUDIES[name], "quick") for name in ("experiments", "training")]
    for jobs in (1, 2):
        monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path / f"jobs{jobs}"))
        br.run(chosen, n_jobs=jobs, progress=False)
    inputs = br.Inputs()
    windows = experiments.get_preset("quick").windows
    for folder in [
        *(
            experiments.window_folder(inputs.model, inputs.text, "quick", w, exclude_sink=s, root="")
            for w in range(windows)
            for s in (0, 1)
        ),
        *(f"training/quick/{name}" for name, _, _ in training.jobs("quick")),
    ]:
        tables = sorted((tmp_path / "jobs1" / folder).glob("*.csv"))
        assert tables, folder
        for table in tables:
            other = tmp_path / "jobs2" / folder / table.name
            one, two = (pd.read_csv(t).drop(columns="seconds", errors="ignore") for t in (table, other))
            floats = list(one.select_dtypes("float").columns)
            pd.testing.assert_frame_equal(one.drop(columns=floats), two.drop(columns=floats), check_exact=True)
            pd.testing.assert_frame_equal(one[floats], two[floats], rtol=1e-5, atol=1e-9, obj=str(other))


#: Each study's declaration in the pipeline, and the modules whose code its results cache keys on.
DECLARED = {
    "attnlimits.experiments.pipeline": ("experiments",),
    "attnlimits.studies.training.pipeline": ("attnlimits.studies.training.study",),
    "attnlimits.studies.alternatives.pipeline": ("attnlimits.studies.alternatives.study",),
    "attnlimits.studies.several_models.pipeline": ("attnlimits.studies.several_models.study",),
    "attnlimits.studies.long_context.pipeline": ("attnlimits.studies.long_context.study",),
    "attnlimits.reporting.claims_pipeline": ("attnlimits.theory.checks", "attnlimits.reporting.book_claims"),
}


def test_the_pipeline_is_each_studys_own_declaration_in_order():
    assert list(br.STUDIES.values()) == [importlib.import_module(name).STUDY for name in DECLARED]


@pytest.mark.parametrize("declared", DECLARED)
def test_a_studys_declaration_stays_out_of_its_results_cache_key(declared):
    """A study's results do not go stale when its place in the pipeline changes (nor when the chapters' preset
    variable is read otherwise): the study does not import its declaration, the declaration imports the study."""
    computes = experiments.code() if DECLARED[declared] == ("experiments",) else DECLARED[declared]
    key = cache.dependencies(*computes)
    assert not [m for m in key if m.endswith("pipeline") or m == "attnlimits.studies.presets"], key
