"""attnlimits.theory.checks.bounds_table and show_bounds: the table of check verdicts that the theory chapters and the
reproducibility report show."""

from __future__ import annotations

from attnlimits.theory import checks
from attnlimits.theory.checks import Verdict

HOLDS = Verdict("Lemma 1", "a bound", 2000, 0, 0.5, "holds but conservative by a factor 2", "holds")
BROKEN = Verdict("Corollary 3 (printed)", "a bound", 1000, 12, 3.0, "violated: tied top logits", "violated")
SURPRISE = Verdict("Theorem 1", "a bound", 500, 1, 1.01, "violated once", "holds")


def test_one_row_per_bound_in_order_with_its_numbers():
    table = checks.bounds_table([HOLDS, BROKEN])
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
    table = checks.bounds_table([HOLDS, BROKEN, SURPRISE])
    assert table.agrees.tolist() == ["yes", "yes", "NO"]


def test_a_page_shows_it_without_the_index_and_with_rounded_ratios():
    html = checks.show_bounds([HOLDS, BROKEN]).to_html()
    assert "Corollary 3 (printed)" in html and ">2,000<" in html and ">0.5<" in html
    assert checks.show_bounds([HOLDS]).data.equals(checks.bounds_table([HOLDS]))
