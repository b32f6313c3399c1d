"""One capture per window of a text (a Hugging Face model, one forward pass each), the weights recomputed per layer
on demand from the captured queries and keys: a list of :class:`attnlimits.models.Capture`."""

from __future__ import annotations

import dataclasses
import time

import torch

from attnlimits.infra.progress import progress_bar
from attnlimits.models.capturing import PRECISIONS, TOKENS, Capture, dtype_of, query_rows

__all__ = [
    "PRECISIONS",
    "TOKENS",
    "Capture",
    "WindowCapture",
    "capture_windows",
    "check_windows",
    "dtype_of",
    "query_rows",
]


#: The earlier name of :class:`attnlimits.models.Capture`, which every window's capture now is; kept importable for
#: one release only (the library uses ``Capture``).
WindowCapture = Capture


def capture_windows(
    model,
    text,
    *,
    length: int,
    count: int,
    first_window: int = 0,
    total: int | None = None,
    tokens: str = "value",
    layers=None,
    progress: bool | str | None = None,
    bos: bool | None = None,
    shuffle: int | None = None,
) -> list[Capture]:
    """Capture ``count`` windows of ``length`` tokens, windows ``first_window..first_window + count - 1`` of
    ``total`` windows spread evenly over the whole text (None: ``first_window + count``), one pass each;
    ``layers``: the layer numbers to keep (all by default). Each :class:`attnlimits.models.Capture` keeps q, k and v
    and drops the weights (its ``weights``/``inputs`` recompute them from the logits, layer by layer), and records
    its window's number (``index``) and first token's offset in the text (``start``).

    The windows are :func:`attnlimits.models.texts.windows` (``total``: its layout of windows spread over the text,
    window i at text token ``i * (n - length) // (total - 1)``, so that runs over disjoint pieces of one layout
    read together what one run over all of it would): with ``bos=None`` (the default) each starts with the
    tokenizer's BOS token exactly when the tokenizer adds one by default (Gemma 3 does; GPT-2 and SmolLM2 do not),
    keeping its ``length`` (``[BOS]`` and ``length - 1`` text tokens); each capture records it in ``bos``.
    Every capture keeps the input token embeddings (``length * d_model`` floats per window: the tokens of
    Algorithm 4's second reading); ``tokens="residual"`` also keeps the layers' input residual streams (that many
    floats per layer). ``tokens="value"`` and ``"embedding"`` capture the same. A TransformerLens
    ``HookedTransformer`` is captured by :func:`attnlimits.models.lens.capture_windows`
    (:func:`attnlimits.experiments.capture_windows` takes either). ``shuffle``: an integer reads each window's
    tokens in a random order seeded by it (:func:`attnlimits.models.texts.windows`), None in the text's order.
    """
    from attnlimits import models
    from attnlimits.models import texts

    if tokens not in TOKENS:
        raise ValueError(f"tokens: must be one of {TOKENS}, got {tokens!r}")
    if isinstance(first_window, bool) or not isinstance(first_window, int) or first_window < 0:
        raise ValueError(f"first_window: must be an integer >= 0, got {first_window!r}")
    total = first_window + count if total is None else total
    ids, starts = texts.windows(
        model,
        text,
        length=length,
        count=count,
        first=first_window,
        total=total,
        bos=bos,
        return_starts=True,
        shuffle=shuffle,
    )
    with_bos = texts.window_bos(model, bos) is not None
    out = []
    for i, row in enumerate(progress_bar(ids, "capture", progress)):
        started = time.perf_counter()
        cap = models.capture(model, row, layers=layers, index=first_window + i)
        kept = [dataclasses.replace(lc, weights=lc.weights.new_empty(0)) for lc in cap]  # recomputed: free them
        residual = _residual_stream(model, row, cap.layer_ids) if tokens == "residual" else None
        embedding = _input_embedding(model, row)
        seconds = time.perf_counter() - started
        one = dataclasses.replace(
            cap, layers=kept, residual=residual, seconds=seconds, embedding=embedding, bos=with_bos
        )
        one.start = starts[i]  # the window's first text token (the run's provenance lists them as window_starts)
        out.append(one)
    return out


def _input_embedding(model, ids) -> torch.Tensor:
    """The embedding layer's output for ``ids``, (1, L, d_model): what layer 0 reads, before any position
    embedding (GPT-2 adds its own afterwards) and including the model's own scaling (Gemma's sqrt(d_model))."""
    hf = getattr(model, "model", model)
    with torch.inference_mode():
        return hf.get_input_embeddings()(ids.unsqueeze(0).to(next(hf.parameters()).device)).detach()


def _residual_stream(model, ids, layer_ids) -> dict:
    hf = getattr(model, "model", model)
    body = getattr(hf, hf.base_model_prefix, hf)
    with torch.inference_mode():
        hidden = body(
            input_ids=ids.unsqueeze(0).to(next(hf.parameters()).device), output_hidden_states=True, use_cache=False
        ).hidden_states
    return {layer: hidden[layer].detach() for layer in layer_ids}  # hidden_states[l] is the input of layer l


def check_windows(windows) -> None:
    if not windows or not all(isinstance(w, Capture) for w in windows):
        raise ValueError("windows: expected a non-empty list of Capture (see capture_windows)")
