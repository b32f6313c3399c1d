"""The Experiments on several models and on untrained controls, side by side (chapter 34).

:func:`compute` runs :func:`attnlimits.experiments.results` (Algorithms 1-5, cached under ``results/``) on every
model of :data:`MODELS` that loads here, and on an untrained control of each: the same architecture and
configuration with freshly initialised weights (seeded), on the same windows of the same text. It writes a manifest
(which models were present, which were not and why, load and run times, the capture's exactness on each trained
model) next to the results. :meth:`SeveralModels.load` reads the manifest and the results back without loading any
model; :func:`results` does so, after :func:`compute` when there is nothing current to read. The chapter's tables
and figures are in :mod:`attnlimits.studies.several_models.report`.

A trend that an untrained control shows too comes from softmax and the architecture, not from training.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from attnlimits import experiments
from attnlimits.experiments.presets import PRESETS, get_preset  # the Experiments' presets, run on every model
from attnlimits.infra import cache, provenance
from attnlimits.models import registry

__all__ = ["MODELS", "PRESETS", "SeveralModels", "compute", "get_preset", "manifest_path", "results", "untrained"]

#: The models compared, from :data:`attnlimits.models.registry.MODELS`: each label and the name
#: :func:`attnlimits.models.load` is given (never the fallback in its place).
MODELS = {entry.label: entry.name for entry in registry.MODELS}


def _compute_command(preset) -> str:
    """The commands that run :func:`compute` with ``preset`` (what :meth:`SeveralModels.load`'s errors tell the
    reader)."""
    return (
        f"'attnlimits models --compute --preset {get_preset(preset).name}' ('make models' runs it with the paper "
        "preset, 'make results' with the reduced one)"
    )


def untrained(loaded, seed: int = 0):
    """An untrained control of ``loaded``: its configuration, freshly initialised weights (``torch.manual_seed(seed)``,
    the library's own initialisation), the same tokenizer; the provenance names it and hashes its weights."""
    from transformers import AutoModelForCausalLM

    from attnlimits.models import LoadedModel

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed: must be an integer, got {seed!r}")
    config = type(loaded.model.config).from_dict(loaded.model.config.to_dict())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    p = loaded.provenance
    provenance = dataclasses.replace(
        p,
        model_id=f"untrained-seed{seed}/{p.model_id}",
        source="untrained",
        reason=f"{p.model_id}'s configuration with freshly initialised weights (seed {seed})",
        weight_file="none (random initialisation)",
        sha256=digest.hexdigest(),
        notes=(*p.notes, "untrained control"),
    )
    return LoadedModel(model=model, tokenizer=loaded.tokenizer, provenance=provenance)


def manifest_path(preset="reduced", root=None) -> Path:
    """Where :func:`compute` writes its manifest: ``<results>/models-<preset>.json``."""
    return _manifest_file(get_preset(preset).name, root)


def _manifest_file(preset_name: str, root=None) -> Path:
    """``<root>/models-<preset_name>.json``; ``root``: :func:`attnlimits.infra.provenance.results_root` by default."""
    root = provenance.results_root() if root is None else root
    return Path(root) / f"models-{preset_name}.json"


def _exactness(model, text) -> dict:
    from attnlimits import models
    from attnlimits.models import texts

    info = models.facts(model)
    window = getattr(model.model.config, "sliding_window", None) or 0
    L = min(info["max_positions"] or 640, max(640, window + 128))
    ids = texts.windows(model, text, length=L, count=1)[0]
    report = models.exactness_report(model, ids)
    return {"L": L, **report}


def compute(
    names=None,
    preset="reduced",
    *,
    controls: bool = True,
    seed: int = 0,
    text=None,
    root=None,
    progress: bool | str | None = None,
) -> dict:
    """Run the experiments on every model of ``names`` (labels of :data:`MODELS`, all by default) that loads, and
    with ``controls`` on an untrained control of each; write and return the manifest. ``progress``: as in
    :func:`attnlimits.experiments.results`.

    A model that does not load here (GPT-2 offline, Gemma without its wheels) is listed with the reason.
    """
    from attnlimits import models
    from attnlimits.models import texts

    names = list(MODELS) if names is None else list(names)
    bad = [n for n in names if n not in MODELS]
    if bad:
        raise ValueError(f"names: unknown model(s) {bad}; choose from {list(MODELS)}")
    p = get_preset(preset)
    text = texts.load() if text is None else text
    entries, started = [], time.perf_counter()
    for name in names:
        t0 = time.perf_counter()
        try:
            model = models.load(MODELS[name], allow_fallback=False)
        except (models.ModelUnavailableError, OSError, ValueError) as e:
            entries.append({"label": name, "present": False, "reason": f"{type(e).__name__}: {e}"})
            continue
        load_s = time.perf_counter() - t0
        check = _exactness(model, text)
        runs = [(name, model, load_s)]
        if controls:
            t0 = time.perf_counter()
            runs.append((f"{name} (untrained)", untrained(model, seed), time.perf_counter() - t0))
        for label, m, seconds in runs:
            t0 = time.perf_counter()
            res = experiments.results(m, text, p, root=root, progress=progress)
            entries.append(
                {
                    "label": label,
                    "model": name,
                    "present": True,
                    "trained": m is model,
                    "model_id": m.provenance.model_id,
                    "folder": str(experiments.results_folder(m, text, p, root=root)),
                    "load_seconds": round(seconds, 2),
                    "run_seconds": round(time.perf_counter() - t0, 2),
                    "computed_seconds": res.provenance["seconds"]["total"],
                    "exactness": check if m is model else None,
                    "facts": {k: v for k, v in models.facts(m).items() if k != "parameters"},
                }
            )
        del model, runs
    manifest = {
        "preset": p.as_dict(),
        "text": text.provenance.as_dict() if hasattr(text, "provenance") else None,
        "seed": seed,
        "models": entries,
        "seconds": round(time.perf_counter() - started, 2),
    }
    _write_manifest(manifest, root)
    return manifest


def _write_manifest(manifest: dict, root=None) -> Path:
    """Write ``manifest`` to :func:`manifest_path` of its preset under ``root`` (whole or not at all)."""
    path = _manifest_file(manifest["preset"]["name"], root)
    return cache.write_text(path, json.dumps(manifest, indent=2, default=str))


# ----------------------------------------------------------------------------------------------------------------
# the typed result
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class SeveralModels:
    """A :func:`compute` run read back: its ``manifest`` (the preset, the text, the seed, every model with why it
    is or is not present, its times and the capture's exactness) and ``results``, the experiments'
    :class:`attnlimits.experiments.Results` of every present model and control by label, in the manifest's order.

    Only the manifest is this study's file; each model's results stay in the experiments' cache entry the
    manifest names (``folder``)."""

    manifest: dict
    results: dict[str, experiments.Results]

    def save(self, root) -> Path:
        """Write the manifest to ``<root>/models-<preset>.json`` (:func:`manifest_path`); its path."""
        return _write_manifest(self.manifest, root)

    @classmethod
    def load(cls, root, preset="reduced") -> SeveralModels:
        """The manifest :meth:`save` (or :func:`compute`) wrote under ``root`` for ``preset``, and every present
        model's results from the experiments' cache, without loading a model.

        Raises ``FileNotFoundError`` (with the command that makes them) when there are none, and ``ValueError`` when
        they were computed by other code than this checkout's.
        """
        path = manifest_path(preset, root)
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: run {_compute_command(preset)} first")
        manifest = json.loads(path.read_text())
        out = {}
        for e in manifest["models"]:
            if not e["present"]:
                continue
            try:
                out[e["label"]] = cache.load_current(e["folder"], experiments.code(), experiments.Results.load)
            except cache.StaleEntry as why:
                raise ValueError(f"{why}: run {_compute_command(preset)} again") from None
        return cls(manifest, out)


def results(
    preset="reduced",
    *,
    names=None,
    controls: bool = True,
    seed: int = 0,
    text=None,
    root=None,
    progress: bool | str | None = False,
) -> SeveralModels:
    """The run of ``preset`` read back from ``root`` (:meth:`SeveralModels.load`; ``root``:
    :func:`attnlimits.infra.provenance.results_root` by default), after :func:`compute` when there is nothing
    current to read (the first run only). ``names``, ``controls``, ``seed``, ``text`` and ``progress`` only
    change that computation, as in :func:`compute`."""
    folder = provenance.results_root() if root is None else root
    try:
        return SeveralModels.load(folder, preset)
    except (FileNotFoundError, ValueError, KeyError):
        compute(names, preset, controls=controls, seed=seed, text=text, root=root, progress=progress)
        return SeveralModels.load(folder, preset)
