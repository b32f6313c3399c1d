"""One page per run, to share: ``report.md`` and a self-contained ``report.html`` beside the run's tables.

:func:`write` (a run of Algorithms 1-5: :func:`attnlimits.experiments.run`, :func:`~attnlimits.experiments.run_arrays`)
and :func:`write_long` (the long-context study, :func:`attnlimits.studies.long_context.run`) save the run's tables and
figures into a folder, then a page that says what was run on what (model, text, provenance), how (the command
line, or the Python call), the paper's claims decided on this run by the book's verdict rules (each a rule on a
95 % interval that can fail; the rule is printed beside the verdict), what could not be measured and why, and the
figures with their captions. ``attnlimits analyze`` writes it for every run.

``report.md`` links the PNG files beside it and keeps the formulas as ``$...$`` (GitHub and Jupyter render them);
``report.html`` embeds the figures (base64 PNG) and the formulas (MathML, which browsers draw natively), so it opens
offline, from anywhere, with no script.
"""

from __future__ import annotations

import base64
import html
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from attnlimits import __version__
from attnlimits.experiments.paper_claims import markdown
from attnlimits.infra.verdicts import INCONCLUSIVE, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED

__all__ = ["CAPTIONS", "LONG_CAPTIONS", "Page", "page_of", "write", "write_long"]

#: What each figure of a run of Algorithms 1-5 shows (:data:`attnlimits.experiments.figures.FIGURES`). Every
#: statistic is read per window (over the window's heads), then its median over the windows; every interval is over
#: the windows (order statistics).
CAPTIONS = {
    "fig2a_distance_vs_length": "Figure 2a: the true distance $\\tilde d$, the book's reconstruction $E$ of the "
    "paper's expectation and the bound $d_{\\max}$ against the length $L$ at fixed $N$ (line: each window's median "
    "over its heads, median over the windows; band: 10-90 % of a window's heads, median over the windows; bars: "
    "95 % interval over windows).",
    "fig2a_readings": "Figure 2a under every reading of the paper's expectation (the book's reconstruction $E$, the "
    "exact $E_{mc}$, $E_{full}$ with the inner factor replaced by 1, a permutation null) beside $\\tilde d$: each "
    "window's median over its heads, median over the windows (band: 95 % interval over windows).",
    "fig2b_distance_vs_n": "Figure 2b: $\\tilde d$, $E$ and $d_{\\max}$ against the number of selected tokens $N$ "
    "at the longest $L$ (line, band and bars as in Figure 2a).",
    "fig2b_readings": "Figure 2b under every reading of the expectation (as the readings of Figure 2a).",
    "fig2c_critical_n": "Figure 2c: the critical $N$ (Algorithm 3: the smallest $N$ at which a two-sample KS test "
    "no longer tells the selected tokens' distances from the expectation's) against $L$: each window's own "
    "critical $N$, median over the windows (a window where no evaluated $N$ reached the level counts as $N = L$), "
    "with its 95 % interval over windows, beside the paper's $0.06\\,L$.",
    "fig2c_readings": "Figure 2c's critical $N / L$ under each reading of the expectation (each window's own, "
    "median over the windows; bars: 95 % interval over windows).",
    "fig3_separability": "Figure 3: the fraction $N_s/N$ of the selected tokens that are geometrically "
    "distinguishable, against $N$ (boxes: a window's heads, quartiles and 5-95 %, median over the windows; bars: "
    "the median's 95 % interval over windows), with the book's reconstruction of Theorem 2's bounds.",
    "fig4_gradient": "Figure 4: the softmax's sensitivity $g(T, \\varepsilon)$ against the temperature $T$: the "
    "paper's $g$ read per window (each window's maximum over its heads, median over the windows) and each "
    "window's 95th percentile over its heads, median over the windows, with its 95 % interval over windows, "
    "beside the paper's printed bound $\\min\\{1/(4T), \\sqrt 2\\}$ and the book's sharp $1/(2T)$.",
}

#: What each figure of the long-context study shows (:mod:`attnlimits.studies.long_context.report`).
LONG_CAPTIONS = {
    "weights": "Lemma 1 at long contexts: $L$ times the largest attention weight (without the sink) and the sink's "
    "weight against $L$ (each window's median head, median over the windows; band: 95 % interval over windows).",
    "distance": "The true distance $\\tilde d$ and the expectations $E$ and $E_{full}$ against $L$.",
    "critical": "The critical $N / L$ of Algorithm 3 under $E$ and $E_{full}$ against $L$.",
    "plateau_g": "The plateau of $N_s/N$ and the slope of $g(T)$ at low temperature against $L$.",
    "normalizers": "$L$ times the largest weight under the other normalisers on the same logits.",
}


