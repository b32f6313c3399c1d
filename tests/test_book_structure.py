"""The book's structure: paired chapters in sync and without outputs, a table of contents that matches the files."""

from __future__ import annotations

import json
from pathlib import Path

import jupytext
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
PY_CHAPTERS = sorted(p for p in CHAPTERS.glob("*.py") if "# %%" in p.read_text())
NOTEBOOKS = sorted(CHAPTERS.glob("*.ipynb"))


def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [ch["file"] for ch in part["chapters"]]
    return files


def test_every_chapter_is_a_pair():
    assert PY_CHAPTERS, "no py:percent chapters found"
    assert {p.stem for p in PY_CHAPTERS} == {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("py", PY_CHAPTERS, ids=lambda p: p.stem)
def test_pair_in_sync(py: Path):
    nb_path = py.with_suffix(".ipynb")
    assert nb_path.exists(), f"{py.name} has no paired .ipynb: run `make sync`"
    assert _cells(jupytext.read(py)) == _cells(jupytext.read(nb_path)), (
        f"{py.name} and {nb_path.name} differ: run `make sync`"
    )


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_committed_without_outputs(nb_path: Path):
    nb = json.loads(nb_path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [], f"{nb_path.name} carries outputs"
            assert cell["execution_count"] is None, f"{nb_path.name} carries execution counts"


def test_toc_matches_chapter_files():
    listed = set(_toc_files())
    for entry in listed:
        assert any((ROOT / f"{entry}{ext}").exists() for ext in (".md", ".ipynb")), f"_toc.yml names missing {entry}"
    pages = {f"chapters/{p.stem}" for p in list(CHAPTERS.glob("*.md")) + NOTEBOOKS}
    assert pages - listed == set(), f"chapters missing from _toc.yml: {sorted(pages - listed)}"


def test_toc_has_the_three_parts():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    captions = [part["caption"] for part in toc["parts"]]
    assert captions == ["Theory", "Experiments on a pretrained model", "Beyond the paper"]
    assert all(part["chapters"] for part in toc["parts"])


def test_config_executes_with_a_long_enough_timeout():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cfg["execute"]["execute_notebooks"] == "cache"
    assert cfg["execute"]["timeout"] >= 300
    assert cfg["only_build_toc_files"] is True
    assert {"amsmath", "dollarmath"} <= set(cfg["parse"]["myst_enable_extensions"])
    assert cfg["bibtex_bibfiles"] == ["references.bib"]
