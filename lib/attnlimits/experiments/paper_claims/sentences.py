"""What a chapter's sentences on the rows it reads state, read from the run (the sentences themselves are checked
by :mod:`attnlimits.infra.sentences`)."""

from __future__ import annotations


def rows_read(res) -> dict:
    """The block length of each row sample the run ``res`` read (a Summaries or a Results: its preset's,
    :func:`attnlimits.experiments.row_sample.row_samples`: ``rows``, ``critical``, ``embedding``, ``gradient``; None:
    every row) and ``from``, the position below which every sample reads every row: what a chapter's sentence on its
    rows states."""
    from attnlimits.experiments.row_sample import SAMPLE_FROM, row_samples

    return {**row_samples(res.preset.row_stride), "from": SAMPLE_FROM}
