"""Chapter 35: the paper's limits at long contexts, from 1,024 tokens up to a model's whole context, on a sample of
query rows. The study (:mod:`.study`: presets, the run, its tables and the results cache) is re-exported here, with
the capture that scales (:mod:`attnlimits.models.kv_capture`); the chapter's summaries, verdicts and figures
(:mod:`.report`) are imported on first use, outside the study's cache key."""

import attnlimits
from attnlimits.studies.long_context.study import *  # noqa: F403
from attnlimits.studies.long_context.study import __all__ as _STUDY

_CAPTURE = ("KVLayer", "LongCapture", "capture_long")
__all__ = [*_STUDY, *_CAPTURE]
__getattr__, __dir__ = attnlimits.lazy(__name__, ("report",), dict.fromkeys(_CAPTURE, "attnlimits.models.kv_capture"))
