"""Each rule of the browser tests, proven to fire on small synthetic input.

The pure-Python rules run in the plain `pytest`; the end-to-end ones load synthetic pages (with MathJax from the
pinned package, as the book ships it) in Chromium and are marked `browser` like the page tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from bookcheck import (
    ROOT,
    RULES,
    PageData,
    figure_problems,
    headings,
    image_problems,
    inspect_page,
    link_problems,
    markdown_of,
    mathjax_problems,
    normalize_heading,
    output_problems,
    problems,
    shown_checks,
    tex_problems,
    toc_problems,
)

CHAPTER_PY = """\
# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
# ---

# %% [markdown]
# # Title
#
# ## First section with $L$ tokens
#
# ```python
# ## not a heading (code)
# ```
#
# $$
# ## not a heading (math)
# $$

# %%
# ## not a heading (a comment in a code cell)
x = 1

# %% [markdown]
# ## `attnlimits.core.selection`: the *second* one
# ### a subsection
"""


def test_headings_of_a_py_percent_chapter(tmp_path):
    source = tmp_path / "ch.py"
    source.write_text(CHAPTER_PY)
    assert headings(markdown_of(source)) == [
        "First section with $L$ tokens",
        "`attnlimits.core.selection`: the *second* one",
    ]
    assert headings(markdown_of(source), level=3) == ["a subsection"]


def test_normalized_headings_match_the_rendered_toc():
    # The TOC shows math typeset (removed before comparing) and markup rendered.
    assert normalize_heading("First section with $L$ tokens") == normalize_heading("First section with  tokens")
    assert (
        normalize_heading("`attnlimits.core.selection`: the *second* one") == "attnlimits.core.selection the second one"
    )
    assert normalize_heading("Theorem 2, upper bound: the book’s statement") == normalize_heading(
        "Theorem 2, upper bound: the book's statement"
    )


def test_toc_rule_fires_on_a_missing_heading():
    data = PageData(toc_present=True, toc=["First section with  tokens"])
    assert toc_problems(data, ["First section with $L$ tokens"]) == []
    found = toc_problems(data, ["First section with $L$ tokens", "Corollary 2"])
    assert found == ["## heading missing from the Contents sidebar: 'Corollary 2'"]
    assert toc_problems(PageData(toc_present=False), ["A"]) != []
    assert toc_problems(PageData(toc_present=False), []) == []


@pytest.mark.parametrize(
    "text",
    [
        r"the bound \(x\) holds",
        r"display \[ x \] here",
        "$$ left as text",
        "a weight $\\alpha_i$ here",
        "a weight $x$ here",
        r"stray \tilde d in prose",
    ],
)
def test_tex_rule_fires(text):
    assert len(tex_problems(text)) == 1, tex_problems(text)


def test_tex_rule_is_quiet_on_prose_and_groups_nearby_finds():
    assert tex_problems("It costs $5 and $6; 50 % of 2 tokens; a/b, path C:/x.") == []
    found = tex_problems(r"Theorem. $\tilde d \le d_{\max} := (1 - \bar\alpha_N)$. Then more prose.")
    assert len(found) == 1 and "TeX command" in found[0] and r"\tilde d" in found[0]


def test_mathjax_rule_fires_on_errors_undefined_macros_and_missing_mathjax():
    ok = {"tex": "x", "mml": "<math><mi>x</mi></math>"}
    error = {"tex": r"\frac{1}{", "mml": '<math><merror data-mjx-error="Missing close brace">…</merror></math>'}
    undefined = {"tex": r"\foo x", "mml": '<math><mtext mathcolor="red">\\foo</mtext><mi>x</mi></math>'}
    loaded = [{"family": "MJXTEX", "status": "loaded"}]
    assert mathjax_problems(PageData(math_elements=1, mathjax_loaded=True, math=[ok], math_fonts=loaded)) == []
    found = mathjax_problems(PageData(math_elements=1, mathjax_loaded=True, math=[error], math_fonts=loaded))
    assert len(found) == 1 and "Missing close brace" in found[0]
    found = mathjax_problems(PageData(mathjax_loaded=True, math=[undefined], math_fonts=loaded))
    assert len(found) == 1 and "undefined macro \\foo" in found[0]
    assert "did not load" in mathjax_problems(PageData(math_elements=3, mathjax_loaded=False))[0]
    assert "not typeset" in mathjax_problems(PageData(mathjax_loaded=True, untypeset=[r"\(x\)"]))[0]
    fonts = [{"family": "MJXTEX", "status": "loaded"}, {"family": "MJXTEX-I", "status": "error"}]
    assert "fonts failed to load: MJXTEX-I" in mathjax_problems(PageData(mathjax_loaded=True, math_fonts=fonts))[0]
    unloaded = [{"family": "MJXTEX", "status": "unloaded"}]
    assert "no MathJax font" in mathjax_problems(PageData(mathjax_loaded=True, math=[ok], math_fonts=unloaded))[0]


def image(src="../_images/a.png", complete=True, width=640, alt="", caption="", content=True):
    return {"src": src, "complete": complete, "width": width, "alt": alt, "caption": caption, "content": content}


def test_image_rules_fire():
    assert image_problems([image()]) == []
    assert image_problems([image(width=0)]) == ["image did not load: ../_images/a.png"]
    assert figure_problems([image(alt="Weights against L on log axes")]) == []
    assert figure_problems([image(caption="Figure 1. Weights.")]) == []
    assert figure_problems([image(alt="", content=False)]) == []  # theme icons are not figures
    assert len(figure_problems([image(alt="")])) == 1
    assert len(figure_problems([image(alt="../_images/a.png")])) == 1  # myst-nb's placeholder: the file path


def test_output_rule_fires():
    assert output_problems([{"classes": ["output", "stream"], "text": "done in 3 s"}]) == []
    assert len(output_problems([{"classes": ["output", "traceback"], "text": "---\nValueError"}])) == 1
    assert len(output_problems([{"classes": ["output", "stream"], "text": "Traceback (most recent call last):"}])) == 1
    assert len(output_problems([{"classes": ["output", "stderr"], "text": "RuntimeError: boom"}])) == 1


def test_link_rule_fires(tmp_path):
    (tmp_path / "ch").mkdir()
    (tmp_path / "ch" / "a.html").write_text('<h2 id="sec">S</h2><a name="old"></a>')
    (tmp_path / "ch" / "b.html").write_text("<p>b</p>")
    page = Path("ch/b.html")
    good = ["a.html", "a.html#sec", "a.html#old", "#", "https://example.org/x", "mailto:a@b.c", "../ch/a.html"]
    assert link_problems(page, good, tmp_path) == []
    assert link_problems(page, ["c.html"], tmp_path) == ["link to a missing file: c.html"]
    assert link_problems(page, ["a.html#nope"], tmp_path) == ["link to a missing anchor: a.html#nope"]
    assert link_problems(page, ["#nope"], tmp_path) == ["link to a missing anchor: #nope"]


def test_problems_names_the_allowed_rules():
    with pytest.raises(ValueError, match="rule must be one of mathjax"):
        problems("spelling", Path("x.html"), PageData(), ROOT, ROOT)


# ---------------------------------------------------------------------------------------------------------------
# End to end in Chromium, on synthetic pages shaped like the book's.

PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8">
<script>window.MathJax = {{"options": {{"processHtmlClass": "mathjax_process|math|output_area"}}}}</script>
<script defer src="mathjax/tex-mml-chtml.js"></script>{head}</head>
<body class="tex2jax_ignore mathjax_ignore"><article class="bd-article">
<section id="first"><h2>First section with <span class="math notranslate nohighlight">\\(L\\)</span> tokens</h2>
<p>Weights <span class="math notranslate nohighlight">\\(\\alpha_i = 1/L\\)</span>.</p>
<div class="math notranslate nohighlight">\\[ \\tilde d = \\sum_i \\lVert \\alpha_i x_i - s \\rVert_2 \\]</div>
{body}</section></article>
<nav id="pst-page-toc-nav" class="page-toc"><ul>
<li class="toc-h2"><a href="#first">First section with <span class="math">\\(L\\)</span> tokens</a></li>{toc}</ul></nav>
</body></html>"""

