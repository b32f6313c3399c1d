"""What the browser tests check on each page of the built book, as plain functions.

`inspect_page` loads one page in Chromium (Playwright), waits until MathJax has typeset it and the images have
loaded, and collects what a reader sees into a `PageData`; the `*_problems` functions turn that into a list of
human-readable problems per rule (empty: the page passes). Everything except `inspect_page` is pure Python, so
each rule is unit-tested on synthetic input (tests/browser/test_bookcheck.py).
"""

from __future__ import annotations

import ast
import json
import posixpath
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[2]  # the book's checkout
HTML = ROOT / "_build" / "html"  # what `make book` builds
SCREENSHOTS = ROOT / "_build" / "browser"  # one full-page PNG per page, written by the page tests

# Pages that are not chapters, with the reason they are not checked.
EXCLUDED_PAGES = {
    "genindex.html": "Sphinx's generated index page (no content of the book)",
    "search.html": "Sphinx's search page (filled in by JavaScript from searchindex.js)",
    "py-modindex.html": "Sphinx's generated module index",
    "index.html": "a redirect to the root chapter, which is checked itself",
}
EXCLUDED_DIRS = ("_static", "_sources", "_images", "_downloads", "_modules")

RULES = ("mathjax", "tex", "images", "figure-alt", "outputs", "toc", "links", "offline")


@dataclass
class PageData:
    """What the browser saw on one page (see `EXTRACT_JS`)."""

    math_elements: int = 0  # elements Sphinx marked as math (span.math, div.math)
    mathjax_loaded: bool = False
    untypeset: list[str] = field(default_factory=list)  # math elements MathJax left as text
    math: list[dict] = field(default_factory=list)  # {"tex", "mml"} per typeset formula
    math_fonts: list[dict] = field(default_factory=list)  # {"family", "status"} of MathJax's web fonts
    text: str = ""  # visible text of the article, without code, math and scripts
    images: list[dict] = field(default_factory=list)  # {"src", "complete", "width", "alt", "caption", "content"}
    outputs: list[dict] = field(default_factory=list)  # {"classes", "text"} per notebook output
    toc_present: bool = False
    toc: list[str] = field(default_factory=list)  # the right-hand "Contents" entries for ## headings
    hrefs: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)  # uncaught JavaScript exceptions
    refused: list[str] = field(default_factory=list)  # requests that would have left the machine


# --------------------------------------------------------------------------------------------------------------
# Pages of the build and their sources


def book_pages(html_root: Path) -> list[Path]:
    """Every HTML page of the build that the browser tests check, relative to `html_root`."""
    pages = []
    for path in sorted(html_root.rglob("*.html")):
        rel = path.relative_to(html_root)
        if rel.parts[0] in EXCLUDED_DIRS or rel.as_posix() in EXCLUDED_PAGES:
            continue
        pages.append(rel)
    return pages


def source_of(page: Path, book_root: Path) -> Path | None:
    """The source that Jupyter Book rendered as `page` (a chapter's .py pair, .md or .ipynb), or None."""
    stem = book_root / page.with_suffix("")
    for suffix in (".py", ".md", ".ipynb"):
        candidate = stem.with_suffix(suffix)
        if candidate.is_file():
            return candidate
    return None


def markdown_of(source: Path) -> str:
    """The markdown of a chapter source: the markdown cells of a py:percent file or notebook, or a .md file."""
    text = source.read_text(encoding="utf-8")
    if source.suffix == ".md":
        return text
    if source.suffix == ".ipynb":
        cells = json.loads(text)["cells"]
        return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    cells, current = [], None
    for line in text.splitlines():
        if line.startswith("# %%"):
            current = [] if re.match(r"# %%.*\[(markdown|md)\]", line) else None
            if current is not None:
                cells.append(current)
            continue
        if current is not None:
            current.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
    return "\n\n".join("\n".join(c) for c in cells)


