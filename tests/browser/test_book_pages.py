"""Every page of the built book, as a reader's browser shows it (offline, from file://).

One test per page and rule (see bookcheck.RULES); a full-page screenshot of each page goes to _build/browser/.
Run with `make check-book` (they are deselected from the plain `pytest`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from bookcheck import HTML, ROOT, RULES, SCREENSHOTS, book_pages, inspect_page, problems, shown_checks

pytestmark = pytest.mark.browser

PAGES = book_pages(HTML) if HTML.is_dir() else []
_seen: dict[Path, object] = {}


@pytest.fixture
def inspected(browser_context, built_book):
    """What the browser shows on a page, loaded once per page and shared by the rules."""

    def load(page: Path):
        if page not in _seen:
            shot = SCREENSHOTS / page.with_suffix(".png")
            _seen[page] = inspect_page(browser_context, (built_book / page).as_uri(), screenshot=shot)
        return _seen[page]

    return load


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("page", PAGES or [None], ids=[p.with_suffix("").as_posix() for p in PAGES] or ["no-book"])
def test_page(page, rule, inspected, built_book):
    found = problems(rule, page, inspected(page), built_book, ROOT)
    assert not found, f"{page} ({rule}): {len(found)} problem(s)\n  " + "\n  ".join(found)


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files, stack = [toc["root"]], [toc]
    while stack:
        node = stack.pop()
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key, []):
                if "file" in child:
                    files.append(child["file"])
                stack.append(child)
    return files


def test_every_page_of_the_toc_is_checked(built_book):
    checked = {p.with_suffix("").as_posix() for p in PAGES}
    missing = [f for f in toc_files() if f not in checked]
    assert not missing, f"pages of _toc.yml not in the build (or excluded from the checks): {missing}"


def test_no_page_shows_its_checks(built_book):
    """The checks (sentence checks and asserts) run when the book is built (a failing one fails the build), but the
    reader sees the prose only: on every page, the theory chapters' as well as the experiments'."""
    chapters = [p for p in PAGES if p.parts[0] == "chapters" and p.stem[:2].isdigit()]
    assert len(chapters) >= 15
    shown = {p.as_posix(): shown_checks((built_book / p).read_text(encoding="utf-8")) for p in PAGES}
    assert not any(shown.values()), {page: cells for page, cells in shown.items() if cells}
