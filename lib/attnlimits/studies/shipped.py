"""What the book ships of chapters 32, 33, 35 and 36, put back into the results cache (:func:`restore`): the
training sweep's pieces, the alternative normalisers' tables and the long contexts' runs, each a results-cache
entry shipped whole under ``results/`` (:func:`attnlimits.infra.shipping.entry_shard`)."""

from __future__ import annotations

__all__ = ["restore"]


def restore() -> list[str]:
    """Put the results the book ships of chapters 32, 33, 35 and 36 (their results-cache entries, under
    ``results/``) into the results cache, where the studies read them as their own: a no-op when they are there,
    and nothing for an entry the code no longer computes (the study computes it then). Returns the entries
    written. What the chapters call first, so that a fresh clone reads the book's results instead of computing
    them (:func:`attnlimits.infra.shipping.restore`)."""
    from attnlimits.infra import shipping
    from attnlimits.studies.alternatives import pipeline as alternatives
    from attnlimits.studies.long_context import pipeline as long_context
    from attnlimits.studies.training import pipeline as training

    shards = [s for study in (training, alternatives, long_context) for s in study.STUDY.shards(study.STUDY.preset())]
    return shipping.restore(shards)
