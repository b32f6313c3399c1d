"""Across studies: the book's claims table (:mod:`.book_claims`, the introduction's table and chapter 31), the
one-page report of a run (:mod:`.run_page`, written by ``attnlimits analyze``), the book's results pipeline
(:mod:`.book_results`, run by ``attnlimits results`` and ``make results``) and the claims table's place in it
(:mod:`.claims_pipeline`)."""

import attnlimits

MODULES = ("book_claims", "run_page", "book_results", "claims_pipeline")
__getattr__, __dir__ = attnlimits.lazy(__name__, MODULES)