def headings(markdown: str, level: int = 2) -> list[str]:
    """The ATX headings of one level in `markdown`, skipping fenced code, directives and $$ math blocks."""
    found, fence, in_math = [], None, False
    for line in markdown.splitlines():
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence) and set(stripped) <= set(fence[0]):
                fence = None
            continue
        m = re.match(r"^(`{3,}|~{3,}|:{3,})", stripped)
        if m:
            fence = m.group(1)
            continue
        if in_math:
            in_math = not stripped.endswith("$$")
            continue
        if stripped.startswith("$$"):
            in_math = stripped == "$$" or not stripped[2:].endswith("$$")
            continue
        m = re.match(r"^(#{1,6})\s+(.+?)\s*#*\s*$", line)
        if m and len(m.group(1)) == level:
            found.append(m.group(2))
    return found


def normalize_heading(text: str) -> str:
    """A heading's words, lower case, without markup and math (the TOC shows math typeset, the source as TeX)."""
    text = re.sub(r"\{[\w:-]+\}`([^`]*)`", r"\1", text)  # MyST roles: {term}`x` -> x
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: [text](url) -> text
    text = re.sub(r"\$[^$]*\$", " ", text)  # inline math
    return " ".join(re.findall(r"[^\W_]+(?:[._][^\W_]+)*", text.lower()))


# --------------------------------------------------------------------------------------------------------------
# The rules


def mathjax_problems(data: PageData) -> list[str]:
    """MathJax must have loaded and typeset every formula, with no error and no undefined macro."""
    problems = []
    if data.math_elements and not data.mathjax_loaded:
        problems.append(f"MathJax did not load, {data.math_elements} formulas are shown as TeX")
    for tex in data.untypeset:
        problems.append(f"formula not typeset: {tex[:80]!r}")
    failed = sorted({f["family"] for f in data.math_fonts if f["status"] == "error"})
    if failed:
        problems.append(f"MathJax fonts failed to load: {', '.join(failed)}")
    elif data.math and not any(f["status"] == "loaded" for f in data.math_fonts):
        problems.append("no MathJax font loaded although the page has formulas")
    for item in data.math:
        mml = item["mml"]
        if "<merror" in mml:
            message = re.search(r'data-mjx-error="([^"]*)"', mml)
            problems.append(f"MathJax error ({message.group(1) if message else 'merror'}) in {item['tex'][:80]!r}")
        for macro in re.findall(r'<mtext mathcolor="red">(\\[^<]*)</mtext>', mml):
            problems.append(f"undefined macro {macro} in {item['tex'][:80]!r}")
    return problems


# Unrendered TeX in visible prose: math delimiters, $...$ spans, $$ and backslash commands.
TEX_PATTERNS = (
    (r"\\[()\[\]]", "a TeX math delimiter"),
    (r"\$\$", "a $$ display-math delimiter"),
    (r"(?<![\w$\\])\$(?=[^\s$])[^$\n]{1,200}?(?<=[^\s\\])\$(?![\w$])", "inline math left as $...$"),
    (r"\\[A-Za-z]+", "a TeX command"),
)


def tex_problems(text: str) -> list[str]:
    """Raw TeX in the visible text of a page (code and typeset math already removed); nearby finds are reported
    together, with their context."""
    spans = sorted((m.start(), m.end(), what) for pattern, what in TEX_PATTERNS for m in re.finditer(pattern, text))
    groups: list[list] = []
    for start, end, what in spans:
        if groups and start <= groups[-1][1] + 40:
            groups[-1][1] = max(groups[-1][1], end)
            groups[-1][2].setdefault(what)
        else:
            groups.append([start, end, {what: None}])
    problems = []
    for start, end, whats in groups:
        context = " ".join(text[max(0, start - 40) : min(len(text), end + 40)].split())
        problems.append(f"unrendered TeX ({', '.join(whats)}) in: ...{context}...")
    return problems


def image_problems(images: list[dict]) -> list[str]:
    """Every image must have loaded (naturalWidth > 0)."""
    return [f"image did not load: {img['src']}" for img in images if not img["complete"] or img["width"] <= 0]


def _is_placeholder_alt(alt: str, src: str) -> bool:
    """myst-nb gives notebook output images their own file path as alt text, which describes nothing."""
    alt = alt.strip()
    name = posixpath.basename(urlsplit(src).path)
    return not alt or posixpath.basename(alt) == name or re.fullmatch(r"\S+\.(png|svg|jpe?g|gif|webp)", alt) is not None


