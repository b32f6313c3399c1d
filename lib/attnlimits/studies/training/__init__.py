"""Chapter 32: a small attention model trained on a selection task whose difficulty is set by hand. The study
(:mod:`.study`: the task, the model, the sweep, its presets and the results cache) is re-exported here; the
chapter's tables and figures (:mod:`.report`, and its :func:`~.report.summarize`) are imported on first use,
outside the study's cache key."""

import attnlimits
from attnlimits.studies.training.study import *  # noqa: F403
from attnlimits.studies.training.study import __all__  # noqa: F401

__getattr__, __dir__ = attnlimits.lazy(__name__, ("report",), {"summarize": "attnlimits.studies.training.report"})
