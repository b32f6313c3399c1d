"""Part 3 of the book (chapters 32-35), one study per module or package: training at low temperature
(:mod:`.training`), the alternative normalisers (:mod:`.alternatives`), several models with controls
(:mod:`.several_models`) and long contexts (:mod:`.long_context`). Each package's ``pipeline`` module declares the
study's place in the book's results pipeline; :func:`book_preset` (:mod:`.presets`) is the preset chapters 32, 33
and 36 read, and :func:`restore` (:mod:`.shipped`) puts what the book ships of them into the results cache."""

import attnlimits

MODULES = ("training", "alternatives", "several_models", "long_context")
NAMES = {
    **dict.fromkeys(("PRESET_VARIABLE", "book_preset"), "attnlimits.studies.presets"),
    "restore": "attnlimits.studies.shipped",
}
__getattr__, __dir__ = attnlimits.lazy(__name__, MODULES, NAMES)