def figure_problems(images: list[dict]) -> list[str]:
    """Every image of the article's content has alt text (not just its file name) or a caption."""
    problems = []
    for img in images:
        if img["content"] and not img["caption"].strip() and _is_placeholder_alt(img["alt"], img["src"]):
            problems.append(f"figure without alt text or caption: {img['src']} (alt={img['alt']!r})")
    return problems


ERROR_LINE = re.compile(r"^(Traceback \(most recent call last\)|[A-Za-z_][\w.]*(Error|Exception): )", re.M)


def output_problems(outputs: list[dict]) -> list[str]:
    """No notebook output may be an error: a traceback, an error output, or error text printed on stderr."""
    problems = []
    for out in outputs:
        classes, text = set(out["classes"]), out["text"]
        first = " ".join(text.strip().split())[:120]
        if {"traceback", "error"} & classes:
            problems.append(f"error output cell: {first!r}")
        elif ERROR_LINE.search(text):
            problems.append(f"output contains an error ({' '.join(sorted(classes))}): {first!r}")
    return problems


def toc_problems(data: PageData, source_headings: list[str]) -> list[str]:
    """The page's "Contents" sidebar lists every ## heading of the page's source."""
    if not source_headings:
        return []
    if not data.toc_present:
        return [f"no 'Contents' sidebar although the source has {len(source_headings)} ## headings"]
    listed = {normalize_heading(t) for t in data.toc}
    return [
        f"## heading missing from the Contents sidebar: {h!r}"
        for h in source_headings
        if normalize_heading(h) not in listed
    ]


@cache
def _anchors(path: Path) -> frozenset[str]:
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    ids = {tag["id"] for tag in soup.find_all(id=True)}
    names = {tag["name"] for tag in soup.find_all("a", attrs={"name": True})}
    return frozenset(ids | names)


def link_problems(page: Path, hrefs: list[str], html_root: Path) -> list[str]:
    """Every link to a local file resolves: the file exists and so does its #anchor (an element id)."""
    problems, page_file = [], html_root / page
    for href in dict.fromkeys(hrefs):  # unique, in page order
        parts = urlsplit(href)
        if parts.scheme or href.startswith("//") or not href or href in ("#", "#top"):
            continue  # external (http, mailto, javascript), or the theme's back-to-top buttons
        target = page_file if not parts.path else (page_file.parent / unquote(parts.path))
        target = Path(posixpath.normpath(target.as_posix()))
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            problems.append(f"link to a missing file: {href}")
            continue
        fragment = unquote(parts.fragment)
        if fragment and target.suffix == ".html" and fragment not in _anchors(target):
            problems.append(f"link to a missing anchor: {href}")
    return problems


#: The calls that check a chapter's sentences against its numbers: they run in the build, tagged remove-cell.
SENTENCE_CHECKS = ("sentences.assert_sentences(", "sentences.expect(")


def _asserts(source: str) -> bool:
    """Whether a cell's source holds an ``assert`` statement (parsed; a line that starts with one where the source
    does not parse)."""
    try:
        return any(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(source)))
    except SyntaxError:
        return re.search(r"^\s*assert\b", source, re.MULTILINE) is not None


def shown_checks(html: str) -> list[str]:
    """The code cells of a built page that show a check (a call checking the prose's sentences, or an ``assert``):
    the page should show none of them; the checks run in the build, in cells tagged remove-cell."""
    soup = BeautifulSoup(html, "html.parser")
    cells = [cell.get_text() for cell in soup.select("div.cell_input")]
    return [" ".join(c.split())[:80] for c in cells if any(call in c for call in SENTENCE_CHECKS) or _asserts(c)]


def offline_problems(data: PageData) -> list[str]:
    """The page renders from the build alone: it requests nothing from the network and raises no JS error."""
    return [f"request to the network: {url}" for url in data.refused] + [
        f"JavaScript error: {e}" for e in data.console_errors
    ]


