"""Algorithm 3's decision (attnlimits.infra.ks): the memoised KS p-value equals scipy's, the rule that picks the
first N reaching the level, and the KS level written once: no module that decides a critical N writes it again."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import attnlimits
from attnlimits.infra import ks

# --- ks_pvalue --------------------------------------------------------------------------------------------------


def test_ks_pvalue_equals_ks_test_exactly_with_and_without_ties():
    rng = np.random.default_rng(0)
    for trial in range(400):
        n, m = rng.integers(1, 60, size=2)
        if trial % 2:  # heavy ties: few distinct values, shared between the samples
            d, e = rng.integers(0, 5, n).astype(float), rng.integers(0, 5, m).astype(float)
        else:
            d, e = rng.normal(size=n), rng.normal(0.3, 1.2, size=m)
        assert ks.ks_pvalue(d, e) == ks.ks_test(d, e)[1], (n, m)
    for n, m in [(5, 7), (6, 6), (10, 4)] * 60:  # fixed sizes: every value of D n m comes back, from the cache
        d, e = rng.normal(size=n), rng.normal(rng.uniform(-2, 2), size=m)
        assert ks.ks_pvalue(d, e) == ks.ks_test(d, e)[1], (n, m)
    x = rng.normal(size=270)
    for shift in np.linspace(0, 1, 40):  # the sizes of Algorithm 3 (one value per head)
        assert ks.ks_pvalue(x, x + shift) == ks.ks_test(x, x + shift)[1]


def test_ks_pvalues_of_many_rows_equal_ks_test_on_each_rows_kept_heads():
    """The vectorised p-values of Algorithm 3's bootstrap (one row per draw): each row its own kept heads, ties
    between and within the samples, a row with a NaN, rows that keep no head (NaN)."""
    rng = np.random.default_rng(1)
    rows, heads = 60, 40
    d = rng.integers(0, 6, size=(rows, heads)).astype(float)  # few distinct values: heavy ties
    e = rng.integers(0, 6, size=(rows, heads)).astype(float)
    e[::2] += rng.normal(0, 2, size=(rows // 2, heads))  # and rows without ties
    keep = np.ones((rows, heads), bool)
    keep[:20] = rng.random((20, heads)) < 0.7  # other patterns of kept heads
    keep[20:23] = False
    d[30, 5] = np.nan
    p = ks.ks_pvalue_rows(d, e, keep)
    assert np.isnan(p[20:23]).all()
    for i in [*range(20), *range(23, rows)]:
        np.testing.assert_equal(p[i], ks.ks_test(d[i, keep[i]], e[i, keep[i]])[1], err_msg=f"row {i}")


def test_ks_pvalue_rejects_an_empty_sample():
    with pytest.raises(ValueError, match="non-empty"):
        ks.ks_pvalue([], [1.0])


# --- the decision and the first N reaching the level -------------------------------------------------------------


def test_the_levels_are_algorithm_3s_then_the_papers_text():
    assert ks.KS_LEVEL == 0.05
    assert ks.KS_LEVELS == (ks.KS_LEVEL, 0.01)


def test_a_p_value_reaches_the_level_from_the_level_up():
    assert ks.reaches(0.05, 0.05) and ks.reaches(0.5, 0.05) and not ks.reaches(0.0499, 0.05)
    np.testing.assert_array_equal(ks.reaches(np.array([0.01, 0.05, 0.2]), 0.05), [False, True, True])


def test_first_reaching_is_the_first_n_at_or_above_the_level_and_reads_no_further():
    read = []

    def tests(pairs):
        for n, p in pairs:
            read.append(n)
            yield n, p

    pairs = [(1, 0.001), (2, 0.2), (4, 0.01), (8, 0.5)]  # not monotone: the first that reaches decides
    assert ks.first_reaching(tests(pairs), 0.05) == (2, 0.2)
    assert read == [1, 2]
    assert ks.first_reaching(pairs, 0.3) == (8, 0.5)
    assert ks.first_reaching(pairs, 0.9) is None
    assert ks.first_reaching([], 0.05) is None


# --- the KS level is written once --------------------------------------------------------------------------------

PACKAGE = Path(attnlimits.__file__).parent
#: The code that decides a critical N or reads one at a KS level.
CRITICAL_N_CODE = [
    "infra/ks.py",
    "experiments/*.py",
    "experiments/paper_claims/*.py",
    "studies/long_context/*.py",
    "studies/alternatives/*.py",
    "studies/several_models/*.py",
    "cli.py",
]
#: What names a KS level: a parameter, keyword, target or compared name with one of these in it.
LEVEL_NAME = re.compile(r"level|ks|p_?value", re.IGNORECASE)
#: The names a 0.05 of that code is given to that are no KS level.
NOT_A_LEVEL = {
    "T_grid": "a temperature of the alternative normalisers' grid",
    "QUANTILES": "the quantiles over a window's heads that the shipped summaries hold (5 % ... 95 %)",
    "WILCOXON_ALPHA": "the significance of the head-subset check's Wilcoxon test, not Algorithm 3's KS level",
    "below_one": "Figure 3's upper bound counts as informative below 1 - 0.05",
}


def _names(node: ast.AST) -> list[str]:
    """The names an expression reads: a variable, an attribute, a column by its string label."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return [node.slice.value]
    if isinstance(node, ast.Call):
        return _names(node.func)
    return []


