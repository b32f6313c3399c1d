"""TransformerLens models in the experiments: a ``HookedTransformer`` run on a text, or an ``ActivationCache``.

Two ways in (``pip install 'attnlimits[transformer-lens]'``; TransformerLens 2 and 3 have ``HookedTransformer``):

- ``attnlimits.experiments.run(model, text, preset)`` with a ``HookedTransformer`` cuts the text into windows with
  the model's tokenizer (a BOS first when ``model.cfg.default_prepend_bos``, TransformerLens's own convention) and
  captures each window with one ``run_with_cache`` that keeps, per layer, ``blocks.{l}.attn.hook_attn_scores``
  (the logits: the weights are their softmax, as TransformerLens's ``hook_pattern`` is) and ``hook_v``, plus
  ``hook_embed`` (and ``blocks.{l}.hook_resid_pre`` for ``tokens="residual"``).
- :func:`arrays` turns an ``ActivationCache`` you already hold into the keyword arguments of
  :func:`attnlimits.experiments.run_arrays`: ``hook_pattern`` as the weights, ``hook_attn_scores`` as the logits
  (when cached), ``hook_v`` as the values, ``hook_embed`` as the embeddings.

A capture holds each layer's scores whole, ``heads x L x L`` floats per layer and window (the Hugging Face path
keeps q, k and v instead and recomputes them layer by layer), so that every transform TransformerLens applies to
them (soft-capping, ALiBi, local windows) is read as it is.

Either way ``hook_v`` of a grouped-query model (``n_key_value_heads`` < ``n_heads``) is expanded to the query heads
as TransformerLens's attention does (``repeat_interleave``: head h reads value head ``h // (n_heads /
n_key_value_heads)``), and the logits' scaling over the raw q.k is ``1 / cfg.attn_scale``.

TransformerLens 4 replaced ``HookedTransformer`` with ``TransformerBridge``, which wraps a Hugging Face model: give
that model (``bridge.original_model``) to :func:`attnlimits.experiments.run` directly.
"""

from __future__ import annotations

import hashlib
import time

import torch

__all__ = ["INSTALL", "arrays", "capture_windows", "is_hooked", "provenance"]

#: How to install the optional TransformerLens support.
INSTALL = "pip install 'attnlimits[transformer-lens]'"


def is_hooked(model) -> bool:
    """Whether ``model`` is a TransformerLens ``HookedTransformer`` (checked without importing TransformerLens)."""
    return any(
        c.__name__ == "HookedTransformer" and c.__module__.startswith("transformer_lens") for c in type(model).__mro__
    )


def _layers(model, layers) -> list[int]:
    every = list(range(model.cfg.n_layers))
    if layers is None:
        return every
    chosen = sorted({int(layer) for layer in layers})
    if not chosen or any(layer not in every for layer in chosen):
        raise ValueError(f"layers: must be layer numbers of the model, 0..{model.cfg.n_layers - 1}, got {layers!r}")
    return chosen


def _scaling(cfg) -> float:
    return 1.0 / float(cfg.attn_scale) if getattr(cfg, "use_attn_scale", True) else 1.0


