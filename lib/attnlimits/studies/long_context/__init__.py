"""The paper's limits at long contexts (chapter 35): a capture that scales (:mod:`.capture`) and the study on a
sample of query rows (:mod:`.study`), from 1,024 tokens up to a model's whole context; the chapter's summaries,
verdicts and figures (:mod:`.report`, imported on first use: the results cache keys on the code the study runs, and
the report is not part of it)."""

from __future__ import annotations

import importlib

from attnlimits.models.kv_capture import KVLayer, LongCapture, capture_long
from attnlimits.studies.long_context.study import (
    BOOK_MODELS,
    COLUMNS,
    PRESETS,
    LongPreset,
    LongResults,
    book_results,
    critical_grid,
    critical_table,
    get_preset,
    layer_type,
    pooled,
    resolve_lengths,
    results,
    run,
    sample_rows,
    stats_table,
)

__all__ = [
    "BOOK_MODELS",
    "COLUMNS",
    "PRESETS",
    "KVLayer",
    "LongCapture",
    "LongPreset",
    "LongResults",
    "book_results",
    "capture_long",
    "critical_grid",
    "critical_table",
    "get_preset",
    "layer_type",
    "pooled",
    "resolve_lengths",
    "results",
    "run",
    "sample_rows",
    "stats_table",
]


def __getattr__(name: str):
    if name == "report":
        return importlib.import_module("attnlimits.studies.long_context.report")
    raise AttributeError(f"module 'attnlimits.studies.long_context' has no attribute {name!r}")
