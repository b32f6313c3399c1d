"""attnlimits.reporting.rules: every band of the book's rules has its row (value and date), and the verdicts can be
decided again with a band halved or doubled."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pandas as pd
import pytest

from attnlimits.infra.verdicts import decide
from attnlimits.reporting import rules

LIB = Path(__file__).resolve().parents[2] / "lib"


def test_every_band_in_the_code_has_its_row_with_its_value_and_date():
    """A band changed in the code without its row here fails: the row holds the value the code must hold."""
    for band in rules.BANDS:
        assert rules.current(band.where) == band.value, band.where
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", band.since), band.where
        assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", c.until) and c.why and c.moved for c in band.history), band
    assert "'inconclusive' at 10 % -> 'not reproduced' at 5 %" in rules.rules_table().earlier.str.cat()
    for method in rules.INTERVALS:  # the interval the verdicts read is a rule too
        assert rules.current(method.where) == method.value, method.where
        assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", c.until) and c.why and c.moved for c in method.history)
    table = rules.rules_table()
    assert list(table.band) == [b.name for b in (*rules.BANDS, *rules.INTERVALS)] and (table.since != "").all()
    assert "jackknife t" in table.set_index("band").loc["METHOD", "earlier"]
    assert "tightened to 5 %" in table.set_index("where").loc["experiments.paper_claims.figure3", "earlier"].iloc[0]


def _bands_in(path: Path) -> list[str]:
    """The module-level constants of a file that look like a band: an upper-case name bound to a pair of numbers."""

    def number(node) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, int | float) and not isinstance(node.value, bool)
        return isinstance(node, ast.BinOp | ast.UnaryOp | ast.Call)

    out = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            if (
                name.isupper()
                and isinstance(value, ast.Tuple)
                and len(value.elts) == 2
                and all(map(number, value.elts))
            ):
                out.append(name)
    return out


def test_no_rule_decides_against_a_band_the_table_does_not_list():
    """Every module that decides verdicts (it calls decide or flat) and defines a band registers it."""
    registered = {b.where for b in rules.BANDS}
    missing = []
    for path in sorted((LIB / "attnlimits").rglob("*.py")):
        text = path.read_text()
        if "decide(" not in text:
            continue
        module = ".".join(path.relative_to(LIB).with_suffix("").parts)
        missing += [f"{module}.{n}" for n in _bands_in(path) if f"{module}.{n}" not in registered]
    assert not missing, f"bands without a row in attnlimits.reporting.rules.BANDS: {missing}"


def test_a_band_is_halved_and_doubled_around_its_centre_and_restored():
    linear = next(b for b in rules.BANDS if b.name == "LINEAR")
    from attnlimits.experiments.paper_claims import figure2

    with rules.scaled(linear, 0.5) as half:
        assert half == pytest.approx((0.9, 1.1)) and figure2.LINEAR == half
    assert figure2.LINEAR == (0.8, 1.2)
    drop = next(b for b in rules.BANDS if b.name == "DROP")  # a ratio band: on the log scale
    with rules.scaled(drop, 2.0) as double:
        assert double == pytest.approx((300**0.5 * 30**0.5 / 10, 300**0.5 * 30**0.5 * 10))
    one_sided = next(b for b in rules.BANDS if b.name == "RISES")
    assert rules._scaled_value(one_sided, 2.0) == one_sided.value


def test_band_sensitivity_names_the_verdicts_that_rest_on_a_bands_edges():
    """A slope whose interval lies just inside LINEAR is reproduced, but not once the band is halved; one well inside
    survives both."""
    from attnlimits.experiments.paper_claims import rules as claim_rules

    def decided():
        return pd.DataFrame(
            [
                {"key": "edge", "verdict": decide(0.82, 0.95, claim_rules.LINEAR)},
                {"key": "middle", "verdict": decide(0.97, 1.03, claim_rules.LINEAR)},
            ]
        )

    table = rules.band_sensitivity(decided, bands=[b for b in rules.BANDS if b.name == "LINEAR"])
    edge = table[table.key == "edge"].iloc[0]
    assert edge.band == "LINEAR" and edge.verdict == "reproduced" and edge["x0.5"] == "inconclusive"
    assert edge["x2"] == "reproduced"
    middle = table[table.key == "middle"].iloc[0]
    assert middle.band == "none" and middle["x0.5"] == middle["x2"] == "reproduced"
