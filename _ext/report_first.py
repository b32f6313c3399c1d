"""Read the reproducibility report before the introduction.

The introduction includes the claims table that the report writes when it executes
(`chapters/_generated/claims.md`), so the report must be read (and executed) first, and whenever the report is
read again the introduction must be read after it, to include the fresh table. Sphinx reads documents in sorted
order, which happens to put the report first; this makes the order explicit instead of an accident of names.
"""

from __future__ import annotations

from sphinx.application import Sphinx

REPORT = "chapters/31_reproducibility_report"
INTRO = "chapters/intro"


def report_before_intro(docnames: list[str], known: set[str] | frozenset[str]) -> None:
    """Reorder ``docnames`` in place: the report, when read, comes before the introduction, which is then read too."""
    if REPORT not in docnames:
        return
    if INTRO in docnames:
        docnames.remove(INTRO)
    if INTRO in known:
        docnames.insert(docnames.index(REPORT) + 1, INTRO)


def _reorder(app: Sphinx, env, docnames: list[str]) -> None:
    report_before_intro(docnames, env.found_docs)


def setup(app: Sphinx) -> dict:
    app.connect("env-before-read-docs", _reorder)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