def _context(node: ast.AST, parents: dict) -> list[str] | None:
    """The names a literal is given to or compared with: the keyword, parameter, target or other side of a comparison
    it sits in (through tuples and arithmetic), the function it is passed to; None when it has none."""
    while True:
        parent = parents.get(node)
        if parent is None:
            return None
        if isinstance(parent, ast.keyword):
            return [parent.arg or ""]
        if isinstance(parent, ast.arguments):
            positional = [*parent.posonlyargs, *parent.args]
            defaults = dict(zip(positional[len(positional) - len(parent.defaults) :], parent.defaults, strict=True))
            defaults |= {a: d for a, d in zip(parent.kwonlyargs, parent.kw_defaults, strict=True) if d is not None}
            return [a.arg for a, d in defaults.items() if d is node]
        if isinstance(parent, ast.Assign):
            return [n for target in parent.targets for n in _names(target)]
        if isinstance(parent, ast.AnnAssign):
            return _names(parent.target)
        if isinstance(parent, ast.Compare):
            return [n for side in (parent.left, *parent.comparators) if side is not node for n in _names(side)]
        if isinstance(parent, ast.Call):
            return _names(parent.func)
        if not isinstance(parent, ast.Tuple | ast.List | ast.Set | ast.UnaryOp | ast.BinOp | ast.Starred):
            return None
        node = parent


def ks_level_literals(path: Path) -> list[str]:
    """``file:line`` of each float 0.05, and each 0.01 that names a KS level, outside the one definition in
    :mod:`attnlimits.infra.ks`. A 0.05 counts unless it is given to a name of :data:`NOT_A_LEVEL`; a 0.01 only when
    its context names a level (it is also a temperature, a tolerance...)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and type(node.value) is float and node.value in (0.05, 0.01)):
            continue
        context = _context(node, parents)
        if path.name == "ks.py" and path.parent.name == "infra" and context in (["KS_LEVEL"], ["KS_LEVELS"]):
            continue  # the one definition
        level = context is not None and any(LEVEL_NAME.search(name) for name in context)
        other = context is not None and any(name in NOT_A_LEVEL for name in context)
        if level or (node.value == 0.05 and not other):
            where = path.relative_to(PACKAGE.parent) if path.is_relative_to(PACKAGE.parent) else path
            found.append(f"{where}:{node.lineno} ({node.value} given to {context or 'nothing named'})")
    return found


def test_the_ks_level_is_written_once():
    files = sorted({p for pattern in CRITICAL_N_CODE for p in PACKAGE.glob(pattern)})
    assert len(files) > 20 and PACKAGE / "experiments" / "critical.py" in files
    found = [hit for path in files for hit in ks_level_literals(path)]
    assert not found, f"name the KS level attnlimits.infra.ks.KS_LEVEL (or KS_LEVELS) instead of writing it: {found}"


def test_the_scan_sees_a_ks_level_written_as_a_number(tmp_path):
    """The scan flags a level defaulted, compared, passed or assigned as a number, and leaves alone a 0.05 given to
    a name of NOT_A_LEVEL and a 0.01 that names no level."""
    path = tmp_path / "x.py"
    path.write_text(
        "def f(level=0.05, *, ks_levels=(0.05, 0.01)): ...\n"
        "crit = table[table.ks_level == 0.01]\n"
        'found = critical_from_heads(heads, 64, "E", 0.05)\n'
        "bare = [0.05]\n"
        "alpha = -0.05\n"
        "T_grid = (0.01, 0.05, 0.1)\n"
        "informative = below_one <= 1 - 0.05\n"
        "tolerance, T = 0.01, 0.01\n"
    )
    hits = ks_level_literals(path)
    assert sorted(int(h.split(":")[1].split(" ")[0]) for h in hits) == [1, 1, 1, 2, 3, 4, 5], hits
