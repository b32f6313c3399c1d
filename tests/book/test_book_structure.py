"""The book's structure: paired chapters in sync and without outputs, a table of contents that matches the files."""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path

import jupytext
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ROOT / "chapters"
PY_CHAPTERS = sorted(p for p in CHAPTERS.glob("*.py") if "# %%" in p.read_text())
NOTEBOOKS = sorted(CHAPTERS.glob("*.ipynb"))


def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [ch["file"] for ch in part["chapters"]]
    return files


def test_every_chapter_is_a_pair():
    assert PY_CHAPTERS, "no py:percent chapters found"
    assert {p.stem for p in PY_CHAPTERS} == {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("py", PY_CHAPTERS, ids=lambda p: p.stem)
def test_pair_in_sync(py: Path):
    nb_path = py.with_suffix(".ipynb")
    assert nb_path.exists(), f"{py.name} has no paired .ipynb: run `make sync`"
    assert _cells(jupytext.read(py)) == _cells(jupytext.read(nb_path)), (
        f"{py.name} and {nb_path.name} differ: run `make sync`"
    )


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_committed_without_outputs(nb_path: Path):
    nb = json.loads(nb_path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [], f"{nb_path.name} carries outputs"
            assert cell["execution_count"] is None, f"{nb_path.name} carries execution counts"


def test_toc_matches_chapter_files():
    listed = set(_toc_files())
    for entry in listed:
        assert any((ROOT / f"{entry}{ext}").exists() for ext in (".md", ".ipynb")), f"_toc.yml names missing {entry}"
    pages = {f"chapters/{p.stem}" for p in list(CHAPTERS.glob("*.md")) + NOTEBOOKS}
    assert pages - listed == set(), f"chapters missing from _toc.yml: {sorted(pages - listed)}"


def test_toc_has_the_three_parts():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    captions = [part["caption"] for part in toc["parts"]]
    assert captions == ["Theory", "Experiments on a pretrained model", "Beyond the paper"]
    assert all(part["chapters"] for part in toc["parts"])


def test_config_executes_with_a_long_enough_timeout():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cfg["execute"]["execute_notebooks"] == "cache"
    assert cfg["execute"]["timeout"] >= 300
    assert cfg["only_build_toc_files"] is True
    assert {"amsmath", "dollarmath"} <= set(cfg["parse"]["myst_enable_extensions"])
    assert cfg["bibtex_bibfiles"] == ["references.bib"]


# --- what a reader sees: code that fits the page, markdown that renders as written ---------------------------

#: The rendered page column holds about 88 characters of code.
CODE_WIDTH = 88
#: A comment line in a code cell that reads like markdown (a heading, bold text, display math) was meant to be a
#: markdown cell: jupytext needs a ``# %% [markdown]`` marker above it.
STRANDED_MARKDOWN = re.compile(r"^#\s*(#{1,6}\s|\*\*|\$\$|\|.*\|\s*$)")
#: A line that Markdown reads as a list item or a numbered item (which ends any math the paragraph had open).
LIST_MARKER = re.compile(r"^\s{0,3}([-+*]|\d+[.)])(\s|$)")
MARKDOWN_PAGES = sorted(CHAPTERS.glob("*.md"))


def stranded_markdown(source: str) -> list[str]:
    """Comment lines of a code cell that look like markdown (headings, bold, display math, table rows)."""
    return [line for line in source.splitlines() if STRANDED_MARKDOWN.match(line.strip())]


def list_markers_in_math(markdown: str) -> list[str]:
    """Lines that start with a Markdown list marker while a ``$...$`` or ``$$...$$`` formula is open.

    Markdown reads such a line as a list item: the formula is cut in two and renders as raw TeX. Fenced code
    blocks are skipped; the inline-math state ends with its paragraph (a blank line), display math does not.
    """
    bad, display, inline, fenced = [], False, False, False
    for line in markdown.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")) and not display:
            fenced = not fenced
            continue
        if fenced:
            continue
        if not stripped:
            inline = False
            continue
        if (display or inline) and LIST_MARKER.match(line):
            bad.append(line)
        tokens = re.findall(r"\$\$|\$", line.replace(r"\$", ""))
        for tok in tokens:
            if tok == "$$":
                display = not display
            elif not display:
                inline = not inline
    return bad


def _markdown_of(path: Path) -> list[str]:
    if path.suffix == ".md":
        return [path.read_text()]
    return [c.source for c in jupytext.read(path).cells if c.cell_type == "markdown"]


@pytest.mark.parametrize("py", PY_CHAPTERS, ids=lambda p: p.stem)
def test_code_fits_the_page_column(py: Path):
    cells = [c for c in jupytext.read(py).cells if c.cell_type == "code"]
    wide = [line for c in cells for line in c.source.splitlines() if len(line) > CODE_WIDTH]
    assert not wide, f"{py.name}: {len(wide)} code line(s) wider than {CODE_WIDTH} characters, e.g. {wide[0]!r}"


@pytest.mark.parametrize("py", PY_CHAPTERS, ids=lambda p: p.stem)
def test_no_markdown_stranded_in_code_cells(py: Path):
    cells = [c for c in jupytext.read(py).cells if c.cell_type == "code"]
    stranded = [line for c in cells for line in stranded_markdown(c.source)]
    assert not stranded, f"{py.name}: markdown inside a code cell (missing '# %% [markdown]'?): {stranded[:3]}"


@pytest.mark.parametrize("page", PY_CHAPTERS + MARKDOWN_PAGES, ids=lambda p: p.name)
def test_no_list_marker_inside_a_formula(page: Path):
    bad = [line for md in _markdown_of(page) for line in list_markers_in_math(md)]
    assert not bad, f"{page.name}: a formula line starts with a list marker (Markdown cuts the formula): {bad[:3]}"


def test_the_markdown_detectors_catch_what_they_are_for():
    # the defect chapter 13 once had: an inline formula continued on a line starting with '+'
    assert list_markers_in_math("**Theorem.** $a \\le b\n+ c$.") == ["+ c$."]
    assert list_markers_in_math("$$\na\n- b\n$$") == ["- b"]
    assert list_markers_in_math("$$\na\n1. b\n$$") == ["1. b"]
    # fine: a list after a closed formula, math inside list items, a '$' in code, escaped dollars
    assert list_markers_in_math("$a$ and\n- item $b$\n- item") == []
    assert list_markers_in_math("costs \\$5\n- item") == []
    assert list_markers_in_math("```\n$\n```\n- item") == []
    assert list_markers_in_math("$a\n\n- item") == []  # a paragraph break ends an unclosed inline formula
    assert stranded_markdown("x = 1\n# ## Corollary 2\n# **Proof.**\n# $$\n# plain comment") == [
        "# ## Corollary 2",
        "# **Proof.**",
        "# $$",
    ]
    assert stranded_markdown("# compute it\nx = 1  # ## not at the start") == []


# A cell that draws a figure (the library's `plotting.finish` or a matplotlib figure) must describe it for readers
# who cannot see it: myst-nb's alt text is cell metadata written in the .py's cell marker
# (`# %% mystnb={"image": {"alt": "..."}}`), the one piece of cell metadata the jupytext filter keeps.
DRAWS_A_FIGURE = re.compile(r"\bfinish\(|plt\.subplots\(|plt\.figure\(|\.figure\(")


def figure_cells_without_alt(nb) -> list[int]:
    """Indices of code cells that draw a figure but carry no `mystnb.image.alt` metadata."""
    return [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        and DRAWS_A_FIGURE.search(cell.source)
        and not cell.metadata.get("mystnb", {}).get("image", {}).get("alt")
    ]


@pytest.mark.parametrize("py", PY_CHAPTERS, ids=lambda p: p.stem)
def test_every_figure_cell_has_alt_text(py: Path):
    assert not figure_cells_without_alt(jupytext.read(py)), f"{py.name}: figure cells without alt text"


@pytest.mark.parametrize("py", PY_CHAPTERS, ids=lambda p: p.stem)
def test_the_alt_text_reaches_the_notebook(py: Path):
    """What myst-nb reads (the .ipynb) carries the .py's alt text, cell for cell."""

    def alts(nb):
        return [c.metadata.get("mystnb") for c in nb.cells if c.cell_type == "code"]

    assert alts(jupytext.read(py)) == alts(jupytext.read(py.with_suffix(".ipynb"))), f"{py.name}: run `make sync`"


def test_jupytext_keeps_the_alt_text_and_the_tags_in_the_py():
    cell_filter = tomllib.loads((ROOT / "jupytext.toml").read_text())["cell_metadata_filter"]
    assert cell_filter == "mystnb,tags,-all"
    text = '# %% mystnb={"image": {"alt": "a line"}} tags=["remove-cell"]\nfig, ax = plt.subplots()\n'
    nb = jupytext.reads(text, fmt="py:percent")
    assert figure_cells_without_alt(nb) == []
    nb.cells[0].metadata["scrolled"] = True
    nb.metadata["jupytext"] = {"cell_metadata_filter": cell_filter}
    assert jupytext.reads(jupytext.writes(nb, fmt="py:percent"), fmt="py:percent").cells[0].metadata == {
        "mystnb": {"image": {"alt": "a line"}},
        "tags": ["remove-cell"],
    }


SENTENCE_CHECKS = ("sentences.assert_sentences(", "sentences.expect(", "paper_claims.assert_second_text(")
#: Tags that keep a code cell's source off the rendered page (the cell still runs under nbmake and in the build).
HIDDEN = ("remove-cell", "remove-input")


def _hidden(cell) -> bool:
    return any(tag in cell.metadata.get("tags", []) for tag in HIDDEN)


def _asserts(cell) -> bool:
    """Whether a code cell holds an ``assert`` statement (parsed, so an "assert" in a string or a name is none)."""
    return cell.cell_type == "code" and any(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(cell.source)))


def _checks_sentences(cell) -> bool:
    return cell.cell_type == "code" and any(call in cell.source for call in SENTENCE_CHECKS)


def sentence_checks_shown(nb) -> list[int]:
    """Code cells that check the prose's sentences but would appear on the rendered page."""
    return [i for i, cell in enumerate(nb.cells) if _checks_sentences(cell) and not _hidden(cell)]


def asserts_shown(nb) -> list[int]:
    """Code cells with an ``assert`` statement that would appear on the rendered page."""
    return [i for i, cell in enumerate(nb.cells) if _asserts(cell) and not _hidden(cell)]


@pytest.mark.parametrize("py", PY_CHAPTERS, ids=lambda p: p.name)
def test_sentence_checks_are_hidden_from_the_page(py: Path):
    """The checks run under nbmake and in the build; the page shows the prose they check, not them."""
    nb = jupytext.read(py.with_suffix(".ipynb"))
    assert sentence_checks_shown(nb) == [], f"{py.name}: tag these cells remove-cell (and run `make sync`)"
    for cell in nb.cells:
        if "remove-cell" in cell.metadata.get("tags", []):
            assert _checks_sentences(cell) or _asserts(cell), f"{py.name}: a hidden cell that checks nothing"


@pytest.mark.parametrize("py", PY_CHAPTERS, ids=lambda p: p.name)
def test_no_page_shows_an_assert(py: Path):
    """Every chapter's checks run hidden: a code cell the page shows holds no ``assert`` statement."""
    shown = asserts_shown(jupytext.read(py))
    assert shown == [], f"{py.name}: code cells {shown} show an assert; move it into a remove-cell cell"


def test_the_hidden_check_detector_fires():
    nb = jupytext.reads("# %%\n_ = sentences.assert_sentences({})\n", fmt="py:percent")
    assert sentence_checks_shown(nb) == [0]
    nb.cells[0].metadata["tags"] = ["remove-cell"]
    assert sentence_checks_shown(nb) == []


def test_the_assert_detector_fires():
    nb = jupytext.reads('# %%\nx = 1\nassert x == 1, "assert"\n\n# %%\nasserted = "assert x"\n', fmt="py:percent")
    assert asserts_shown(nb) == [0]
    for tag in HIDDEN:
        nb.cells[0].metadata["tags"] = [tag]
        assert asserts_shown(nb) == []


def test_the_alt_text_detector_fires():
    nb = jupytext.reads("# %%\nfig, ax = plt.subplots()\n", fmt="py:percent")
    assert figure_cells_without_alt(nb) == [0]
    nb.cells[0].metadata["mystnb"] = {"image": {"alt": "a line"}}
    assert figure_cells_without_alt(nb) == []
