"""The preset the Beyond chapters read: :func:`book_preset`, what chapters 32, 33 and 36 compute or read back, and
what ``attnlimits results`` computes for the training and alternatives studies (as
:func:`attnlimits.experiments.book_preset` is the Experiments chapters')."""

from __future__ import annotations

import os

__all__ = ["PRESET_VARIABLE", "book_preset"]

#: The environment variable that chooses the preset of chapters 32, 33 and 36.
PRESET_VARIABLE = "ATTNLIMITS_PRESET"


def book_preset() -> str:
    """``$ATTNLIMITS_PRESET``, else ``reduced``: a preset name that both the training and the alternatives studies
    have (chapter 33 reads the training sweep of its own preset); ValueError naming the variable otherwise."""
    from attnlimits.studies.alternatives import study as alternatives
    from attnlimits.studies.training import study as training

    name = os.environ.get(PRESET_VARIABLE, "reduced")
    allowed = [n for n in training.PRESETS if n in alternatives.PRESETS]
    if name not in allowed:
        raise ValueError(f"{PRESET_VARIABLE}: must be one of {allowed}, got {name!r}")
    return name