@dataclass
class Page:
    """What a report says, in the order it says it; :meth:`markdown` and :meth:`html` render it."""

    title: str
    lead: str
    command: str | None
    facts: list[tuple[str, str]]
    claims: pd.DataFrame
    absent: dict[str, str] = field(default_factory=dict)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    figures: list[tuple[Path, str]] = field(default_factory=list)  # (PNG file, caption)
    provenance: dict = field(default_factory=dict)

    # ------------------------------------------------------------------------------------------------ markdown
    def markdown(self) -> str:
        out = [f"# {self.title}", "", self.lead, "", "## How this run was made", ""]
        out += _how(self.command, fence=True)
        facts = pd.DataFrame(self.facts, columns=["field", "value"])
        out += ["", "## Model, text and provenance", "", markdown(facts, ("field", "value"))]
        out += ["## The paper's claims on this run", "", RULES, "", markdown(self.claims, CLAIM_COLUMNS).rstrip()]
        if self.absent:
            out += ["", "## Not measured", ""] + [f"- **{k}**: {v}" for k, v in self.absent.items()]
        for title, table in self.tables:
            out += ["", f"## {title}", "", markdown(table, list(table.columns)).rstrip()]
        if self.figures:
            out += ["", "## Figures"]
            for i, (path, caption) in enumerate(self.figures, 1):
                out += ["", f"![{_plain(caption)}]({path.name})", "", f"*Figure {i}.* {caption}"]
        out += ["", "## Provenance (provenance.json)", "", "```json", json.dumps(self.provenance, indent=2), "```", ""]
        return "\n".join(out)

    # ---------------------------------------------------------------------------------------------------- html
    def html(self) -> str:
        body = [f"<h1>{_html(self.title)}</h1>", f"<p>{_html(self.lead)}</p>", "<h2>How this run was made</h2>"]
        how = _how(self.command, fence=False)
        body.append(f"<pre><code>{html.escape(how[0])}</code></pre>" + "".join(f"<p>{_html(x)}</p>" for x in how[1:]))
        body += ["<h2>Model, text and provenance</h2>", "<table class='facts'>"]
        body += [f"<tr><th>{_html(k)}</th><td>{_html(str(v))}</td></tr>" for k, v in self.facts]
        body += ["</table>", "<h2>The paper's claims on this run</h2>", f"<p>{_html(RULES)}</p>"]
        body.append(_html_table(self.claims, CLAIM_COLUMNS, verdicts=True))
        if self.absent:
            body.append("<h2>Not measured</h2><ul>")
            body += [f"<li><strong>{_html(k)}</strong>: {_html(v)}</li>" for k, v in self.absent.items()]
            body.append("</ul>")
        for title, table in self.tables:
            body += [f"<h2>{_html(title)}</h2>", _html_table(table, list(table.columns))]
        if self.figures:
            body.append("<h2>Figures</h2>")
            for i, (path, caption) in enumerate(self.figures, 1):
                data = base64.b64encode(path.read_bytes()).decode()
                body.append(
                    f"<figure><img src='data:image/png;base64,{data}' alt='{html.escape(_plain(caption), quote=True)}'>"
                    f"<figcaption><strong>Figure {i}.</strong> {_html(caption)}</figcaption></figure>"
                )
        body += [
            "<h2>Provenance (provenance.json)</h2>",
            f"<details><summary>every field</summary><pre><code>{html.escape(json.dumps(self.provenance, indent=2))}"
            "</code></pre></details>",
        ]
        return (
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{html.escape(self.title)}</title><style>{STYLE}</style></head>\n<body><main>\n"
            + "\n".join(body)
            + "\n</main></body></html>\n"
        )


CLAIM_COLUMNS = ["figure", "paper", "measured", "verdict", "rule"]
RULES = (
    f"Each verdict is a rule on this run's numbers that can fail, printed beside it: mostly, {REPRODUCED} when a "
    f"95 % interval over the run's windows lies inside the band the rule names, {NOT_REPRODUCED} when it lies wholly "
    f"outside, {INCONCLUSIVE} otherwise. A rule is the book's reading of the paper's claim; where the book "
    "reconstructs a formula the paper does not print, the claim says so."
)
#: The background of a verdict's cell in ``report.html``.
_VERDICT_BACKGROUNDS = {REPRODUCED: "#e3f4e3", NOT_REPRODUCED: "#fbe3e3", INCONCLUSIVE: "#fff4d6", NOT_MEASURED: "#eee"}


