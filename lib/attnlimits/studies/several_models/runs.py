"""Chapter 34's run: every model and control window by window, summarised over heads, and read back.

Each model of :data:`~attnlimits.studies.several_models.study.MODELS` that loads, and each of its controls, is
run through the Experiments one window at a time (:func:`attnlimits.experiments.window_results`: each window's own
Algorithm 3 search, as in the Experiments chapters), and each window is summarised over its heads
(:func:`attnlimits.experiments.shipped.window_files`). A run of a preset lies in :func:`study_folder`: per model
and control, one folder per window (:func:`window_folder`), and ``runs/manifest.json`` (which models were present,
which were not and why, their shapes, the capture's exactness, each run's first-window facts). The book ships the
reduced preset's run in ``results/models/reduced`` (:func:`shards`); :func:`results` reads it from there, or from
the results cache, without loading a model. The windows are the units every interval of chapter 34 resamples.

This module is outside the study's key (the code that computes the windows is the Experiments' and the controls'
in :mod:`.study`): it runs and reads the study, it does not compute its numbers.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from attnlimits import models
from attnlimits.experiments import shipped
from attnlimits.experiments.summaries import Summaries
from attnlimits.infra import cache, provenance, shipping
from attnlimits.models import texts
from attnlimits.studies import several_models
from attnlimits.studies.several_models import study
from attnlimits.studies.several_models.study import CONTROLS, get_preset

#: What the package names of this module (its lazy name table, the one list of them).
__all__ = [name for name, where in several_models.NAMES.items() if where == __name__]

#: The controls that run the trained model itself (on other tokens).
_TRAINED_CONTROLS = ("shuffled", "second text")
#: The code a window of chapter 34 depends on: the Experiments' (as shipped) and the controls'.
MODULES = (*shipped.MODULES, study.__name__)


def _compute_command(preset) -> str:
    """The commands that make a run of ``preset`` (what :meth:`SeveralModels.load`'s errors tell the reader)."""
    return (
        f"'attnlimits models --compute --preset {get_preset(preset).name}' ('make models' runs it with the paper "
        "preset, 'make results' with the reduced one)"
    )


# ----------------------------------------------------------------------------------------------------------------
# where a run lies
# ----------------------------------------------------------------------------------------------------------------
def study_folder(preset="reduced", root=None) -> Path:
    """Where a run of ``preset`` lies: ``<root>/models-<preset>`` (``root``:
    :func:`attnlimits.infra.provenance.results_root` by default), the layout the book ships under
    ``results/models/<preset>``."""
    root = provenance.results_root() if root is None else root
    return Path(root) / f"models-{get_preset(preset).name}"


def manifest_path(preset="reduced", root=None) -> Path:
    """The manifest of a run of ``preset``: ``<study_folder>/runs/manifest.json``."""
    return study_folder(preset, root) / "runs" / "manifest.json"


def slug(label: str) -> str:
    """A run's label as a folder name: ``SmolLM2-135M (second text)`` -> ``smollm2-135m--second-text``."""
    base, _, control = label.partition(" (")
    name = base if not control else f"{base}--{control.rstrip(')')}"
    return name.lower().replace(" ", "-").replace("/", "-")


def window_folder(label: str, preset, window: int) -> str:
    """A window's folder of a run, relative to :func:`study_folder`: ``<slug>/window-<i>-of-<W>``."""
    return f"{slug(label)}/window-{window:02d}-of-{get_preset(preset).windows:02d}"


# ----------------------------------------------------------------------------------------------------------------
# the runs
# ----------------------------------------------------------------------------------------------------------------
class Run(NamedTuple):
    """One run of chapter 34: a model (its label in :data:`~.study.MODELS`) alone (``control`` None) or under one
    of :data:`~.study.CONTROLS`; ``label`` is how the chapter names it."""

    label: str
    model: str
    control: str | None


def run_labels(names=None, controls=CONTROLS) -> list[Run]:
    """The runs of the models ``names`` (labels of :data:`~.study.MODELS`, all by default) and their ``controls``
    (names of :data:`~.study.CONTROLS`; True: all, False or (): none), without loading anything."""
    names = list(study.MODELS) if names is None else list(names)
    bad = [n for n in names if n not in study.MODELS]
    if bad:
        raise ValueError(f"names: unknown model(s) {bad}; choose from {list(study.MODELS)}")
    controls = _check_controls(controls)
    return [r for name in names for r in (Run(name, name, None), *(Run(f"{name} ({c})", name, c) for c in controls))]


def _check_controls(controls) -> tuple[str, ...]:
    """``controls`` as a tuple of names of :data:`CONTROLS` (True: all of them, False: none); ValueError else."""
    controls = CONTROLS if controls is True else () if controls is False else tuple(controls)
    if any(c not in CONTROLS for c in controls):
        raise ValueError(f"controls: must be names of {CONTROLS} (or True / False), got {list(controls)}")
    return controls


def _loaded(name: str):
    """The model of the label ``name``, loaded once per process (never the fallback in its place)."""
    return _load(study.MODELS[name])


@functools.cache
def _load(requested: str):
    return models.load(requested, allow_fallback=False)


def second_text():
    """:data:`~.study.SECOND_TEXT`, or the error that says why it cannot be read here (it has no fallback: the
    control would read the first text again)."""
    try:
        return texts.load(study.SECOND_TEXT, allow_fallback=False)
    except texts.TextUnavailableError as e:
        return e


_CONTROLLED: dict = {}


def inputs(run: Run, preset, seed: int, text) -> tuple:
    """``(model, text, shuffle)`` of ``run``: the control's model (built once per process and preset), the text it
    reads (the second text for that control; NotImplementedError naming why where it cannot be read) and the seed of
    its tokens' order (the shuffled control) or None."""
    p = get_preset(preset)
    model = _loaded(run.model)
    if run.control == "second text":
        other = second_text()
        if isinstance(other, Exception):
            raise NotImplementedError(f"{type(other).__name__}: {other}")
        return model, other, None
    if run.control in ("untrained", "entropy-matched"):
        key = (model.provenance.sha256, run.control, p.name, seed, texts.sha256_of(text))
        if key not in _CONTROLLED:
            make = study.untrained if run.control == "untrained" else study.entropy_matched
            _CONTROLLED[key] = make(model, seed) if run.control == "untrained" else make(model, text, p, seed)
        return _CONTROLLED[key], text, None
    return model, text, (seed if run.control == "shuffled" else None)


def write_window(run: Run, preset, window: int, folder: Path, *, seed: int = 0, text=None, root=None) -> float:
    """Window ``window`` of ``run`` summarised over its heads into ``folder``
    (:func:`attnlimits.experiments.shipped.window_files`, its run in the results cache under ``root``); the seconds
    its run took."""
    text = texts.load() if text is None else text
    model, on, shuffle = inputs(run, preset, seed, text)
    folder.mkdir(parents=True, exist_ok=True)
    return shipped.window_files(model, on, get_preset(preset), window, folder, shuffle=shuffle, root=root)


def model_entries(
    name: str, preset="reduced", *, controls=CONTROLS, seed: int = 0, text=None, root=None, progress=None, folder=None
) -> list[dict]:
    """The manifest entries of one model of :data:`~.study.MODELS` (its label ``name``) and its ``controls``, each
    run's windows written into ``folder`` (:func:`study_folder` of ``root`` by default; False: none written); a
    single entry saying why when the model does not load."""
    p = get_preset(preset)
    text = texts.load() if text is None else text
    folder = study_folder(p, root) if folder is None else folder
    t0 = time.perf_counter()
    try:
        _loaded(name)
    except (models.ModelUnavailableError, OSError, ValueError) as e:
        return [{"label": name, "present": False, "reason": f"{type(e).__name__}: {e}"}]
    load_s = time.perf_counter() - t0
    entries = []
    for run in run_labels([name], controls):
        t0 = time.perf_counter()
        try:
            entry = _entry(run, p, seed, text)
        except NotImplementedError as e:
            entries.append(
                {"label": run.label, "model": name, "control": run.control, "present": False, "reason": str(e)}
            )
            continue
        entry["load_seconds"] = round(load_s if run.control is None else time.perf_counter() - t0, 2)
        if folder is not False:
            at = [Path(folder) / window_folder(run.label, p, w) for w in range(p.windows)]
            seconds = sum(write_window(run, p, w, at[w], seed=seed, text=text, root=root) for w in range(p.windows))
            entry["computed_seconds"] = round(seconds, 2)
            if progress:
                print(f"[attnlimits] models: {run.label}: {p.windows} windows in {seconds:.1f} s", flush=True)
        entries.append(entry)
    return entries


def _entry(run: Run, p, seed: int, text) -> dict:
    """What the manifest says of one present run: its model and text, the model's shape, the capture's exactness
    (the model alone) and its first window's facts (:func:`~.study.window_facts`)."""
    m, on, shuffle = inputs(run, p, seed, text)
    entry = {
        "label": run.label,
        "model": run.model,
        "control": run.control,
        "present": True,
        "trained": run.control in (None, *_TRAINED_CONTROLS),
        "text": on.provenance.name,
        "model_id": m.provenance.model_id,
        "exactness": study.exactness(m, on) if run.control is None else None,
        "facts": {k: v for k, v in models.facts(m).items() if k != "parameters"},
        "window": study.window_facts(m, on, p, shuffle=shuffle),
    }
    if run.control == "entropy-matched":
        entry["matched_entropy"] = m.matched_entropy
    return entry


def write_manifest(entries: list[dict], preset="reduced", *, seed: int = 0, text=None, seconds: float, root=None):
    """Write the manifest of ``entries`` (those of :func:`model_entries`, in the order of :data:`~.study.MODELS`)
    to :func:`manifest_path` of ``preset`` under ``root``, whole or not at all; return it. It records the code of
    the windows (their modules' hashes), so that a run of other code is not read back."""
    text = texts.load() if text is None else text
    manifest = {
        "preset": get_preset(preset).as_dict(),
        "text": text.provenance.as_dict() if hasattr(text, "provenance") else None,
        "seed": seed,
        "models": list(entries),
        "seconds": round(seconds, 2),
        "code": cache.module_hashes(*MODULES),
    }
    path = manifest_path(preset, root)
    cache.write_text(path, json.dumps(manifest, indent=1, default=str) + "\n")
    return json.loads(path.read_text())


def compute(
    names=None, preset="reduced", *, controls=CONTROLS, seed: int = 0, text=None, root=None, progress=None, n_jobs=1
) -> dict:
    """Run the Experiments on every model of ``names`` (labels of :data:`~.study.MODELS`, all by default) that
    loads, and on each of its ``controls``, window by window, each seeded by ``seed``; write the run
    (:func:`study_folder` under ``root``) and return its manifest. ``n_jobs`` is accepted for the command line's
    sake; the windows run one after the other (the book's pipeline runs each model in a process of its own).

    A model that does not load here (GPT-2 offline, Gemma without its wheels) is listed with the reason, and so is
    a control that cannot be made (the second text where Debian's package ``bible-kjv`` is absent)."""
    runs = run_labels(names, controls)  # checks the names and controls first
    text = texts.load() if text is None else text
    started = time.perf_counter()
    chosen = list(dict.fromkeys(r.model for r in runs))
    opts = {"controls": controls, "seed": seed, "text": text, "root": root, "progress": progress}
    entries = [e for name in chosen for e in model_entries(name, preset, **opts)]
    return write_manifest(entries, preset, seed=seed, text=text, seconds=time.perf_counter() - started, root=root)


# ----------------------------------------------------------------------------------------------------------------
# reading a run back
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class SeveralModels:
    """A run read back: its ``manifest`` (the preset, the text, the seed, every model with why it is or is not
    present, its times, the capture's exactness) and ``results``, each present model's and control's windows as
    :class:`~attnlimits.experiments.summaries.Summaries`, by label, in the manifest's order."""

    manifest: dict
    results: dict[str, Summaries]

    def save(self, folder) -> Path:
        """Write the run into ``folder`` (a results root) in the layout :meth:`load` reads: the manifest and, per
        model and control, each window's summaries and ``window.json``; returns ``folder``."""
        from attnlimits.experiments.grid import Preset

        p = Preset(**{k: tuple(v) if isinstance(v, list) else v for k, v in self.manifest["preset"].items()})
        base = study_folder(p, folder)
        for label, res in self.results.items():
            prov = {k: v for k, v in res.provenance.items() if k not in ("windows", "window_starts", "shipped")}
            for w, start in zip(res.provenance["windows"], res.provenance["window_starts"], strict=True):
                at = base / window_folder(label, p, int(w))
                at.mkdir(parents=True, exist_ok=True)
                for name in res.TABLES:
                    table = getattr(res, name)
                    if len(table):
                        shipping.write_table(table[table["window"] == w], at / f"{name}.parquet")
                record = {**prov, "window": int(w), "window_start": start}
                (at / "window.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        path = manifest_path(p, folder)
        cache.write_text(path, json.dumps(self.manifest, indent=1, default=str) + "\n")
        return Path(folder)

    @classmethod
    def load(cls, folder, preset="reduced") -> SeveralModels:
        """The run of ``preset`` under ``folder`` (a results root: :func:`study_folder` of it), without loading a
        model. FileNotFoundError (with the command that makes it) when there is none; ValueError when it holds
        another grid or was computed by other code than this checkout's."""
        path = manifest_path(preset, folder)
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: run {_compute_command(preset)} first")
        return cls._read(path.parent.parent, json.loads(path.read_text()), preset)

    @classmethod
    def _read(cls, base: Path, manifest: dict, preset) -> SeveralModels:
        wanted = get_preset(preset)
        if manifest.get("preset") != json.loads(json.dumps(wanted.as_dict())):
            raise ValueError(
                f"{base} holds another grid than the {wanted.name} preset's: run {_compute_command(preset)}"
            )
        if manifest.get("code") != cache.module_hashes(*MODULES):
            raise ValueError(f"{base} was computed by other code than this checkout's: run {_compute_command(preset)}")
        out = {}
        for e in manifest["models"]:
            if e["present"]:
                out[e["label"]] = Summaries.read(
                    [base / window_folder(e["label"], wanted, w) for w in range(wanted.windows)]
                )
        return cls(manifest, out)


def results(preset="reduced", *, root=None, progress=None, n_jobs: int = 1, **options) -> SeveralModels:
    """The run of ``preset``: the one the book ships (``results/models/<preset>``, the reduced preset's), else the
    one in ``root`` (:func:`attnlimits.infra.provenance.results_root` by default), else computed there first
    (:func:`compute` with ``options``: names, controls, seed, text)."""
    p = get_preset(preset)
    if root is None:
        base = shipping.shipped_root() / "models" / p.name
        if (base / "runs" / "manifest.json").is_file():
            try:
                return SeveralModels._read(
                    base, _with_times(json.loads((base / "runs" / "manifest.json").read_text()), p), p
                )
            except ValueError:
                pass  # stale for this checkout's code: the results cache's, or computed
    folder = provenance.results_root() if root is None else root
    try:
        return SeveralModels.load(folder, p)
    except (FileNotFoundError, ValueError, KeyError):
        compute(preset=p, root=root, progress=progress, n_jobs=n_jobs, **options)
        return SeveralModels.load(folder, p)


def _with_times(manifest: dict, p) -> dict:
    """The shipped run's manifest with each run's ``computed_seconds``: its windows' seconds as the book's manifest
    (``results/manifest.json``) records them."""
    recorded = shipping.load_manifest()["shards"]
    for e in manifest["models"]:
        if e["present"]:
            names = [f"models/{p.name}/{window_folder(e['label'], p, w)}" for w in range(p.windows)]
            if all(n in recorded for n in names):
                e["computed_seconds"] = round(sum(recorded[n]["seconds"] for n in names), 1)
    return manifest


# ----------------------------------------------------------------------------------------------------------------
# what the book ships
# ----------------------------------------------------------------------------------------------------------------
#: What the manifest records of the machine and the time, not of a result: the audit does not compare them.
_TIMES = ("load_seconds", "computed_seconds", "seconds", "first_load_seconds", "load_s", "text")

#: The models the book ships chapter 34's run of: the offline ones (GPT-2 runs with `make models` where it loads).
SHIPPED_MODELS = ("SmolLM2-135M", "Gemma-3-270M")


def shards(preset="reduced") -> list[shipping.Shard]:
    """What the book ships of chapter 34 at ``preset``: every window of every shipped model and control
    (``models/<preset>/<slug>/window-<i>-of-<W>``, as the Experiments' windows are) and the run's manifest
    (``models/<preset>/runs``; its times record the machine, not a result)."""
    p = get_preset(preset)
    out = []
    base = {"preset": p.as_dict(), "text": shipped.text_key(), "seed": 0}
    keys = {name: shipped.model_key(study.MODELS[name]) for name in SHIPPED_MODELS}
    for run in run_labels(SHIPPED_MODELS):
        other = {"second_text": shipped.text_key(study.SECOND_TEXT)} if run.control == "second text" else {}
        for w in range(p.windows):
            key = {**base, **other, "model": keys[run.model], "control": run.control, "window": w}
            write = functools.partial(_write_shard, run, p.name, w)
            out.append(
                shipping.Shard(f"models/{p.name}/{window_folder(run.label, p, w)}", MODULES, key, write, seconds=40.0)
            )
    key = {**base, "models": keys, "second_text": shipped.text_key(study.SECOND_TEXT)}
    out.append(
        shipping.Shard(
            f"models/{p.name}/runs",
            MODULES,
            key,
            functools.partial(_write_manifest_shard, p.name),
            seconds=120.0,
            records=_TIMES,
        )
    )
    return out


def _write_shard(run: Run, preset: str, window: int, folder: Path) -> float:
    return write_window(run, preset, window, folder, text=shipped.text(shipped.DEFAULT_TEXT))


def _write_manifest_shard(preset: str, folder: Path) -> None:
    """The run's manifest: each shipped model's and control's entry (no window is computed: those are the other
    shards), and why the other models are not in the book's run."""
    text = shipped.text(shipped.DEFAULT_TEXT)
    t0 = time.perf_counter()
    entries = [e for name in SHIPPED_MODELS for e in model_entries(name, preset, text=text, folder=False)]
    manifest = {
        "preset": get_preset(preset).as_dict(),
        "text": text.provenance.as_dict(),
        "seed": 0,
        "models": entries + [_absent(name) for name in study.MODELS if name not in SHIPPED_MODELS],
        "seconds": round(time.perf_counter() - t0, 2),
        "code": cache.module_hashes(*MODULES),
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n")


def _absent(name: str) -> dict:
    from attnlimits.models import registry

    present, why = registry.get(study.MODELS[name]).present()
    reason = "the book ships the offline models' run" + ("" if present else f"; here: {why}")
    return {"label": name, "present": False, "reason": reason + " (make models runs it where it loads)"}
