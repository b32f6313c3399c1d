"""The long contexts' place in the book's results pipeline (:mod:`attnlimits.reporting.book_results`): chapter 35's
runs of both offline models (:func:`attnlimits.studies.long_context.book_results`) at the reduced preset. Outside
the study's results-cache key, as :mod:`.report` is: the study does not import this module."""

from __future__ import annotations

import functools

from attnlimits.infra import shipping
from attnlimits.infra.pipeline import Study, one_part, where

__all__ = ["STUDY"]


def _presets() -> list[str]:
    from attnlimits.studies.long_context import study

    return list(study.PRESETS)


def _reduced() -> str:
    return "reduced"


def _long_context(preset: str, *, inputs, n_jobs: int, progress) -> str:
    from attnlimits.studies.long_context import study

    runs = study.book_results(preset, progress=progress)
    models = ", ".join(r.label for r in runs.results) or "no model"
    return models + "".join(f"; not run: {why}" for why in runs.not_run)


def _shards(preset: str) -> list[shipping.Shard]:
    """What the book ships of chapter 35: each offline model's windows on the default text, each window's
    results-cache entry whole (its summaries over heads, :class:`~attnlimits.studies.long_context.LongSummaries`;
    its provenance records the machine's times and memory, not a result)."""
    from attnlimits.experiments import shipped
    from attnlimits.studies.long_context import study

    p = study.get_preset(preset)
    out = []
    for name in study.BOOK_MODELS:
        for w in range(p.windows):
            key = {
                "preset": p.as_dict(),
                "model": shipped.model_key(name),
                "text": shipped.text_key(),
                "seed": 0,
                "window": w,
            }
            compute = functools.partial(_compute, p.name, name, w)
            out.append(
                shipping.entry_shard(
                    f"long-context/{p.name}/{name}/{study.window_folder(w, p)}",
                    (study.__name__,),
                    key,
                    compute,
                    seconds=250.0,
                    records=("provenance.json",),
                )
            )
    return out


def _compute(preset: str, name: str, window: int, root) -> None:
    from attnlimits import models
    from attnlimits.experiments import shipped
    from attnlimits.studies.long_context import study

    study.results(models.load(name), shipped.text(shipped.DEFAULT_TEXT), preset, window=window, root=root)


STUDY = Study(
    "long-context",
    "both offline models from 1,024 tokens up (reduced: to 8,192 on 8 windows; full: the whole context) on a "
    "sample of query rows (chapter 35)",
    _presets,
    _reduced,
    one_part("long-context", 200.0, _long_context),
    where,
    _shards,
)