def _css_class(verdict: str) -> str:
    """The class of a verdict's cell in ``report.html`` (``not reproduced`` -> ``not-reproduced``)."""
    return verdict.replace(" ", "-")


STYLE = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;line-height:1.5;color:#222;margin:0}"
    "main{max-width:1100px;margin:auto;padding:1.5rem}table{border-collapse:collapse;margin:1rem 0;width:100%}"
    "th,td{border:1px solid #ccc;padding:.35rem .5rem;vertical-align:top;text-align:left;font-size:.92rem}"
    "table.facts th{width:14rem;background:#f6f6f6}pre{background:#f6f6f6;padding:.75rem;overflow-x:auto}"
    "figure{margin:1.5rem 0}figure img{max-width:min(100%,760px);height:auto}figcaption{font-size:.92rem;color:#444}"
    + "".join(f".{_css_class(verdict)}{{background:{colour}}}" for verdict, colour in _VERDICT_BACKGROUNDS.items())
    + "math{font-size:1.05em}"
)


def _how(command: str | None, fence: bool) -> list[str]:
    if command is None:
        lines = [
            "attnlimits.reporting.run_page.write(results, folder)",
            "Written from Python: the run's arguments are in its provenance below (preset, windows, seed, options).",
        ]
    else:
        lines = [command, "Run again with this command to reproduce the tables (the same seed repeats exactly)."]
    if fence:
        return ["```bash" if command else "```python", lines[0], "```", "", lines[1]]
    return lines


