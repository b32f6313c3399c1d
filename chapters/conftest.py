"""``pytest --nbmake chapters --fill-book-cache`` (what ``make test`` runs) hands every chapter it ran to the book
build: each notebook that ran without error goes into the book's execution cache (``_build/.jupyter_cache``, the one ``jupyter-book build`` reads with
``execute_notebooks: cache``), so that ``make book`` after ``make test`` renders the outputs nbmake just computed
instead of running every chapter a second time (under ``pytest -n``, one worker writes into it at a time). The
cache matches a notebook by its code cells and their
metadata, so the executed cells are stored under the source notebook's own metadata (nbmake adds timings); a
chapter edited afterwards no longer matches and is executed by the book build as before."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
import pytest
from filelock import FileLock

BOOK_CACHE = Path(__file__).resolve().parent.parent / "_build" / ".jupyter_cache"


def executed_like_source(source: nbformat.NotebookNode, executed: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``source`` with the outputs and execution counts of ``executed`` (the same notebook, run), keeping the
    source's metadata, so that it hashes as the book build hashes the file on disk."""
    out = copy.deepcopy(source)
    code = [c for c in out.cells if c.cell_type == "code"]
    ran = [c for c in executed.cells if c.cell_type == "code"]
    if [c.source for c in code] != [c.source for c in ran]:
        raise ValueError("executed: its code cells are not those of the source notebook")
    for cell, result in zip(code, ran, strict=True):
        cell.outputs = result.outputs
        cell.execution_count = result.get("execution_count")
    return out


def pytest_addoption(parser):
    parser.addoption(
        "--fill-book-cache",
        action="store_true",
        default=False,
        help="store every chapter nbmake ran without error in the book build's execution cache (_build/.jupyter_cache)",
    )


def pytest_configure(config):
    if not (config.getoption("nbmake", default=False) and config.getoption("fill_book_cache")):
        return
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from nbmake import nb_run

    run_notebook = nb_run.NotebookRun.execute

    def execute_and_cache(self):
        result = run_notebook(self)
        if result.error is None:
            source = nbformat.read(str(self.filename), nbformat.NO_CONVERT)
            nb = executed_like_source(source, result.nb)
            BOOK_CACHE.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(BOOK_CACHE.parent / ".jupyter_cache.lock"):  # pytest -n: one writer at a time
                cache = get_cache(str(BOOK_CACHE))
                cache.cache_notebook_bundle(
                    CacheBundleIn(nb, str(Path(self.filename).resolve())), check_validity=False, overwrite=True
                )
        return result

    mp = pytest.MonkeyPatch()
    mp.setattr(nb_run.NotebookRun, "execute", execute_and_cache)
    config.add_cleanup(mp.undo)
