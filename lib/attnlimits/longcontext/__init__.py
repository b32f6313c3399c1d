"""The paper's limits at long contexts (chapter 35): a capture that scales (:mod:`.capture`) and the study on a
sample of query rows (:mod:`.study`), from 1,024 tokens up to a model's whole context."""

from __future__ import annotations

from attnlimits.longcontext.capture import KVLayer, LongCapture, capture_long
from attnlimits.longcontext.study import (
    COLUMNS,
    PRESETS,
    LongPreset,
    LongResults,
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
    "COLUMNS",
    "PRESETS",
    "KVLayer",
    "LongCapture",
    "LongPreset",
    "LongResults",
    "capture_long",
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
