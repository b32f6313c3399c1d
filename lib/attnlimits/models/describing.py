"""A model's facts and provenance banner: its shape (layers, heads, key/value heads, head dim, positions), the BOS
token its tokenizer prepends, and the banner every experiment chapter prints first.

- :func:`config_facts`, :func:`facts` a model's shape facts.
- :func:`default_bos`                 the BOS token a tokenizer prepends by default (the experiments' windows then
                                      start with it).
- :func:`banner`, :func:`banner_text` the provenance banner of a model and, when given, of a text.
- :func:`model_record`                a loaded model's provenance as a plain record.
"""

from __future__ import annotations

import torch

from attnlimits.infra.provenance import portable

__all__ = ["banner", "banner_text", "config_facts", "default_bos", "facts", "model_record", "scaling_description"]


def config_facts(config) -> dict:
    """Shape facts of a transformers config: architecture, layers, heads, key/value heads, head dim, positions."""
    n_heads = int(getattr(config, "num_attention_heads", None) or config.n_head)
    d_model = int(getattr(config, "hidden_size", None) or config.n_embd)
    head_dim = int(getattr(config, "head_dim", None) or d_model // n_heads)
    n_kv = int(getattr(config, "num_key_value_heads", None) or n_heads)
    n_layers = int(getattr(config, "num_hidden_layers", None) or config.n_layer)
    max_pos = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    rope = getattr(config, "rope_parameters", None) or {}
    theta = rope.get("rope_theta", getattr(config, "rope_theta", None)) if isinstance(rope, dict) else None
    by_layer_type = isinstance(rope, dict) and rope and all(isinstance(v, dict) for v in rope.values())
    if by_layer_type:  # Gemma 3: one RoPE per layer type (sliding-window and full-attention layers)
        positional = "RoPE (" + "; ".join(_rope_of_layer_type(config, k, v) for k, v in rope.items()) + ")"
    elif theta is not None:
        kind = rope.get("rope_type", "default") if isinstance(rope, dict) else "default"
        positional = f"RoPE (theta={theta:g}, {kind})"
    elif config.model_type == "gpt2":
        positional = "learned absolute position embeddings"
    else:
        positional = f"as defined by {config.model_type}"
    arch = (getattr(config, "architectures", None) or [config.model_type])[0]
    return {
        "architecture": arch,
        "n_layers": n_layers,
        "n_heads": n_heads,
        "n_kv_heads": n_kv,
        "head_dim": head_dim,
        "d_model": d_model,
        "vocab_size": int(config.vocab_size),
        "max_positions": None if max_pos is None else int(max_pos),
        "positional": positional,
    }


def _rope_of_layer_type(config, layer_type: str, rope: dict) -> str:
    """One layer type's RoPE, e.g. ``theta=1e+06 on the 3 full-attention layers 5, 11, 17``."""
    layers = [i for i, t in enumerate(getattr(config, "layer_types", None) or []) if t == layer_type]
    what = layer_type.replace("_", "-")
    if layer_type == "sliding_attention":
        what = f"sliding-window (window {config.sliding_window})"
    where = f"the {len(layers)} {what} layers" + (" " + ", ".join(map(str, layers)) if len(layers) <= 6 else "")
    kind = rope.get("rope_type", "default")
    return f"theta={rope.get('rope_theta', float('nan')):g} on {where}" + ("" if kind == "default" else f", {kind}")


def default_bos(tokenizer) -> int | None:
    """The id of the BOS token ``tokenizer`` prepends by default, or None when it prepends none.

    The rule is the tokenizer's own behaviour, not a list of models: it has a ``bos_token_id`` and
    ``tokenizer("x").input_ids`` starts with it (Gemma 3's does; GPT-2's and SmolLM2's do not). A model trained on
    sequences that start with BOS sees the experiments' windows the same way
    (:func:`attnlimits.models.windows.windows`).
    """
    bos = getattr(tokenizer, "bos_token_id", None)
    if tokenizer is None or bos is None:
        return None
    ids = list(tokenizer("x")["input_ids"])
    return int(bos) if ids and ids[0] == bos else None


def facts(model) -> dict:
    """The model's shape facts (layers, heads, key/value heads, head dim, positional scheme...) as a dict.

    ``model``: a :class:`attnlimits.models.LoadedModel` or a transformers model.
    """
    hf = model.model if hasattr(model, "provenance") else model  # a LoadedModel, or a transformers model
    out = config_facts(hf.config)
    out["parameters"] = sum(p.numel() for p in hf.parameters())
    out["attention scaling"] = scaling_description(hf)
    return out


def scaling_description(hf) -> str:
    """How the model scales q kᵀ: a formula for GPT-2, else the distinct ``scaling`` values of its attention modules."""
    cfg = hf.config
    if cfg.model_type == "gpt2":
        s = "1/sqrt(head_dim)" if getattr(cfg, "scale_attn_weights", True) else "1"
        if getattr(cfg, "scale_attn_by_inverse_layer_idx", False):
            s += " / (layer+1)"
        return s
    modules = [m for m in hf.modules() if hasattr(m, "scaling") and hasattr(m, "layer_idx")]
    if modules:
        values = {float(m.scaling) for m in modules}
        return ", ".join(f"{v:.6g}" for v in sorted(values))
    return "unknown"


def banner(model, text=None) -> None:
    """Print the provenance of the model and, when given, of the text: the first output of every experiment chapter."""
    print(banner_text(model, text))


def banner_text(model, text=None) -> str:
    """The provenance banner as a string, with absolute paths made :func:`portable` (the record keeps them whole).

    ``model``: a :class:`attnlimits.models.LoadedModel`; ``text``: an :class:`attnlimits.models.texts.Text` or its
    provenance.
    """
    from attnlimits.models.hf import import_transformers

    p = model.provenance
    rule = "=" * 100
    lines = [rule, "PROVENANCE: every number and figure below was computed live from this model and text", rule]
    if p.source == "fallback":
        lines.append(
            f"!! OFFLINE FALLBACK MODEL: {p.model_id} stands in for {p.requested!r} (the paper's model is GPT-2). !!"
        )
    lines += [
        f"model      {p.model_id}  [source: {p.source}]",
        f"           {p.reason}",
        f"           {p.architecture}: {p.n_layers} layers x {p.n_heads} query heads ({p.n_kv_heads} key/value heads), "
        f"head dim {p.head_dim}, d_model {p.d_model}, {p.positional}, {p.dtype}",
        f"           weights {p.weight_file}",
        f"           sha256  {p.sha256}",
    ]
    lines += [f"           note: {n}" for n in p.notes]
    if p.bos_token_id is None:
        lines.append("windows    no BOS token prepended (the tokenizer adds none by default)")
    else:
        lines.append(
            f"windows    each starts with the BOS token (id {p.bos_token_id}), as the tokenizer adds it by default"
        )
    if text is not None:
        t = text.provenance if hasattr(text, "provenance") else text
        if getattr(t, "source", None) == "fallback":
            lines.append(f"!! OFFLINE FALLBACK TEXT: {t.title} stands in for War and Peace. !!")
        lines += [
            f"text       {t.title}  [source: {t.source}]",
            f"           {t.reason}",
            f"           {t.n_chars:,} characters; sha256 {t.sha256}",
        ]
    lines += [f"software   torch {torch.__version__}, transformers {import_transformers().__version__}", rule]
    return portable("\n".join(lines))


def model_record(model) -> dict:
    """The provenance record of a Hugging Face model (a :class:`attnlimits.models.LoadedModel` carries one; a bare
    torch module is named by its class, its weights unrecorded)."""
    prov = getattr(model, "provenance", None)
    if prov is not None:
        return prov.as_dict()
    return {"model_id": type(model).__name__, "sha256": "unrecorded (a bare torch module)"}
