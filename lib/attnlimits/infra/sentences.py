"""A page's sentences checked against the numbers of the run it shows (when the run is the one its prose
describes).

- :data:`DESCRIBED`          the run the chapters' prose was written from (model, text and preset names).
- :func:`describes`          whether a run is that run (or another page's, with entries replaced).
- :func:`assert_sentences`   each sentence must hold on the described run; on any other run the failures are
                             printed and the page runs on.
- :func:`expect`             a table's verdicts (``key``, ``verdict``) as such sentences.

The theory chapters (seeded synthetic data: every run is the one their prose describes) pass ``described=True``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from attnlimits.infra.verdicts import HOLDS

__all__ = ["DESCRIBED", "assert_sentences", "describes", "expect"]

#: The run whose results the chapters' prose describes (the machines that build the book): model id, text name and
#: preset name. A page computed on another preset, or on several models, replaces the entries that differ.
DESCRIBED = {"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "text": "pydoc-topics", "preset": "paper"}


def describes(run, described: Mapping | None = None) -> bool:
    """Whether ``run`` is the run a page's prose was written from.

    ``run``: a :class:`attnlimits.experiments.Results` (its provenance names the model id, the text and the preset)
    or a ``(model, text, preset)`` tuple of names (a comparison of several models passes a tuple of their labels as
    ``model``). ``described``: what the prose was written from, as :data:`DESCRIBED` (the default) with any of its
    entries replaced, e.g. ``{"preset": "reduced"}``.
    """
    unknown = sorted(set(described or {}) - set(DESCRIBED))
    if unknown:
        raise ValueError(f"described: unknown entries {unknown}; allowed: {list(DESCRIBED)}")
    want = {**DESCRIBED, **(described or {})}
    if isinstance(run, tuple):
        if len(run) != 3:
            raise ValueError(f"run: expected a Results or a (model, text, preset) tuple, got a {len(run)}-tuple")
        got = run
    elif hasattr(run, "provenance"):
        p = run.provenance
        got = (p["model"].get("model_id"), p["text"].get("name"), p["preset"]["name"])
    else:
        raise ValueError(f"run: expected a Results or a (model, text, preset) tuple, got {type(run).__name__}")
    return got == (want["model"], want["text"], want["preset"])


def assert_sentences(
    statements: Mapping[str, bool], *, described: bool, about: str = "the run that builds the book"
) -> pd.Series:
    """Check a page's sentences on the numbers of the run it shows; ``statements`` maps each sentence to whether
    the numbers bear it out.

    When ``described`` (the run is the one the prose was written from, see :func:`describes`) every sentence must
    hold: an AssertionError names those that do not. On any other run (a reader's own model, text or preset) the
    prose does not apply: the sentences that do not hold are printed, naming ``about`` (what the prose describes),
    and the page runs to the end. Returns whether each sentence holds (a boolean Series named ``holds``).
    """
    bad = [s for s, ok in statements.items() if not isinstance(ok, bool | np.bool_)]
    if bad:
        raise TypeError(f"statements: each sentence must map to a single bool (use .all() or .any()); not so for {bad}")
    holds = pd.Series({s: bool(ok) for s, ok in statements.items()}, name=HOLDS, dtype=bool)
    failed = list(holds.index[~holds])
    if described:
        assert not failed, f"the text no longer matches the numbers: {failed}"
    elif failed:
        print(f"note: the text describes {about}; on this run {len(failed)} of its sentences do not hold:")
        for sentence in failed:
            print(f"  - {sentence}")
    return holds


def expect(res, table: pd.DataFrame, expected: dict[str, str]) -> dict[str, str]:
    """The verdicts of ``table`` (columns ``key`` and ``verdict``) by key; asserted equal to ``expected`` when the
    prose describes ``res`` (:func:`describes`).

    Each expected verdict is a sentence for :func:`assert_sentences`: for another model or text (a reader's own
    run) the prose does not apply, the differences are printed instead, and the chapter runs to the end.
    """
    verdicts = dict(zip(table.key, table.verdict, strict=True))
    statements = {}
    for key, want in expected.items():
        got = verdicts.get(key)
        sentence = f"{key} is {want!r}" if got == want else f"{key} is {want!r} (measured: {got!r})"
        statements[sentence] = got == want
    assert_sentences(statements, described=describes(res), about=f"{DESCRIBED['model']} on {DESCRIBED['text']}")
    return verdicts
