"""A run's report.html (attnlimits.reporting.run_page) opened in Chromium with the network blocked: every figure shown
and
described, every formula drawn as MathML, no raw TeX, nothing fetched. Its screenshot goes to _build/browser/."""

from __future__ import annotations

import math

import pytest
import torch
from bookcheck import SCREENSHOTS, figure_problems, image_problems, inspect_page, offline_problems, tex_problems

from attnlimits import experiments
from attnlimits.experiments import figures, paper_claims
from attnlimits.reporting import run_page

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The report of a quick run on random causal attention scores (two layers, with their logits)."""
    gen = torch.Generator().manual_seed(0)
    L = 64
    scores = torch.randn(2, 3, L, L, generator=gen, dtype=torch.float64)
    scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)
    values = [torch.randn(2, 3, L, 4, generator=gen) for _ in range(2)]
    res = experiments.run_arrays(logits=[scores, 3 * scores], values=values, preset="quick", name="random scores")
    folder = tmp_path_factory.mktemp("report")
    run_page.write(res, folder, command="attnlimits analyze --out report")
    return res, folder / "report.html"


def test_the_report_renders_offline_with_every_figure_and_formula(browser_context, report):
    res, page = report
    data = inspect_page(browser_context, page.as_uri(), screenshot=SCREENSHOTS / "report.png")
    assert len(data.images) == len(figures.FIGURES)
    assert not image_problems(data.images) and not figure_problems(data.images)
    assert not offline_problems(data) and not tex_problems(data.text)
    assert all(claim.verdict in data.text for claim in paper_claims.claims(res).itertuples())


def test_every_formula_of_the_report_is_drawn(browser_context, report):
    _, page = report
    tab = browser_context.new_page()
    try:
        tab.goto(page.as_uri(), wait_until="load")
        boxes = tab.evaluate(
            "[...document.querySelectorAll('math')].map(m => { const r = m.getBoundingClientRect();"
            " return [r.width, r.height]; })"
        )
    finally:
        tab.close()
    assert len(boxes) > 20
    assert all(w > 0 and h > 0 for w, h in boxes), "a formula takes no space: MathML was not drawn"
