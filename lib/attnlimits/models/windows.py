"""Windows of a text: where they lie (the layout, :func:`windows`) and their capture (:func:`capture_windows`, one
forward pass of a Hugging Face model per window, a list of :class:`attnlimits.models.Capture`).

:func:`windows` cuts non-overlapping token windows from a text's first chapter on, either consecutive from its
start or spread evenly over the whole text, each starting with the tokenizer's BOS token when the tokenizer adds one
by default (Gemma 3; not GPT-2 or SmolLM2). Every capture of windows reads this layout: :func:`capture_windows`,
the TransformerLens capture (:func:`attnlimits.models.lens.capture_windows`) and the long-context capture
(:func:`attnlimits.models.kv_capture.capture_long`). The texts themselves are :mod:`attnlimits.models.texts`.
"""

from __future__ import annotations

import dataclasses
import time

import torch

from attnlimits import models
from attnlimits.infra.progress import progress_bar
from attnlimits.models.capturing import TOKENS, Capture
from attnlimits.models.describing import default_bos
from attnlimits.models.texts import Text, first_chapter_start

__all__ = ["capture_windows", "check_windows", "token_count", "window_bos", "windows"]


# ----------------------------------------------------------------------------------------------------------------
# The layout: where the windows lie in the text
# ----------------------------------------------------------------------------------------------------------------


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _tokenizer_of(tokenizer):
    """The Hugging Face tokenizer itself, from a tokenizer or a ``LoadedModel``."""
    if hasattr(tokenizer, "tokenizer") and hasattr(tokenizer, "provenance"):
        if tokenizer.tokenizer is None:
            raise ValueError(
                f"tokenizer: the model was loaded without one, so text cannot be cut into windows; "
                f"{tokenizer.no_tokenizer}"
            )
        tokenizer = tokenizer.tokenizer
    if tokenizer is None or not callable(tokenizer):
        raise ValueError("tokenizer must be a Hugging Face tokenizer (or a LoadedModel that has one)")
    return tokenizer


def token_count(tokenizer, text: Text | str) -> int:
    """How many tokens ``text`` holds for ``tokenizer`` (a tokenizer or a ``LoadedModel``), from its first chapter
    on (the body that :func:`windows` cuts)."""
    body = text.body if hasattr(text, "body") else str(text)
    return len(_encode(_tokenizer_of(tokenizer), body))


def window_bos(tokenizer, bos: bool | None = None) -> int | None:
    """The id of the BOS token :func:`windows` starts each window with, or None when it prepends none.

    ``bos``: None follows the tokenizer's default (:func:`attnlimits.models.describing.default_bos`); True needs a
    tokenizer with a BOS token; False prepends none. ``tokenizer``: a tokenizer or a ``LoadedModel``.
    """
    if bos not in (None, True, False):
        raise ValueError(f"bos: must be None (the tokenizer's default), True or False, got {bos!r}")
    tokenizer = _tokenizer_of(tokenizer)
    if bos is None:
        return default_bos(tokenizer)
    if bos and getattr(tokenizer, "bos_token_id", None) is None:
        raise ValueError("bos: True needs a tokenizer with a BOS token (its bos_token_id is None)")
    return int(tokenizer.bos_token_id) if bos else None


