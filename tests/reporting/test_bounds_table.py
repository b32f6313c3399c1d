"""attnlimits.reporting.book_claims.bounds_table: the reproducibility report's table of the bounds (chapter 31)."""

from __future__ import annotations

from attnlimits.reporting import book_claims
from attnlimits.theory.checks import Verdict

HOLDS = Verdict("Lemma 1", "a bound", 2000, 0, 0.5, "holds but conservative by a factor 2", "holds")
BROKEN = Verdict("Corollary 3 (printed)", "a bound", 1000, 12, 3.0, "violated: tied top logits", "violated")
SURPRISE = Verdict("Theorem 1", "a bound", 500, 1, 1.01, "violated once", "holds")


def test_one_row_per_bound_in_order_with_its_numbers():
    table = book_claims.bounds_table([HOLDS, BROKEN])
    assert list(table.columns) == ["bound", "trials", "violations", "worst ratio", "expected", "agrees", "verdict"]
    assert table.bound.tolist() == ["Lemma 1", "Corollary 3 (printed)"]
    assert table.iloc[1].tolist() == [
        "Corollary 3 (printed)",
        1000,
        12,
        3.0,
        "violated",
        "yes",
        "violated: tied top logits",
    ]


def test_a_measurement_that_disagrees_with_the_book_stands_out():
    table = book_claims.bounds_table([HOLDS, BROKEN, SURPRISE])
    assert table.agrees.tolist() == ["yes", "yes", "NO"]
