"""Part 3 of the book (chapters 32-35), one study per module or package: training at low temperature
(:mod:`.training`), the alternative normalisers (:mod:`.alternatives`), several models with controls
(:mod:`.several_models`) and long contexts (:mod:`.long_context`). Each package's ``pipeline`` module declares the
study's place in the book's results pipeline; :func:`book_preset` (:mod:`.presets`) is the preset chapters 32, 33
and 36 read."""

import attnlimits

MODULES = ("training", "alternatives", "several_models", "long_context")
NAMES = {"PRESET_VARIABLE": "attnlimits.studies.presets", "book_preset": "attnlimits.studies.presets"}
__getattr__, __dir__ = attnlimits.lazy(__name__, MODULES, NAMES)
