"""Provenance shared by the models and the texts: what was loaded, from where, with which hash, and the banner.

- :class:`Provenance`                 the record every loaded model carries (printed at the top of every experiment
                                      chapter).
- :func:`config_facts`, :func:`facts` a model's shape facts (layers, heads, key/value heads, head dim, positions).
- :func:`default_bos`                 the BOS token a tokenizer prepends by default (the experiments' windows then
                                      start with it).
- :func:`banner`, :func:`banner_text` the provenance banner of a model and, when given, of a text.
- :func:`sha256_file`, :func:`hash_files`  hashing of weight and text files.
- :func:`cache_dir`                   attnlimits' cache directory (``$ATTNLIMITS_CACHE`` or the user cache).
- :func:`book_checkout`, :func:`results_root` the book's checkout, and where computed results are cached.
- :func:`say`                         the one-line ``[attnlimits] ...`` messages of the loaders.
- :func:`portable`                    a text with this machine's absolute paths named portably (the banner and
                                      the loaders' messages print that; the records keep the full paths).

Importing this module imports neither transformers nor :mod:`attnlimits.models`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "Provenance",
    "banner",
    "banner_text",
    "book_checkout",
    "cache_dir",
    "results_root",
    "config_facts",
    "default_bos",
    "facts",
    "hash_files",
    "portable",
    "say",
    "scaling_description",
    "sha256_file",
]


@dataclass(frozen=True)
class Provenance:
    """Where a model came from and what it is (printed at the top of every experiment chapter)."""

    model_id: str
    requested: str
    source: str  # "local", "cache", "hub", "package" (Gemma-3-270M's wheels) or "fallback"
    reason: str
    weight_file: str
    sha256: str
    architecture: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_model: int
    vocab_size: int
    max_positions: int | None
    positional: str
    dtype: str
    load_seconds: float
    transformers_version: str
    notes: tuple[str, ...] = ()
    #: The fallback only: seconds this machine took to dequantise the GGUF and write the cache (its first load).
    first_load_seconds: float | None = None
    #: The id of the BOS token the tokenizer prepends by default (:func:`default_bos`), which then starts every window
    #: of :func:`attnlimits.texts.windows`; None when it prepends none (GPT-2, SmolLM2) or there is no tokenizer.
    bos_token_id: int | None = None

    def as_dict(self) -> dict:
        """The record as a plain dict (for JSON)."""
        return dataclasses.asdict(self)


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
    sequences that start with BOS sees the experiments' windows the same way (:func:`attnlimits.texts.windows`).
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


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    """SHA-256 hex digest of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def book_checkout() -> Path | None:
    """The book's checkout this library runs from (the folder holding ``pyproject.toml`` and ``_toc.yml``), if any."""
    here = Path(__file__).resolve().parents
    return next((d for d in here if (d / "pyproject.toml").is_file() and (d / "_toc.yml").is_file()), None)


def results_root() -> Path:
    """Where computed results are cached: ``$ATTNLIMITS_RESULTS``, else the ``results`` folder of the book's
    checkout (git-ignored), else ``results`` under :func:`cache_dir`."""
    env = os.environ.get("ATTNLIMITS_RESULTS")
    if env:
        return Path(env)
    checkout = book_checkout()
    return checkout / "results" if checkout is not None else cache_dir() / "results"


def cache_dir() -> Path:
    """Root of attnlimits' cache: ``$ATTNLIMITS_CACHE`` or the platform's user cache directory."""
    env = os.environ.get("ATTNLIMITS_CACHE")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("attnlimits"))


def say(message: str) -> None:
    """Print one ``[attnlimits] ...`` line on stdout (what was loaded and why), paths made :func:`portable`."""
    print(f"[attnlimits] {portable(message)}", flush=True)


def _path_names() -> list[tuple[str, str]]:
    """(absolute prefix, portable name) pairs of this machine, longest prefix first."""
    import site
    import sysconfig

    names: dict[str, str] = {}
    home = os.path.expanduser("~")
    if home not in ("", "/"):
        names[home] = "~"
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file():
        names[str(root)] = "<checkout>"
    hf = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(home, ".cache", "huggingface"), "hub"
    )
    names[hf] = "<Hugging Face cache>"
    names[str(cache_dir())] = "<attnlimits cache>"
    packages = [sysconfig.get_paths().get(k) for k in ("purelib", "platlib")] + list(site.getsitepackages())
    for folder in packages:
        if folder:
            names[folder] = "<site-packages>"
    pairs = {}
    for prefix, name in names.items():
        for form in {prefix.rstrip(os.sep), str(Path(prefix).resolve()).rstrip(os.sep)}:
            if form:
                pairs[form] = name
    return sorted(pairs.items(), key=lambda kv: len(kv[0]), reverse=True)


def portable(text: str) -> str:
    """``text`` with this machine's absolute paths under known folders named portably, so that what a chapter
    prints reads the same on every machine: site-packages → ``<site-packages>``, attnlimits' cache →
    ``<attnlimits cache>``, the Hugging Face cache → ``<Hugging Face cache>``, this checkout → ``<checkout>``, the
    home directory → ``~``. Only whole path components match (``/a/bc`` is not under ``/a/b``)."""
    out = str(text)
    for prefix, name in _path_names():
        start = 0
        while (i := out.find(prefix, start)) >= 0:
            end = i + len(prefix)
            if end == len(out) or out[end] == os.sep or not (out[end].isalnum() or out[end] in "._-"):
                out = out[:i] + name + out[end:]
                start = i + len(name)
            else:
                start = end
    return out


def hash_files(files: Sequence[Path]) -> str:
    """SHA-256 of one file, or of a sharded checkpoint: the hash of the shards' hashes, in the given order."""
    if len(files) == 1:
        return sha256_file(files[0])
    combined = hashlib.sha256()
    for f in files:
        combined.update(sha256_file(f).encode())
    return combined.hexdigest()


def banner(model, text=None) -> None:
    """Print the provenance of the model and, when given, of the text: the first output of every experiment chapter."""
    print(banner_text(model, text))


def banner_text(model, text=None) -> str:
    """The provenance banner as a string, with absolute paths made :func:`portable` (the record keeps them whole).

    ``model``: a :class:`attnlimits.models.LoadedModel`; ``text``: an :class:`attnlimits.texts.Text` or its provenance.
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
