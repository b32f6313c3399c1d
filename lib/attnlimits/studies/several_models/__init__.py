"""Chapter 34: the Experiments on several models and on untrained controls. The study (:mod:`.study`: the models
and their controls) is re-exported here; the run window by window, its manifest, reading it back and what the book
ships of it (:mod:`.runs`), and the chapter's tables and figure (:mod:`.report`), are named here and imported on
first use (outside the study's code: a change to them recomputes no window)."""

import attnlimits
from attnlimits.studies.several_models.study import *  # noqa: F403
from attnlimits.studies.several_models.study import __all__ as _STUDY

NAMES = {
    **dict.fromkeys(
        (
            "Run",
            "SeveralModels",
            "compute",
            "manifest_path",
            "model_entries",
            "results",
            "run_labels",
            "shards",
            "slug",
            "study_folder",
            "window_folder",
            "write_manifest",
        ),
        "attnlimits.studies.several_models.runs",
    ),
    **dict.fromkeys(
        ("figure", "overview", "run_id", "summary", "trained_labels", "trends", "verdicts"),
        "attnlimits.studies.several_models.report",
    ),
}
__all__ = [*_STUDY, *NAMES]
__getattr__, __dir__ = attnlimits.lazy(__name__, ("report", "runs"), NAMES)
