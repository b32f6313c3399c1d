"""Across studies: the book's claims table (:mod:`.book_claims`, the introduction's table and chapter 31) and
the one-page report of a run (:mod:`.run_page`, written by ``attnlimits analyze``)."""

import attnlimits

MODULES = ("book_claims", "run_page")
__getattr__, __dir__ = attnlimits.lazy(__name__, MODULES)