CHAPTER_MD = "# Title\n\n## First section with $L$ tokens\n\ntext\n"

DEFECTS = {
    "clean": {},
    "mathjax": {"body": '<p><span class="math notranslate nohighlight">\\(\\frac{1}{\\)</span></p>'},
    "undefined-macro": {"body": '<p><span class="math notranslate nohighlight">\\(\\notamacro x\\)</span></p>'},
    "tex": {"body": "<p>Theorem 1. $\\tilde d \\le d_{\\max}$ holds.</p>"},
    "images": {"body": '<figure><img src="missing.png" alt="A plot"><figcaption>Plot.</figcaption></figure>'},
    "figure-alt": {"body": '<img src="dot.png" alt="dot.png">'},
    "outputs": {
        "body": '<div class="cell_output docutils container"><div class="output traceback highlight-ipythontb">'
        "<pre>ValueError: boom</pre></div></div>"
    },
    "toc": {"md": CHAPTER_MD + "\n## Corollary 2\n"},
    "links": {"body": '<p><a href="other.html#nowhere">see</a> <a href="gone.html">gone</a></p>'},
    "offline": {"head": '<script src="https://cdn.example.org/lib.js"></script>'},
}

# A 1x1 PNG.
DOT = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360f8cf"
    "c0f01f0005000201e2b3b8a50000000049454e44ae426082"
)


