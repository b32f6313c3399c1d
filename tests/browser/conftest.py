"""Fixtures of the browser tests: a headless Chromium (the system's, driven by Playwright) and the built book.

The tests marked `browser` are deselected by the plain `pytest` (pyproject.toml) and run by `make check-book`.
Without a built book or without Chromium they skip with one line saying how to enable them; with CI=true that is
a failure instead, so that CI cannot pass without having looked at the book.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from bookcheck import HTML, ROOT

ENABLE = "run `make book`, install Chromium (`apt-get install chromium`), then `make check-book`"


def chromium() -> str | None:
    """The system Chromium ($CHROMIUM, or chromium on the PATH); Playwright's own browser download is not used."""
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        path = candidate and shutil.which(candidate)
        if path:
            return path
    return None


def missing(needs_book: bool) -> str | None:
    """What the browser tests lack on this machine (None: nothing)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package playwright (make setup)"
    if chromium() is None:
        return "Chromium"
    if needs_book and not (HTML / "index.html").is_file():
        return f"the built book ({HTML.relative_to(ROOT)}/index.html is missing)"
    return None


def pytest_collection_finish(session):
    """Say once, before any test runs, why the selected browser tests cannot run: a skip (exit 0) for a reader,
    a failure under CI=true."""
    selected = [item for item in session.items if item.get_closest_marker("browser")]
    if not selected:
        return
    reason = missing(needs_book=any(item.path.name == "test_book_pages.py" for item in selected))
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.exit(f"browser tests cannot run without {reason} (CI=true makes this a failure): {ENABLE}", 1)
    pytest.exit(f"browser tests skipped, they need {reason}: {ENABLE}", 0)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser tests cannot run: {reason} (CI=true makes this a failure; {ENABLE})", pytrace=False)
    pytest.skip(f"browser tests need {reason}: {ENABLE}")


@pytest.fixture(scope="session")
def browser_context():
    """A Chromium browser context, 1400 px wide (the width at which the theme shows both sidebars)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the Python package playwright (make setup)")
    path = chromium()
    if path is None:
        _unavailable("Chromium")
    with sync_playwright() as p:
        # Root (as in CI) cannot use Chromium's sandbox.
        browser = p.chromium.launch(executable_path=path, chromium_sandbox=False, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        yield context
        context.close()
        browser.close()


@pytest.fixture(scope="session")
def built_book() -> Path:
    """The HTML build of the book (`make book`)."""
    if not (HTML / "index.html").is_file():
        _unavailable(f"the built book ({HTML.relative_to(ROOT)}/index.html is missing)")
    return HTML
