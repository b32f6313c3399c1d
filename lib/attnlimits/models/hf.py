"""The thin layer between attnlimits and transformers: a quiet import, quiet loading, the shared error.

transformers is imported on first use only (chapters that never touch a pretrained model never import it). What
loading would write on stderr (progress bars, warnings) is dropped, so that a chapter's cell stays clean; what was
loaded and why is printed by :func:`attnlimits.models.load` on stdout.
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from collections.abc import Iterator

import torch

__all__ = [
    "ModelUnavailableError",
    "env_flag",
    "from_pretrained",
    "import_transformers",
    "quiet_transformers",
    "tokenizer",
]


class ModelUnavailableError(OSError):
    """The requested model is neither local, nor cached, nor downloadable, and the fallback was not allowed."""


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Keep loading off stderr: no progress bars, no info/warning chatter, no Python warnings (errors still raise).

    A chapter's cell must not write to stderr (the book is built with warnings as errors). What loading would have
    written there is dropped; what was loaded and why is printed by :func:`attnlimits.models.load` on stdout.
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


def import_transformers():
    """Import transformers without its import-time warnings (tqdm's "IProgress not found" inside Jupyter)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import transformers
    return transformers


def env_flag(name: str) -> bool:
    """True when the environment variable ``name`` is set to 1, true, yes or on."""
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def from_pretrained(source: str, quiet: bool = True, **kwargs):
    """``AutoModelForCausalLM.from_pretrained(source)`` in float32, quietly unless ``quiet=False``."""
    with quiet_transformers() if quiet else contextlib.nullcontext():
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, **kwargs)


def tokenizer(source: str, **kwargs):
    """The tokenizer of ``source``, or ``None`` when it has none (or an empty one)."""
    with quiet_transformers():
        from transformers import AutoTokenizer

        try:
            loaded = AutoTokenizer.from_pretrained(source, **kwargs)
        except (OSError, ValueError, TypeError):
            return None
    # A directory without tokenizer files yields an empty tokenizer rather than an error: treat it as none.
    return loaded if getattr(loaded, "vocab_size", 1) else None
