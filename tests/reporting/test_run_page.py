"""The one-page report of a run (attnlimits.reporting.run_page): what it says, that it names what it could not measure,
and
that report.html stands alone (figures and formulas embedded, nothing fetched)."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

from attnlimits import experiments
from attnlimits.experiments import figures, paper_claims
from attnlimits.reporting import run_page


def _arrays(L=48, seed=0):
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(2, 3, L, L, generator=gen, dtype=torch.float64)
    scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)
    return {"logits": [scores, 2 * scores], "values": [torch.randn(2, 3, L, 4, generator=gen) for _ in range(2)]}


@pytest.fixture(scope="module")
def with_logits(tmp_path_factory):
    folder = tmp_path_factory.mktemp("with-logits")
    res = experiments.run_arrays(**_arrays(), preset="quick", name="random scores", text="no text")
    run_page.write(res, folder, command="attnlimits analyze --out here")
    return res, folder


@pytest.fixture(scope="module")
def weights_only(tmp_path_factory):
    folder = tmp_path_factory.mktemp("weights-only")
    given = _arrays()
    weights = [torch.softmax(s, -1) for s in given.pop("logits")]
    res = experiments.run_arrays(weights=weights, **given, preset="quick")
    run_page.write(res, folder)
    return res, folder


def test_the_markdown_report_holds_the_claims_the_provenance_and_every_figure(with_logits):
    res, folder = with_logits
    md = (folder / "report.md").read_text()
    assert md.startswith("# attnlimits report: random scores on no text")
    assert "```bash\nattnlimits analyze --out here\n```" in md
    # the statistics as the analysis reads them: per window over its heads, then averaged over the windows
    assert "Every statistic is read per window" in md and "averaged over the windows" in md
    assert not any("median over heads" in c or "of heads;" in c for c in run_page.CAPTIONS.values())
    claims = paper_claims.claims(res)
    for claim in claims.itertuples():
        assert f"| {claim.figure} | {claim.paper} | {claim.measured} | {claim.verdict} |" in md
    linked = re.findall(r"!\[[^\]]+\]\(([\w.]+\.png)\)", md)
    assert linked == [f"{name}.png" for name in figures.FIGURES] and all((folder / f).is_file() for f in linked)
    written = json.loads(md.split("```json\n")[1].split("\n```")[0])
    assert written == json.loads((folder / "provenance.json").read_text())
    assert "## Not measured" in md and "no embeddings were given" in md and "**gradient**" not in md


def test_a_run_without_logits_says_algorithm_5_was_not_measured_and_draws_no_figure_4(weights_only):
    res, folder = weights_only
    md = (folder / "report.md").read_text()
    assert "- **gradient**: Algorithm 5 and the other normalisers read the attention logits" in md
    fig4 = paper_claims.claims(res, "4")
    assert set(fig4.verdict) == {paper_claims.NOT_MEASURED}
    assert not (folder / "fig4_gradient.png").exists() and "fig4_gradient" not in md
    assert "attnlimits.reporting.run_page.write(results, folder)" in md  # written from Python: no command line


def test_the_html_report_embeds_every_figure_and_typesets_every_formula(with_logits):
    res, folder = with_logits
    page = (folder / "report.html").read_text()
    assert page.count("<img src='data:image/png;base64,") == len(figures.FIGURES)
    assert page.count("<figcaption>") == len(figures.FIGURES)
    # nothing is fetched: no address, no script, no external stylesheet
    assert not re.search(r"(src|href)=['\"](https?:|//)", page) and "<script" not in page and "<link" not in page
    text = re.sub(r"<pre>.*?</pre>|<math.*?</math>|<[^>]+>", " ", page, flags=re.S)
    assert "$" not in text and "\\" not in text, "a formula was left as TeX"
    assert page.count("<math") >= len(paper_claims.claims(res))
    verdicts = re.findall(r"<td class='([\w-]+)'>", page)
    assert verdicts == [v.replace(" ", "-") for v in paper_claims.claims(res).verdict]
