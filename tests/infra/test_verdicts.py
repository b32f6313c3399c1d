"""The book's verdict words live in one module: no other module of the library spells one out, and the rule that
decides an interval against a band gives the words the book's prose promises on every edge case."""

from __future__ import annotations

import ast
import itertools
import math
from pathlib import Path

import pytest

import attnlimits
from attnlimits.infra import verdicts
from attnlimits.infra.verdicts import (
    DEPENDS_ON_READING,
    HINGES,
    HOLDS,
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    VIOLATED,
    combine,
    decide,
)

LIBRARY = Path(attnlimits.__file__).parent
#: Strings that read like a verdict word but are not one: (module path inside the library, text) -> why.
NOT_VERDICTS = {
    ("theory/sweeps.py", "corrected"): "a column of the gradient sweep: the corrected bound's value",
    ("models/capturing.py", "holds"): "a column of the exactness table: whether a check is within its tolerance",
}


def _prose(tree: ast.AST) -> set[int]:
    """The ids of the string nodes that are prose about the words rather than a word given as a verdict: the
    docstrings and the pieces of f-strings (a sentence around its numbers)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
        if isinstance(node, ast.JoinedStr):
            found.update(id(part) for part in node.values)
    return found


def _verdict_literals(source: str, where: str) -> list[str]:
    """``where:line: 'text'`` for each string literal of ``source`` whose whole text is a verdict word (white space
    around it aside; the words are lower case, so a name such as ``"REPRODUCED"`` in ``__all__`` is not one)."""
    words = {w.strip() for w in verdicts.WORDS}
    tree = ast.parse(source)
    skip = _prose(tree)
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value.strip()
            if text in words and (where, text) not in NOT_VERDICTS:
                hits.append(f"{where}:{node.lineno}: {node.value!r}")
    return hits


def test_no_module_but_verdicts_spells_out_a_verdict_word():
    modules = sorted(p for p in LIBRARY.rglob("*.py") if p != LIBRARY / "infra" / "verdicts.py")
    assert len(modules) > 40  # the whole library is read, not an empty folder
    hits = [hit for p in modules for hit in _verdict_literals(p.read_text(), p.relative_to(LIBRARY).as_posix())]
    assert not hits, f"import these words from attnlimits.infra.verdicts instead: {hits}"


def test_the_scan_finds_a_word_spelled_out_but_not_a_docstring_or_a_sentence():
    source = (
        '"""The verdict: "reproduced"."""\n__all__ = ["NOT_MEASURED"]\nA = " not reproduced"\n'
        'B = "holds within error"\nC = f"{A} holds "\nD = {"violated": 1}\n'
    )
    assert _verdict_literals(source, "m.py") == ["m.py:3: ' not reproduced'", "m.py:6: 'violated'"]


def test_every_word_is_distinct_and_described():
    assert len(set(verdicts.WORDS)) == len(verdicts.WORDS)
    for word in verdicts.WORDS:
        assert f'"{word.strip()}"' in verdicts.__doc__, f"the table of words does not describe {word!r}"


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (0.9, 1.1, REPRODUCED),  # inside
        (0.8, 1.2, REPRODUCED),  # the band's edges belong to it
        (1.0, 1.0, REPRODUCED),  # a collapsed interval (one window) inside
        (1.3, 1.5, NOT_REPRODUCED),  # wholly above
        (0.1, 0.7, NOT_REPRODUCED),  # wholly below
        (1.2000001, 2.0, NOT_REPRODUCED),  # just above the upper edge
        (0.5, 0.8, INCONCLUSIVE),  # touches the lower edge from outside: not wholly outside
        (1.2, 1.5, INCONCLUSIVE),  # touches the upper edge from outside
        (0.7, 0.9, INCONCLUSIVE),  # straddles the lower edge
        (1.1, 1.3, INCONCLUSIVE),  # straddles the upper edge
        (0.5, 1.5, INCONCLUSIVE),  # covers the band
        (-math.inf, math.inf, INCONCLUSIVE),  # an interval that says nothing
        (math.nan, math.nan, INCONCLUSIVE),  # no interval
        (math.nan, 1.0, INCONCLUSIVE),  # an open end
        (0.9, math.nan, INCONCLUSIVE),
    ],
)
def test_decide_on_the_edges(lo, hi, expected):
    assert decide(lo, hi, (0.8, 1.2)) == expected


def test_decide_with_a_band_of_one_point_and_refusing_an_inverted_band():
    assert decide(1.0, 1.0, (1.0, 1.0)) == REPRODUCED
    assert decide(0.9, 1.0, (1.0, 1.0)) == INCONCLUSIVE
    assert decide(1.1, 1.2, (1.0, 1.0)) == NOT_REPRODUCED
    with pytest.raises(ValueError, match="band: must be"):
        decide(0, 1, (2, 1))


def test_every_claim_decides_with_the_one_rule():
    from attnlimits.experiments import paper_claims
    from attnlimits.studies.long_context import report

    assert paper_claims.decide is decide and report.decide is decide
    assert (paper_claims.REPRODUCED, paper_claims.NOT, paper_claims.INCONCLUSIVE) == (
        REPRODUCED,
        NOT_REPRODUCED,
        INCONCLUSIVE,
    )


@pytest.mark.parametrize(
    ("verdicts", "readings", "expected"),
    [
        ([REPRODUCED, REPRODUCED], False, REPRODUCED),  # they agree
        ([HOLDS], False, HOLDS),
        ([REPRODUCED, INCONCLUSIVE], False, INCONCLUSIVE),  # parts of a rule: every part must hold
        ([REPRODUCED, INCONCLUSIVE, NOT_REPRODUCED], False, NOT_REPRODUCED),
        ([HOLDS, VIOLATED], False, VIOLATED),
        ([REPRODUCED, DEPENDS_ON_READING], False, DEPENDS_ON_READING),
        ([INCONCLUSIVE, DEPENDS_ON_READING], False, INCONCLUSIVE),
        ([REPRODUCED, HINGES], False, HINGES),  # a part one passage decides: the whole is not decided either
        ([HINGES, NOT_REPRODUCED], False, NOT_REPRODUCED),  # a decided failure is a failure
        ([HINGES, DEPENDS_ON_READING], False, HINGES),
        ([REPRODUCED, HOLDS], False, NOT_REPRODUCED),  # differing otherwise: never a reproduction
        ([], False, NOT_REPRODUCED),
        ([REPRODUCED, REPRODUCED], True, REPRODUCED),
        ([REPRODUCED, INCONCLUSIVE], True, DEPENDS_ON_READING),  # readings that differ
        ([REPRODUCED, NOT_MEASURED], True, REPRODUCED),  # a reading not measured is left out
        ([NOT_MEASURED, NOT_MEASURED], True, NOT_MEASURED),
        ([], True, NOT_MEASURED),
    ],
)
def test_combine(verdicts, readings, expected):
    assert combine(verdicts, readings=readings) == expected
    assert combine(iter(verdicts), readings=readings) == expected  # any iterable, read once


def _parts_must_all_hold(verdicts) -> str:
    """The rule the paper's claims applied to the parts of one rule (each decided on an interval)."""
    if NOT_REPRODUCED in verdicts:
        return NOT_REPRODUCED
    return REPRODUCED if all(v == REPRODUCED for v in verdicts) else INCONCLUSIVE


