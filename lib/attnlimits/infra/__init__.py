"""What every study stands on, importing only :mod:`attnlimits.core`: the results cache, the preset registry,
provenance (hashes, folders, messages), statistics (intervals and tests), the median's order-statistic interval and
the intervals' coverage, Algorithm 3's KS test, progress and parallel maps, profiling helpers, the plotting theme,
the book's verdict words, a page's sentences checked against its numbers, the results pipeline's types and the
shipped results' manifest, check and audit."""

import attnlimits

MODULES = (
    "cache",
    "presets",
    "provenance",
    "statistics",
    "medians",
    "coverage",
    "ks",
    "progress",
    "profiling",
    "plotting",
    "verdicts",
    "sentences",
    "pipeline",
    "shipping",
)
__getattr__, __dir__ = attnlimits.lazy(__name__, MODULES)
