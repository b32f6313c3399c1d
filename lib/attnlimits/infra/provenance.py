"""Provenance shared by every study: what was loaded, from where, with which hash, and where results go.

- :class:`Provenance`                 the record every loaded model carries (printed at the top of every experiment
                                      chapter; its facts and banner are :mod:`attnlimits.models.facts`).
- :func:`sha256_file`, :func:`hash_files`  hashing of weight and text files.
- :func:`cache_dir`                   attnlimits' cache directory (``$ATTNLIMITS_CACHE`` or the user cache).
- :func:`book_checkout`, :func:`results_root` the book's checkout, and where computed results are cached.
- :func:`say`                         the one-line ``[attnlimits] ...`` messages of the loaders.
- :func:`portable`                    a text with this machine's absolute paths named portably (the banner and
                                      the loaders' messages print that; the records keep the full paths).

Importing this module imports neither transformers nor :mod:`attnlimits.models`, so a study that never loads a
model (the training sweep of chapter 32) keys its results on no model-loading code.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Provenance",
    "book_checkout",
    "cache_dir",
    "results_root",
    "hash_files",
    "portable",
    "say",
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
    #: of :func:`attnlimits.models.windows.windows`; None when it prepends none (GPT-2, SmolLM2) or there is no
    #: tokenizer.
    bos_token_id: int | None = None

    def as_dict(self) -> dict:
        """The record as a plain dict (for JSON)."""
        return dataclasses.asdict(self)


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
    """Where computed results are cached: ``$ATTNLIMITS_RESULTS``, else ``.cache/results`` in the book's checkout
    (git-ignored: the per-head intermediates; what the book ships lies in its ``results`` folder), else ``results``
    under :func:`cache_dir`."""
    env = os.environ.get("ATTNLIMITS_RESULTS")
    if env:
        return Path(env)
    checkout = book_checkout()
    return checkout / ".cache" / "results" if checkout is not None else cache_dir() / "results"


def cache_dir() -> Path:
    """Root of attnlimits' cache: ``$ATTNLIMITS_CACHE`` or the platform's user cache directory."""
    env = os.environ.get("ATTNLIMITS_CACHE")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("attnlimits"))


def say(message: str, *, warn: bool = False) -> None:
    """Print one ``[attnlimits] ...`` line, paths made :func:`portable`: on stdout what was loaded and why, on
    stderr (``warn``) what went wrong and was repaired, such as a damaged results-cache entry computed again."""
    print(f"[attnlimits] {portable(message)}", file=sys.stderr if warn else sys.stdout, flush=True)


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