def problems(rule: str, page: Path, data: PageData, html_root: Path, book_root: Path) -> list[str]:
    """The problems one rule finds on one page."""
    if rule == "mathjax":
        return mathjax_problems(data)
    if rule == "tex":
        return tex_problems(data.text)
    if rule == "images":
        return image_problems(data.images)
    if rule == "figure-alt":
        return figure_problems(data.images)
    if rule == "outputs":
        return output_problems(data.outputs)
    if rule == "toc":
        source = source_of(page, book_root)
        return toc_problems(data, headings(markdown_of(source)) if source else [])
    if rule == "links":
        return link_problems(page, data.hrefs, html_root)
    if rule == "offline":
        return offline_problems(data)
    raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")


# --------------------------------------------------------------------------------------------------------------
# The browser side

# Runs in the page once it has loaded: waits for MathJax and the images, then reports what a reader sees.
EXTRACT_JS = r"""
async () => {
  const mathElements = [...document.querySelectorAll('.math')];
  const out = {math_elements: mathElements.length, mathjax_loaded: false, untypeset: [], math: []};
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
    out.mathjax_loaded = true;
    for (const item of MathJax.startup.document.math) {
      out.math.push({tex: String(item.math), mml: MathJax.startup.toMML(item.root)});
    }
  }
  out.untypeset = mathElements.filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.trim());
  await document.fonts.ready;
  out.math_fonts = [...document.fonts].filter(f => f.family.replace(/"/g, '').startsWith('MJX'))
    .map(f => ({family: f.family.replace(/"/g, ''), status: f.status}));

  const images = [...document.images];
  images.forEach(img => { img.loading = 'eager'; });
  await Promise.all(images.map(img => img.complete ? null : new Promise(resolve => {
    img.addEventListener('load', resolve); img.addEventListener('error', resolve);
    setTimeout(resolve, 10000);
  })));
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  out.images = images.map(img => {
    const figure = img.closest('figure');
    const caption = figure && figure.querySelector('figcaption');
    return {src: img.getAttribute('src') || '', complete: img.complete, width: img.naturalWidth,
            alt: img.getAttribute('alt') || '', caption: caption ? caption.innerText : '',
            content: article.contains(img)};
  });

  const clone = article.cloneNode(true);
  clone.querySelectorAll('pre, code, kbd, samp, script, style, mjx-container, .math, .highlight, ' +
                         'mjx-assistive-mml, .headerlink, .visually-hidden, .sr-only').forEach(e => e.remove());
  document.body.appendChild(clone);  // innerText needs layout; keep it out of view
  clone.style.position = 'absolute'; clone.style.left = '-100000px';
  out.text = clone.innerText;
  clone.remove();

  out.outputs = [...document.querySelectorAll('.cell_output > .output, .cell_output .output')].map(e => ({
    classes: [...e.classList], text: e.innerText}));
  const toc = document.querySelector('#pst-page-toc-nav, nav.page-toc');
  out.toc_present = !!toc;
  out.toc = toc ? [...toc.querySelectorAll('li.toc-h2 > a')].map(a => {
    const c = a.cloneNode(true);
    c.querySelectorAll('mjx-container, .math').forEach(e => e.remove());
    return c.textContent;
  }) : [];
  out.hrefs = [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'));
  return out;
}
"""

NETWORK = re.compile(r"^(https?|wss?|ftp)://")


def inspect_page(context, url: str, screenshot: Path | None = None, timeout_ms: int = 60_000) -> PageData:
    """Load `url` in a new tab of the Playwright browser `context` with the network blocked, let MathJax
    typeset it and the images load, save a full-page `screenshot`, and report what the page shows."""
    page = context.new_page()
    errors: list[str] = []
    refused: list[str] = []

    def refuse(route):
        refused.append(route.request.url)
        route.abort()

    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.route(NETWORK, refuse)
    try:
        page.set_default_timeout(timeout_ms)
        page.goto(url, wait_until="load")
        raw = page.evaluate(EXTRACT_JS)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
    finally:
        page.close()
    return PageData(**raw, console_errors=errors, refused=refused)