def windows(
    tokenizer,
    text: Text | str,
    length: int,
    count: int = 1,
    *,
    first: int = 0,
    total: int | None = None,
    bos: bool | None = None,
    return_starts: bool = False,
    shuffle: int | None = None,
) -> torch.Tensor | tuple[torch.Tensor, list[int]]:
    """``count`` non-overlapping windows of ``length`` tokens of the text from its first chapter on: the windows
    ``first..first + count - 1`` of a layout.

    ``total=None``: the windows tile the start of the text one after another (window i starts at text token
    ``i * length``), and only as much text is tokenised as they need (a prefix cut at a line break, minus a safety
    margin of tokens at the cut, so the windows equal those of tokenising the whole text). ``total`` an integer:
    the layout is ``total`` windows spread evenly over the whole text, window i at text token
    ``i * (n - length) // (total - 1)`` (n the text's tokens; window 0 at its start and window ``total - 1`` its
    last full window; one window starts at 0), so that the windows are passages from every part of the text and
    any ``first`` and ``count`` with ``first + count <= total`` cut a piece of the same layout (runs over disjoint
    pieces read together what one run over all would). Refused (ValueError naming ``windows``) when the text
    cannot hold the layout's windows without overlap.

    ``tokenizer``: a Hugging Face tokenizer (or a ``LoadedModel``, whose tokenizer is used). ``text``: a
    :class:`attnlimits.models.texts.Text` (its ``body``) or a string (from its first "CHAPTER I", or its
    beginning). Returns a ``(count, length)`` LongTensor; with ``return_starts=True`` also the windows' token
    offsets in the text (a list of ``count`` integers: the first text token of each window).

    ``bos``: whether each window starts with the tokenizer's BOS token; None (the default) does what the tokenizer
    does by default (:func:`attnlimits.models.describing.default_bos`), so a model trained on sequences that start with
    BOS (Gemma 3) reads its windows that way, and GPT-2 (the paper's setting) and SmolLM2 read bare text. A window
    keeps its ``length``: with BOS it is ``[BOS]`` and the next ``length - 1`` text tokens, and every offset above
    counts ``length - 1`` text tokens per window instead (the consecutive windows still tile the text without gaps
    or overlap, ``length - 1`` tokens at a time; position 0 of a window is the BOS, position t its text token
    t - 1).

    ``shuffle``: None keeps the text's order; an integer puts each window's text tokens in a random order (the
    same tokens: a control that keeps what a window holds and destroys its order), seeded by it and the window's
    number, so window i is shuffled the same in every layout run that reads it (a BOS stays at position 0).
    """
    tokenizer = _tokenizer_of(tokenizer)
    if shuffle is not None and (isinstance(shuffle, bool) or not isinstance(shuffle, int) or shuffle < 0):
        raise ValueError(f"shuffle: must be None (the text's order) or an integer seed >= 0, got {shuffle!r}")
    bos_id = window_bos(tokenizer, bos)
    for name, value in (("length", length), ("count", count)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer ≥ 1, got {value!r}")
    if isinstance(first, bool) or not isinstance(first, int) or first < 0:
        raise ValueError(f"first must be an integer ≥ 0, got {first!r}")
    if total is not None:
        if isinstance(total, bool) or not isinstance(total, int) or total < 1:
            raise ValueError(f"total must be None (consecutive windows) or an integer ≥ 1, got {total!r}")
        if first + count > total:
            raise ValueError(f"total: windows {first}..{first + count - 1} lie beyond a layout of {total} windows")
    if isinstance(text, Text):
        body = text.body
    elif isinstance(text, str):
        start = first_chapter_start(text)
        body = text[start or 0 :]
    else:
        raise ValueError(f"text must be an attnlimits.models.texts.Text or a str, got {type(text).__name__}")
    if not body.strip():
        raise ValueError("text is empty")
    per_window = length - (bos_id is not None)
    spread = total is not None and total > 1
    need = per_window * (total if spread else first + count)
    tokens = _encode(tokenizer, body) if spread else _prefix_tokens(tokenizer, body, need)
    if len(tokens) < need:
        held = total if spread else first + count
        raise ValueError(
            f"windows: the text has only {len(tokens):,} tokens from the start of its first chapter; "
            f"{held} windows of {length} tokens need {need:,}"
        )
    if spread:
        starts = [i * (len(tokens) - per_window) // (total - 1) for i in range(first, first + count)]
    else:
        starts = [i * per_window for i in range(first, first + count)]
    out = torch.tensor([tokens[s : s + per_window] for s in starts], dtype=torch.long).reshape(count, per_window)
    if shuffle is not None:
        for i in range(count):
            gen = torch.Generator().manual_seed(1_000_003 * shuffle + first + i)
            out[i] = out[i, torch.randperm(per_window, generator=gen)]
    if bos_id is not None:
        out = torch.cat([torch.full((count, 1), bos_id, dtype=torch.long), out], dim=1)
    return (out, starts) if return_starts else out


def _prefix_tokens(tokenizer, body: str, need: int) -> list[int]:
    """The first tokens of ``body`` (at least ``need`` when it has them) as tokenising all of it gives them: a
    prefix cut at a line break is tokenised, less a margin of tokens at the cut, doubling the prefix until enough."""
    margin = 16
    chars = need * 8 + 1024
    while True:
        if chars >= len(body):
            return _encode(tokenizer, body)
        cut = body.rfind("\n", 0, chars)
        cut = chars if cut <= 0 else cut
        tokens = _encode(tokenizer, body[:cut])[:-margin]
        if len(tokens) >= need:
            return tokens
        chars *= 2


# ----------------------------------------------------------------------------------------------------------------
# The capture: one forward pass per window
# ----------------------------------------------------------------------------------------------------------------


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

    The windows are :func:`windows` (``total``: its layout of windows spread over the text,
    window i at text token ``i * (n - length) // (total - 1)``, so that runs over disjoint pieces of one layout
    read together what one run over all of it would): with ``bos=None`` (the default) each starts with the
    tokenizer's BOS token exactly when the tokenizer adds one by default (Gemma 3 does; GPT-2 and SmolLM2 do not),
    keeping its ``length`` (``[BOS]`` and ``length - 1`` text tokens); each capture records it in ``bos``.
    Every capture keeps the input token embeddings (``length * d_model`` floats per window: the tokens of
    Algorithm 4's second reading); ``tokens="residual"`` also keeps the layers' input residual streams (that many
    floats per layer). ``tokens="value"`` and ``"embedding"`` capture the same. A TransformerLens
    ``HookedTransformer`` is captured by :func:`attnlimits.models.lens.capture_windows`
    (:func:`attnlimits.experiments.capture_windows` takes either). ``shuffle``: an integer reads each window's
    tokens in a random order seeded by it (:func:`windows`), None in the text's order.
    """
    if tokens not in TOKENS:
        raise ValueError(f"tokens: must be one of {TOKENS}, got {tokens!r}")
    if isinstance(first_window, bool) or not isinstance(first_window, int) or first_window < 0:
        raise ValueError(f"first_window: must be an integer >= 0, got {first_window!r}")
    total = first_window + count if total is None else total
    ids, starts = windows(
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
    with_bos = window_bos(model, bos) is not None
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
