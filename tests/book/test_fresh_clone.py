"""Every way into the book works from a fresh clone, in any order: a chapter that may compute a results cache
allows itself the time (nbmake and Jupyter Book read the notebook's own timeout), `make book` fills the cache
first as `make test` does, and `make test` runs one Experiments chapter from an empty cache."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
#: A call that reads a study's results from the cache, computing them when they are missing (each study's
#: ``results``, chapter 35's ``book_results``, and the Experiments chapters' ``shipped.book_run``, which reads the
#: shipped results for the book's model and text and computes them for any other): minutes on 2 cores for the
#: paper preset.
COMPUTES = re.compile(
    r"\b(?:experiments|training|several_models|alt|alternatives|long_context)\.(?:book_)?results\(|\bshipped\.book_run\("
)
#: The longest a first computation may take on a slow 2-core machine (the paper preset with and without the sink
#: took 620-1,350 s where measured).
NEEDED = 1800


def _source(nb: dict) -> str:
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_chapter_that_computes_allows_itself_the_time(path):
    nb = json.loads(path.read_text())
    if not COMPUTES.search(_source(nb)):
        pytest.skip("computes no results cache")
    meta = nb["metadata"]
    nbmake = meta.get("execution", {}).get("timeout", 0)
    book = meta.get("mystnb", {}).get("execution_timeout", 0)
    assert nbmake >= NEEDED, f"{path.name}: metadata execution.timeout (nbmake) is {nbmake} s, needs >= {NEEDED}"
    assert book >= NEEDED, f"{path.name}: metadata mystnb.execution_timeout (Jupyter Book) is {book} s"
    # the .py half carries the same header (jupytext keeps both metadata keys)
    header = path.with_suffix(".py").read_text().split("# ---", 2)[1]
    assert f"timeout: {nbmake}" in header and f"execution_timeout: {book}" in header, path.name


def test_the_heavy_chapters_were_found():
    heavy = [p.stem for p in CHAPTERS if COMPUTES.search(_source(json.loads(p.read_text())))]
    studies = ("22_distance_vs_length", "23_critical_n", "31_reproducibility_report", "32_training_low_temperature")
    assert {*studies, "33_alternative_normalizers", "34_several_models", "35_long_context"} <= set(heavy)


def _target(makefile: str, name: str) -> tuple[str, str]:
    """(prerequisites, recipe) of a Makefile target."""
    m = re.search(rf"^{name}:([^\n]*)\n((?:\t[^\n]*\n)*)", makefile, re.M)
    assert m, f"no target {name}"
    return m.group(1), m.group(2)


def test_make_book_fills_the_cache_first_and_make_test_runs_a_chapter_from_an_empty_one():
    makefile = (ROOT / "Makefile").read_text()
    assert "claims" in _target(makefile, "book")[0].split()  # the claims table, the one thing not shipped
    recipe = _target(makefile, "test")[1]
    assert recipe.index("test-fresh-chapter") < recipe.index("$(MAKE) claims")  # before the cache exists
    assert recipe.index("check-results audit") < recipe.index("--nbmake chapters")  # the shipped results, checked
    fresh = _target(makefile, "test-fresh-chapter")[1]
    assert "ATTNLIMITS_RESULTS=$$fresh" in fresh and "mktemp -d" in fresh
    assert "ATTNLIMITS_EXPERIMENTS_PRESET=quick" in fresh and "--nbmake chapters/" in fresh


def test_the_book_run_reads_the_chosen_preset():
    import inspect

    from attnlimits.experiments import shipped

    source = inspect.getsource(shipped.book_run)
    assert "preset = book_preset()" in source and source.count("summaries_of(loaded, text_read, preset") == 2


@pytest.mark.parametrize("path", [p for p in CHAPTERS if p.stem[:2] in {"22", "23", "24", "25", "31"}], ids=str)
def test_the_experiments_chapters_read_the_chosen_preset(path):
    source = _source(json.loads(path.read_text()))
    assert "shipped.book_run(" in source
    assert not re.search(r"\.results\(", source)
