"""Part 1 of the book (chapters 11-15): seeded synthetic heads, the sweeps behind the theory figures, the figures
themselves (:mod:`.figures`) and the registry of numerical checks of every bound (:mod:`.checks`)."""

import attnlimits

MODULES = ("synthetic", "sweeps", "figures", "checks")
__getattr__, __dir__ = attnlimits.lazy(__name__, MODULES)
