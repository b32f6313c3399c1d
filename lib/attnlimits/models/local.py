"""A model from files on this machine: a model directory or a ``.gguf`` file (:func:`load_local`), and the weight
files of a model in the Hugging Face cache (:func:`cached_weight_files`).

:func:`attnlimits.models.load` uses both, and so do the named models of :mod:`attnlimits.models.registry` (Gemma's
joined GGUF file, whether GPT-2 is in the cache): they live here, below both, so that the registry (data) never
imports the loader.
"""

from __future__ import annotations

import json
from pathlib import Path

from attnlimits.models.gguf import fast_gguf
from attnlimits.models.hf import from_pretrained, tokenizer

__all__ = ["WEIGHT_FILES", "cached_weight_files", "check_weight_file", "load_local", "weight_files"]

#: Weight files of a model directory, in the order they are looked for.
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def weight_files(directory: Path) -> list[Path]:
    """The weight files of a model directory: the safetensors/bin file, the shards of an index, else its GGUFs."""
    for name in WEIGHT_FILES:
        path = directory / name
        if path.is_file():
            if name.endswith(".index.json"):
                index = json.loads(path.read_text())
                return [directory / shard for shard in sorted(set(index["weight_map"].values()))]
            return [path]
    return sorted(directory.glob("*.gguf"))


def check_weight_file(path: Path) -> None:
    """Fail early and clearly on an unreadable weight file (truncated, corrupt, wrong format)."""
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="pt") as f:
                keys = list(f.keys())
                if keys:
                    f.get_slice(keys[-1])
        except Exception as e:  # noqa: BLE001
            raise ValueError(f"weight file {path} is corrupt or not a safetensors file ({e})") from e
        size = path.stat().st_size
        with open(path, "rb") as f:
            header = int.from_bytes(f.read(8), "little")
            meta = json.loads(f.read(header))
        end = max((v["data_offsets"][1] for k, v in meta.items() if k != "__metadata__"), default=0)
        if 8 + header + end != size:
            raise ValueError(
                f"weight file {path} is corrupt: its header describes {8 + header + end} bytes, the file has {size}"
            )


def load_local(path: Path) -> tuple[object, object, list[Path], str]:
    """A model directory or a ``.gguf`` file: ``(model, tokenizer, weight files, how)``; clear errors otherwise."""
    if path.is_file():
        if path.suffix != ".gguf":
            raise ValueError(
                f"name_or_path={str(path)!r} is a file; expected a model directory (config.json plus weights) "
                "or a .gguf file"
            )
        gguf_kwargs = {"gguf_file": path.name}
        try:
            with fast_gguf():
                model = from_pretrained(str(path.parent), **gguf_kwargs)
                tok = tokenizer(str(path.parent), **gguf_kwargs)
        except Exception as e:  # noqa: BLE001
            raise ValueError(f"could not load the GGUF file {path}: it is corrupt or unsupported ({e})") from e
        return model, tok, [path], "a local GGUF file"
    files = weight_files(path)
    if not files:
        raise FileNotFoundError(
            f"directory {path} holds no model weights: expected one of {', '.join(WEIGHT_FILES)} or a *.gguf file"
        )
    if files[0].suffix == ".gguf":
        if len(files) > 1:
            raise ValueError(f"directory {path} holds several .gguf files; pass the one to load: {files}")
        return load_local(files[0])
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"directory {path} has weights but no config.json")
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"directory {path} lacks weight shards: {[m.name for m in missing]}")
    for f in files:
        check_weight_file(f)
    try:
        model = from_pretrained(str(path), local_files_only=True)
    except Exception as e:  # noqa: BLE001
        raise ValueError(
            f"could not load the weights in {path}: they are corrupt or do not match config.json ({e})"
        ) from e
    return model, tokenizer(str(path), local_files_only=True), files, "a local directory"


def cached_weight_files(model_id: str) -> list[Path]:
    """The weight files of ``model_id`` in the Hugging Face cache (the shards of an index), or ``[]``."""
    from transformers.utils import cached_file

    for name in WEIGHT_FILES:
        try:
            resolved = cached_file(
                model_id,
                name,
                local_files_only=True,
                _raise_exceptions_for_missing_entries=False,
                _raise_exceptions_for_connection_errors=False,
            )
        except Exception:  # noqa: BLE001
            resolved = None
        if resolved:
            path = Path(resolved)
            if name.endswith(".index.json"):
                shards = sorted(set(json.loads(path.read_text())["weight_map"].values()))
                return [path.parent / s for s in shards]
            return [path]
    return []