def _html_table(table: pd.DataFrame, columns: list[str], verdicts: bool = False) -> str:
    head = "".join(f"<th>{_html(c)}</th>" for c in columns)
    rows = []
    for row in table[columns].itertuples(index=False):
        cells = []
        for column, value in zip(columns, row, strict=True):
            text = value if isinstance(value, str) else _number(value)
            css = f" class='{_css_class(text)}'" if verdicts and column == "verdict" else ""
            cells.append(f"<td{css}>{_html(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _number(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


_MATH = re.compile(r"(?<!\\)\$(.+?)(?<!\\)\$")


def _html(text: str) -> str:
    """``text`` as HTML: escaped, each ``$...$`` as MathML."""
    from latex2mathml.converter import convert

    out, last = [], 0
    for m in _MATH.finditer(text):
        out.append(html.escape(text[last : m.start()]))
        out.append(convert(m.group(1)))
        last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


_PLAIN = {r"\tilde d": "d~", r"\varepsilon": "eps", r"\max": "max", r"\min": "min", r"\sqrt": "sqrt", r"\,": " "}


def _plain(text: str) -> str:
    """``text`` without TeX, for alt text: formulas as their source with the commands spelled out."""
    for tex, word in _PLAIN.items():
        text = text.replace(tex, word)
    return re.sub(r"[${}\\]", "", text)


# --------------------------------------------------------------------------------------------------------------
# the two kinds of run
# --------------------------------------------------------------------------------------------------------------
def _facts(p: dict, more: Sequence[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    model, text = p["model"], p["text"]
    facts = [("model", model.get("model_id", "?"))]
    facts += [(f"model {k}", str(v)) for k, v in model.items() if k not in ("model_id",) and not isinstance(v, dict)]
    facts += [("text", text.get("name", "?")), ("text sha256", str(text.get("sha256", "?")))]
    facts += list(more)
    if p.get("versions"):
        facts.append(("versions", ", ".join(f"{k} {v}" for k, v in p["versions"].items())))
    facts += [
        (
            "wall time",
            f"{p['seconds']['total']:.1f} s ("
            + ", ".join(f"{k} {v:.1f} s" for k, v in p["seconds"].items() if k != "total")
            + ")",
        )
    ]
    return facts


def _write_page(page: Page, folder: Path) -> list[Path]:
    (folder / "report.md").write_text(page.markdown(), encoding="utf-8")
    (folder / "report.html").write_text(page.html(), encoding="utf-8")
    return [folder / "report.md", folder / "report.html"]


def write(res, folder, *, command: str | None = None) -> list[Path]:
    """Write a run of Algorithms 1-5 into ``folder`` (created): its tables and ``provenance.json``
    (:meth:`attnlimits.experiments.Results.save`), ``claims.csv`` and ``readings.csv``
    (:func:`attnlimits.experiments.paper_claims.save_tables`), the figures (PNG and SVG; those whose table the run
    lacks are
    left out), ``report.md`` and ``report.html``. ``command``: the command line that made the run (``attnlimits
    analyze`` passes its own), shown on the page. Returns the two report files."""
    from attnlimits.experiments import figures, paper_claims

    folder = Path(folder)
    res.save(folder)
    paper_claims.save_tables(res, folder)
    figures.save_all(res, folder)
    return _write_page(page_of(res, folder, command), folder)


def page_of(res, folder, command: str | None = None) -> Page:
    """The :class:`Page` of a run of Algorithms 1-5 whose figures :func:`write` saved in ``folder``."""
    from attnlimits.experiments import figures, paper_claims

    folder = Path(folder)
    p = res.provenance
    preset = p["preset"]
    heads = int(res.sink.groupby("window").size().iloc[0])
    more = [
        ("preset", f"{preset['name']}: " + ", ".join(f"{k} = {v}" for k, v in preset.items() if k != "name")),
        ("windows", f"{len(p['windows'])} ({', '.join(map(str, p['windows']))}), {heads} heads each"),
        (
            "options",
            f"seed {p['seed']}, exclude_sink={p['exclude_sink']}, tokens={p['tokens']}, "
            f"precision {p['precision']} (Algorithms 1-3), BOS first: {p['bos']}, device {p['device']}",
        ),
    ]
    if p.get("normalizer"):
        swapped = f"{p['normalizer']} in softmax's place, on the model's own logits (every algorithm)"
        more.append(("normaliser", swapped))
    if "mask" in p:
        more.append(("masks", ", ".join(f"layer {k}: {v}" for k, v in p["mask"].items())))
    absent = dict(p.get("absent", {}))
    drawn = figures.drawable(res)
    return Page(
        title=f"attnlimits report: {p['model'].get('model_id')} on {p['text'].get('name')}"
        + (f", normaliser {p['normalizer']}" if p.get("normalizer") else ""),
        lead=(
            f"The paper's Algorithms 1-5 (arXiv:2508.17821) on every head of {heads} heads x "
            f"{len(p['windows'])} windows, preset {preset['name']}, written {time.strftime('%Y-%m-%d %H:%M')} by "
            f"attnlimits {__version__}. Every statistic is read per window (over the window's heads: a median, a "
            "quantile, a maximum where the paper takes one, the window's own critical $N$), then its median over "
            "the windows; every interval is a 95 % interval over the windows (order statistics)."
        ),
        command=command,
        facts=_facts(p, more),
        claims=paper_claims.claims(res),
        absent=absent,
        figures=[(folder / f"{name}.png", CAPTIONS[name]) for name in drawn],
        provenance=p,
    )


def write_long(res, folder, *, command: str | None = None) -> list[Path]:
    """Write a long-context run (:class:`attnlimits.studies.long_context.LongResults`) into ``folder`` (created): its
    per-head ``long_*.csv`` tables and ``long_provenance.json``, its windows' summaries over heads
    (``window_summary.csv``, :func:`attnlimits.studies.long_context.summarize`), ``long_claims.csv``,
    ``long_summary.csv``, the five figures (PNG), ``report.md`` and ``report.html``. Returns the two report files."""
    import matplotlib.pyplot as plt

    from attnlimits.studies.long_context import report, summarize

    folder = Path(folder)
    res.save(folder)
    windows = summarize(res)
    windows.summary.to_csv(folder / "window_summary.csv", index=False, float_format="%.17g")
    claims = report.claims_table([windows])
    summary = report.main_table([windows])
    claims.to_csv(folder / "long_claims.csv", index=False)
    summary.to_csv(folder / "long_summary.csv", index=False)
    drawn = []
    for name in LONG_CAPTIONS:
        fig = getattr(report, f"figure_{name}")([windows])
        fig.savefig(folder / f"long_{name}.png", bbox_inches="tight", dpi=150)
        plt.close(fig)
        drawn.append((folder / f"long_{name}.png", LONG_CAPTIONS[name]))
    p = res.provenance
    preset = p["preset"]
    more = [
        ("preset", f"{preset['name']}: " + ", ".join(f"{k} = {v}" for k, v in preset.items() if k != "name")),
        ("windows", ", ".join(map(str, p["windows"]))),
        ("peak memory", f"{p['peak_memory_gb']:.2f} GB"),
    ]
    page = Page(
        title=f"attnlimits long-context report: {p['model'].get('model_id')} on {p['text'].get('name')}",
        lead=(
            f"The paper's quantities at L = {', '.join(map(str, preset['lengths']))} on {preset['rows']} sampled "
            f"query rows per length, written {time.strftime('%Y-%m-%d %H:%M')} by attnlimits {__version__}."
        ),
        command=command,
        facts=_facts(p, more),
        claims=claims,
        tables=[
            ("Summary (each window's median head, median over the windows)", summary),
            ("SDPA against eager attention", res.exactness),
        ],
        figures=drawn,
        provenance=p,
    )
    return _write_page(page, folder)