def _over_readings(verdicts) -> str:
    """The rule the paper's claims applied to the readings of the expectation."""
    decided = {v for v in verdicts if v != NOT_MEASURED}
    return NOT_MEASURED if not decided else decided.pop() if len(decided) == 1 else DEPENDS_ON_READING


def test_combine_gives_what_the_parts_of_a_rule_and_the_readings_each_gave_before():
    """Each former copy of the rule, held to every sequence of up to three verdicts it could meet."""
    decided = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)  # what decide gives
    for n in (1, 2, 3):
        for parts in itertools.product(decided, repeat=n):
            assert combine(parts) == _parts_must_all_hold(parts), parts
        for each in itertools.product((*verdicts.CLAIM_VERDICTS, HOLDS, VIOLATED), repeat=n):
            assert combine(each, readings=True) == _over_readings(each), each


@pytest.mark.parametrize(
    "found, expected",
    [
        (["reproduced", "reproduced"], "reproduced"),
        (["not reproduced", "not reproduced"], "not reproduced"),
        (["not reproduced", "reproduced"], "depends on the model"),
        (["reproduced", "inconclusive", "not reproduced"], "depends on the model"),
        (["reproduced", "inconclusive"], "inconclusive"),  # one model does not decide: the claim is not decided
        (["not reproduced", "inconclusive"], "not reproduced"),
        (["reproduced", "depends on the reading"], "depends on the reading"),
        (["holds", "violated"], "violated"),
    ],
)
def test_across_models_says_when_one_model_reproduces_a_claim_another_refutes(found, expected):
    assert verdicts.across_models(found) == expected
    assert verdicts.across_models(reversed(found)) == expected


def test_a_proved_part_does_not_hide_that_a_claim_depends_on_the_model():
    assert combine(["holds", "depends on the model"]) == "depends on the model"
    assert combine(["not reproduced", "depends on the model"]) == "not reproduced"
