"""Part 3 of the book (chapters 32-35), one study per module or package: training at low temperature
(:mod:`.training`), the alternative normalisers (:mod:`.alternatives`), several models with controls
(:mod:`.several_models`) and long contexts (:mod:`.long_context`)."""

import attnlimits

MODULES = ("training", "alternatives", "several_models", "long_context")
__getattr__, __dir__ = attnlimits.lazy(__name__, MODULES)