def _values(v: torch.Tensor, heads: int) -> torch.Tensor:
    """``hook_v`` ``(batch, pos, kv_heads, d)`` as ``(batch, heads, pos, d)``, expanded as TransformerLens does."""
    v = v.permute(0, 2, 1, 3)
    return v.repeat_interleave(heads // v.shape[1], dim=1) if v.shape[1] != heads else v


def arrays(cache, model=None, *, layers=None) -> dict:
    """The keyword arguments of :func:`attnlimits.experiments.run_arrays` from a TransformerLens
    ``ActivationCache`` (each batch row one window): ``weights`` (``hook_pattern``), ``logits``
    (``hook_attn_scores``, when cached), ``values`` (``hook_v``, expanded to the query heads), ``embeddings``
    (``hook_embed``, when cached) and, with ``model``, the logits' ``scaling`` (``1 / cfg.attn_scale``) and ``bos``
    (``cfg.default_prepend_bos``). ``layers``: the layer numbers to read (every layer the cache holds by default).

    ``run_with_cache(tokens)`` caches every hook; ``names_filter`` can keep only these (see :func:`capture_windows`).
    """
    held = sorted({int(k.split(".")[1]) for k in cache.keys() if k.startswith("blocks.") and k.endswith("attn.hook_v")})
    if not held:
        raise ValueError("cache: holds no blocks.{l}.attn.hook_v; run the model with run_with_cache first")
    chosen = held if layers is None else sorted({int(layer) for layer in layers})
    missing = [layer for layer in chosen if layer not in held]
    if missing:
        raise ValueError(f"layers: the cache holds layers {held}, not {missing}")
    out = {"weights": {}, "logits": {}, "values": {}}
    for layer in chosen:
        name = f"blocks.{layer}.attn"
        for key, hook in (("weights", "hook_pattern"), ("logits", "hook_attn_scores")):
            if f"{name}.{hook}" in cache.keys():
                out[key][layer] = cache[f"{name}.{hook}"]
        heads = (out["weights"].get(layer) if layer in out["weights"] else out["logits"].get(layer)).shape[1]
        out["values"][layer] = _values(cache[f"{name}.hook_v"], heads)
    out = {k: v for k, v in out.items() if v}
    if "hook_embed" in cache.keys():
        out["embeddings"] = cache["hook_embed"]
    if model is not None:
        out["scaling"] = _scaling(model.cfg)
        out["bos"] = bool(getattr(model.cfg, "default_prepend_bos", False))
    return out


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
    progress=None,
    bos: bool | None = None,
    shuffle: int | None = None,
) -> list:
    """:func:`attnlimits.experiments.capture_windows` for a ``HookedTransformer``: ``count`` windows of ``length``
    tokens of ``text``, windows ``first_window..first_window + count - 1`` of ``total`` spread evenly over the text
    (None: ``first_window + count``), one ``run_with_cache`` each, as :class:`attnlimits.models.arrays.ArrayCapture`
    records (the one :class:`attnlimits.models.Capture` type; the logits kept, the weights their softmax), each
    with its window's number (``index``) and first token's offset in the text (``start``).

    ``bos``: None follows ``model.cfg.default_prepend_bos``. The windows are those of
    :func:`attnlimits.models.windows.windows` with the model's tokenizer, laid out as
    :func:`attnlimits.models.windows.capture_windows` lays them out (and shuffles them, given ``shuffle``).
    """
    from attnlimits.infra.progress import progress_bar
    from attnlimits.models import arrays as given
    from attnlimits.models.windows import window_bos, windows

    if model.tokenizer is None:
        raise ValueError(
            "model: this HookedTransformer has no tokenizer, so a text cannot be cut into windows; give it one "
            "(model.set_tokenizer(tokenizer)), or run it yourself and pass attnlimits.models.lens.arrays(cache) to "
            "attnlimits.experiments.run_arrays"
        )
    chosen = _layers(model, layers)
    bos = bool(model.cfg.default_prepend_bos) if bos is None else bos
    total = first_window + count if total is None else total
    ids, starts = windows(
        model.tokenizer,
        text,
        length=length,
        count=count,
        first=first_window,
        total=total,
        bos=bos,
        return_starts=True,
        shuffle=shuffle,
    )
    with_bos = window_bos(model.tokenizer, bos) is not None
    hooks = {"hook_embed"}
    for layer in chosen:
        hooks |= {f"blocks.{layer}.attn.hook_attn_scores", f"blocks.{layer}.attn.hook_v"}
        if tokens == "residual":
            hooks.add(f"blocks.{layer}.hook_resid_pre")
    device = model.cfg.device
    out = []
    for i, row in enumerate(progress_bar(ids, "capture", progress)):
        started = time.perf_counter()
        with torch.inference_mode():
            _, cache = model.run_with_cache(row.unsqueeze(0).to(device), names_filter=lambda n: n in hooks)
        kw = arrays(cache, model, layers=chosen)
        del kw["bos"]
        (cap,) = given.captures(**kw, bos=with_bos)
        cap.index, cap.start = first_window + i, starts[i]
        cap.input_ids = row.unsqueeze(0)
        if tokens == "residual":
            cap.residual = {layer: cache[f"blocks.{layer}.hook_resid_pre"] for layer in chosen}
        cap.seconds = time.perf_counter() - started
        out.append(cap)
    return out


def provenance(model) -> dict:
    """A ``HookedTransformer``'s record in a run's provenance: its name, the SHA-256 of its parameters (names,
    shapes and bytes, in order), TransformerLens's version and the configuration's shape facts."""
    from importlib.metadata import version

    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        t = tensor.detach().contiguous().cpu()
        digest.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    cfg = model.cfg
    facts = (
        "n_layers",
        "n_heads",
        "n_key_value_heads",
        "d_model",
        "d_head",
        "n_ctx",
        "positional_embedding_type",
        "original_architecture",
        "default_prepend_bos",
    )
    return {
        "model_id": str(cfg.model_name),
        "sha256": digest.hexdigest(),
        "source": f"TransformerLens HookedTransformer (transformer-lens {version('transformer-lens')})",
        **{k: getattr(cfg, k) for k in facts if getattr(cfg, k, None) is not None},
        "attention scaling": f"{_scaling(cfg):.6g}",
    }