@pytest.fixture(scope="module")
def synthetic_book(tmp_path_factory):
    """A folder with MathJax (copied as the book's extension copies it) and one page per defect."""
    sys.path.insert(0, str(ROOT / "_ext"))
    import offline_mathjax

    root = tmp_path_factory.mktemp("book")
    html = root / "html"
    offline_mathjax.copy_mathjax(offline_mathjax.mathjax_es5(), html / "mathjax", "tex-mml-chtml.js")
    (html / "dot.png").write_bytes(DOT)
    (html / "other.html").write_text('<p id="here">other</p>')
    for name, parts in DEFECTS.items():
        (html / f"{name}.html").write_text(PAGE.format(head=parts.get("head", ""), body=parts.get("body", ""), toc=""))
        (root / f"{name}.md").write_text(parts.get("md", CHAPTER_MD))
    return root


@pytest.mark.browser
@pytest.mark.parametrize("defect", list(DEFECTS))
def test_each_rule_fires_in_the_browser(defect, synthetic_book, browser_context, tmp_path):
    html = synthetic_book / "html"
    page = Path(f"{defect}.html")
    data = inspect_page(browser_context, (html / page).as_uri(), screenshot=tmp_path / "shot.png")
    assert (tmp_path / "shot.png").stat().st_size > 0
    # The synthetic sources live beside the html folder: <root>/<name>.md for <root>/html/<name>.html.
    found = {rule: problems(rule, page, data, html, synthetic_book) for rule in RULES}
    fired = {rule for rule, f in found.items() if f}
    expected = {"undefined-macro": {"mathjax"}}.get(defect, set() if defect == "clean" else {defect})
    assert fired == expected, found
    if defect == "clean":
        assert data.mathjax_loaded and len(data.math) == data.math_elements == 4 and not data.untypeset
        assert {f["status"] for f in data.math_fonts} >= {"loaded"}


@pytest.mark.browser
def test_mathjax_without_its_fonts_is_caught(synthetic_book, browser_context, tmp_path):
    import shutil

    html = tmp_path / "html"
    shutil.copytree(synthetic_book / "html", html)
    shutil.rmtree(html / "mathjax" / "output" / "chtml" / "fonts")
    data = inspect_page(browser_context, (html / "clean.html").as_uri())
    assert data.mathjax_loaded and len(data.math) == 4
    assert any("fonts failed to load" in p for p in mathjax_problems(data)), data.math_fonts


def test_the_shown_check_detector_fires():
    cell = '<div class="cell_input docutils container"><pre>_ = sentences.assert_sentences({})</pre></div>'
    assert len(shown_checks(cell)) == 1
    assert shown_checks(cell.replace("assert_sentences", "markdown")) == []


def test_a_shown_assert_is_caught_and_a_word_is_not():
    def cell(source):
        return f'<div class="cell_input docutils container"><pre>{source}</pre></div>'

    assert len(shown_checks(cell("x = 1\nassert x == 1"))) == 1
    assert len(shown_checks(cell("%matplotlib inline\n  assert ok"))) == 1  # no Python: read line by line
    assert shown_checks(cell('asserted = "assert x"\nprint(asserted)')) == []
    assert shown_checks('<div class="cell_output"><pre>assert x</pre></div>') == []
