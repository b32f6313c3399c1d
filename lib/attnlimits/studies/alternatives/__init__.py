"""Chapter 33: the paper's alternative normalisers under its own diagnostics, on synthetic heads and on a pretrained
model's heads. The study (:mod:`.study`: presets, tables, the results cache) is re-exported here; the chapter's
summaries and figures (:mod:`.report`) are imported on first use, outside the study's cache key."""

import attnlimits
from attnlimits.studies.alternatives.study import *  # noqa: F403
from attnlimits.studies.alternatives.study import __all__  # noqa: F401

__getattr__, _ = attnlimits.lazy(__name__, ("report",))
