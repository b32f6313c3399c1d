"""The paper's Algorithms 1-5 on every head of a pretrained model, at the paper's grids, as tidy tables.

Definitions (each a parameter; the Experiments chapters state them):

- Per head, alpha is the captured causal attention row of query t, recomputed in float64 from the model's own
  logits (``softmax(logits.double())``: exact, and rows sum to 1 within 1e-15), and x_i are that head's value
  vectors (after grouped-query expansion), or with ``tokens="residual"`` the layer's input residual stream, or
  with ``tokens="embedding"`` the input token embeddings normalised to unit length.
- A window starts with the tokenizer's BOS token when the tokenizer adds one by default (Gemma 3; not GPT-2 or
  SmolLM2), keeping its length: ``[BOS]`` and the next L - 1 text tokens.
- Row t's tokens are the visible ones, n <= t. A length L uses the first L tokens of each window (the prefix
  property), so one capture per window serves every L of the grid.
- A statistic of a head is its mean over the rows t < L with more than N tokens (rows where nothing is dropped are
  skipped); the ``rows`` column says how many rows that is per window.
- ``exclude_sink=True`` drops token 0 from selection and comparison (the remaining weights renormalised).

Algorithms: :func:`distance_table` (Alg. 1 and 2: d~, d_max, E vs L and N), :func:`critical_n` (Alg. 3: the exact
critical N by a bracket-and-bisect search on the KS decision), :func:`separability_table` (Alg. 4),
:func:`gradient_table` (Alg. 5) and :func:`sink_table`. :func:`run` does all five on a model (a Hugging Face model,
or a TransformerLens ``HookedTransformer``), :func:`run_arrays` on attention given as arrays (weights, values and
optionally logits), and :class:`Results` saves and loads them as CSVs plus ``provenance.json``.
"""

from __future__ import annotations

from attnlimits.experiments.algorithms import (
    COUNTINGS,
    CRITICAL_READINGS,
    READINGS,
    critical_n,
    critical_search,
    distance_table,
    gradient_table,
    separability_table,
    sink_table,
)
from attnlimits.experiments.arrays import ArrayCapture, fit_preset
from attnlimits.experiments.presets import PRESET_VARIABLE, PRESETS, Preset, book_preset, get_preset, validate_grid
from attnlimits.experiments.runs import TABLES, Results, merge, results, results_folder, run, run_arrays
from attnlimits.experiments.windows import WindowCapture, capture_windows

__all__ = [
    "COUNTINGS",
    "CRITICAL_READINGS",
    "PRESETS",
    "READINGS",
    "PRESET_VARIABLE",
    "TABLES",
    "Preset",
    "ArrayCapture",
    "Results",
    "WindowCapture",
    "book_preset",
    "capture_windows",
    "critical_n",
    "critical_search",
    "distance_table",
    "fit_preset",
    "get_preset",
    "gradient_table",
    "merge",
    "results",
    "results_folder",
    "run",
    "run_arrays",
    "separability_table",
    "sink_table",
    "validate_grid",
]
