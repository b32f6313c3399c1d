"""Chapter 34: the Experiments on several models and on untrained controls. The study (:mod:`.study`: the models,
the untrained controls, the run and its manifest) is re-exported here; the chapter's tables and figure
(:mod:`.report`, whose functions are also named here) are imported on first use."""

import attnlimits
from attnlimits.studies.several_models.study import *  # noqa: F403
from attnlimits.studies.several_models.study import __all__  # noqa: F401

_REPORT = "attnlimits.studies.several_models.report"
__getattr__, __dir__ = attnlimits.lazy(
    __name__,
    ("report",),
    {name: _REPORT for name in ("figure", "overview", "run_id", "summary", "trained_labels", "trends", "verdicts")},
)
