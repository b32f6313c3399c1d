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
optionally logits), and :class:`Results` saves and loads them as CSVs plus ``provenance.json``. Modules:
:mod:`.grid` (what a run computes: the :class:`Preset`), :mod:`.presets` (the named presets), :mod:`.row_sample`
(the rows an algorithm reads), :mod:`.algorithms` (Algorithms 1-2, 4, 5 and the sink), :mod:`.critical` (Algorithm
3's search), :mod:`.critical_reading` (its critical N recomputed on other windows or heads, and its intervals),
:mod:`.tables` (one run's tables from captured windows), :mod:`.runs` (runs on a model, on arrays, through the cache,
one window at a time), :mod:`.figures` (the
paper's figures) and :mod:`.paper_claims` (each claim of the paper beside its measurement).
"""

import attnlimits

#: Where each public name lives (imported on first use: see :func:`attnlimits.lazy`).
NAMES = {
    "COUNTINGS": "attnlimits.experiments.algorithms",
    "READINGS": "attnlimits.experiments.algorithms",
    "distance_table": "attnlimits.experiments.algorithms",
    "gradient_table": "attnlimits.experiments.algorithms",
    "separability_table": "attnlimits.experiments.algorithms",
    "sink_table": "attnlimits.experiments.algorithms",
    "CRITICAL_READINGS": "attnlimits.experiments.critical",
    "critical_n": "attnlimits.experiments.critical",
    "critical_search": "attnlimits.experiments.critical",
    "critical_from_heads": "attnlimits.experiments.critical_reading",
    "critical_intervals": "attnlimits.experiments.critical_reading",
    "PRESET_VARIABLE": "attnlimits.experiments.presets",
    "PRESETS": "attnlimits.experiments.presets",
    "Preset": "attnlimits.experiments.presets",
    "book_preset": "attnlimits.experiments.presets",
    "get_preset": "attnlimits.experiments.presets",
    "validate_grid": "attnlimits.experiments.presets",
    "capture_windows": "attnlimits.experiments.runs",
    "code": "attnlimits.experiments.runs",
    "results": "attnlimits.experiments.runs",
    "results_folder": "attnlimits.experiments.runs",
    "run": "attnlimits.experiments.runs",
    "run_arrays": "attnlimits.experiments.runs",
    "window_folder": "attnlimits.experiments.runs",
    "window_results": "attnlimits.experiments.runs",
    "TABLES": "attnlimits.experiments.tables",
    "Results": "attnlimits.experiments.tables",
    "merge": "attnlimits.experiments.tables",
    "ArrayCapture": "attnlimits.models.arrays",
    "fit_preset": "attnlimits.models.arrays",
}
MODULES = (
    "row_sample",
    "algorithms",
    "critical",
    "critical_reading",
    "grid",
    "presets",
    "tables",
    "runs",
    "figures",
    "paper_claims",
)
__all__ = sorted(NAMES)
__getattr__, __dir__ = attnlimits.lazy(__name__, MODULES, NAMES)
