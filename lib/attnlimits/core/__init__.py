"""The paper's objects in torch, with no I/O: the normalisers (a registry), selection of the top-N tokens
and the distances of the book, the closed-form bounds, and the per-row kernels the experiments vectorise over
heads and rows, and the attention-sink metric. Imports nothing else of attnlimits."""

import attnlimits

MODULES = ("normalizers", "selection", "bounds", "rowstats", "sinks", "validation")
__getattr__, __dir__ = attnlimits.lazy(__name__, MODULES)
