"""The chapters' nbmake runs fill the book build's execution cache (chapters/conftest.py): a notebook nbmake ran is
found by the cache exactly as the book build looks the file up, and an edited notebook is not."""

import importlib.util
from pathlib import Path

import nbformat
import pytest
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from nbmake.nb_run import NotebookRun

_spec = importlib.util.spec_from_file_location(
    "chapters_conftest", Path(__file__).resolve().parents[2] / "chapters" / "conftest.py"
)
chapters_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chapters_conftest)


@pytest.fixture
def notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A page"),
        nbformat.v4.new_code_cell("x = 6 * 7", metadata={"mystnb": {"image": {"alt": "none"}}}),
        nbformat.v4.new_code_cell("print(x)"),
    ]
    path = tmp_path / "page.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_a_notebook_nbmake_ran_is_found_as_the_book_build_reads_it(notebook, tmp_path):
    result = NotebookRun(notebook, 60).execute()
    assert result.error is None
    source = nbformat.read(str(notebook), nbformat.NO_CONVERT)
    cache = get_cache(str(tmp_path / "cache"))
    # nbmake records timings in the cells' metadata: stored as it ran, the notebook would never match
    cache.cache_notebook_bundle(CacheBundleIn(result.nb, str(notebook)), check_validity=False)
    with pytest.raises(KeyError):
        cache.match_cache_notebook(source)
    stored = chapters_conftest.executed_like_source(source, result.nb)
    cache.cache_notebook_bundle(CacheBundleIn(stored, str(notebook)), check_validity=False, overwrite=True)
    _, merged = cache.merge_match_into_notebook(nbformat.read(str(notebook), nbformat.NO_CONVERT))
    assert merged.cells[2].outputs[0]["text"] == "42\n" and merged.cells[0].cell_type == "markdown"
    edited = nbformat.read(str(notebook), nbformat.NO_CONVERT)
    edited.cells[2].source = "print(x + 1)"
    with pytest.raises(KeyError):
        cache.match_cache_notebook(edited)
    with pytest.raises(ValueError, match="not those of the source"):
        chapters_conftest.executed_like_source(edited, result.nb)
