"""The introduction's claims table as a reader sees it at the book's desktop width (1400 px, both sidebars shown):
every verdict is inside the window and inside the table's scroll box, so nobody scrolls sideways to read one
(attnlimits.reporting.book_claims writes the table, _static/claims.css lets its long cells wrap)."""

from __future__ import annotations

import pytest

from attnlimits.reporting import book_claims

#: Runs in the page: waits for MathJax (typeset formulas change the columns' widths), then measures the claims
#: table: its header, the right edge of every verdict cell, the window's width and the right edge of the nearest
#: box that scrolls sideways around the table (the theme wraps tables in one), and how often the page says what the
#: claims were measured on.
MEASURE_JS = r"""
async (selector) => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  await document.fonts.ready;
  const table = document.querySelector(selector);
  if (!table) { return null; }
  const heads = [...table.querySelectorAll('thead th')].map(h => h.textContent.trim());
  const at = heads.indexOf('Verdict');
  let box = table.parentElement;
  while (box && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) { box = box.parentElement; }
  const rows = [...table.querySelectorAll('tbody tr')];
  return {
    heads: heads,
    verdicts: at < 0 ? [] : rows.map(r => ({text: r.children[at].textContent.trim(),
                                            right: r.children[at].getBoundingClientRect().right})),
    rows: rows.length,
    window: document.documentElement.clientWidth,
    box: box ? box.getBoundingClientRect().right : null,
    said: document.body.innerText.split('Measured on —').length - 1,
  };
}
"""


def off_page(measured: dict | None) -> list[str]:
    """What a reader cannot see of the verdicts without scrolling sideways, from :data:`MEASURE_JS`'s record (empty:
    every verdict shows). A missing table or verdict column is a problem too."""
    if measured is None:
        return [f"no table.{book_claims.TABLE_CLASS} on the page"]
    if "Verdict" not in measured["heads"]:
        return [f"the claims table has no Verdict column: {measured['heads']}"]
    edge = min(v for v in (measured["window"], measured["box"]) if v is not None)
    return [
        f"verdict {v['text']!r} ends at {v['right']:.0f} px, beyond the visible {edge:.0f} px"
        for v in measured["verdicts"]
        if v["right"] > edge + 0.5
    ]


def test_off_page_reads_the_edges():
    seen = {"heads": ["Claim of the paper", "Verdict"], "window": 1400, "box": 1096, "rows": 2}
    inside = {**seen, "verdicts": [{"text": "reproduced", "right": 560.0}, {"text": "holds", "right": 1096.2}]}
    assert off_page(inside) == []
    beyond = {**seen, "verdicts": [{"text": "reproduced", "right": 1309.3}]}
    assert off_page(beyond) == ["verdict 'reproduced' ends at 1309 px, beyond the visible 1096 px"]
    assert off_page({**beyond, "box": None, "window": 1400}) == []  # no scroll box: the window's edge
    assert off_page(None) and off_page({**inside, "heads": ["Claim of the paper"]})


@pytest.mark.browser
def test_every_verdict_of_the_intro_shows_without_scrolling_sideways(browser_context, built_book):
    page = built_book / "chapters" / "intro.html"
    assert page.is_file(), f"{page} is not in the build"
    tab = browser_context.new_page()
    try:
        tab.goto(page.as_uri(), wait_until="load")
        measured = tab.evaluate(MEASURE_JS, f"table.{book_claims.TABLE_CLASS}")
    finally:
        tab.close()
    assert off_page(measured) == []
    assert measured["rows"] == len(book_claims.ROWS) == len(measured["verdicts"])
    # what the experiments ran on is said once, above the table, not in a column of every row
    assert measured["said"] == 1 and "Measured on" not in measured["heads"]
