"""The Experiments on several models and on controls, side by side (chapter 34).

:func:`compute` runs :func:`attnlimits.experiments.results` (Algorithms 1-5, cached under ``results/``) on every
model of :data:`MODELS` that loads here, and on the controls of :data:`CONTROLS` of each, on the same windows of the
same text: the untrained network (the same architecture and configuration with freshly initialised weights,
seeded: :func:`untrained`), that network with each head's logits scaled until its mean row entropy matches the
trained head's (:func:`entropy_matched`), the trained model on each window's tokens in a random order
(``shuffle``), and the trained model on a second text of narrative English (:data:`SECOND_TEXT`, the King James
Version from Debian's package ``bible-kjv``; not run, and listed with the reason, where it is not installed). It
writes a manifest
(which models were present, which were not and why, load and run times, the capture's exactness on each trained
model) next to the results. :meth:`SeveralModels.load` reads the manifest and the results back without loading any
model; :func:`results` does so, after :func:`compute` when there is nothing current to read. The chapter's tables
and figures are in :mod:`attnlimits.studies.several_models.report`.

A trend that an untrained control shows too comes from softmax and the architecture, not from training; one that
the entropy-matched control shows too needs no more of training than how sharp its rows are; one that the shuffled
control loses needs the text's order; one that the second text loses belongs to the first text, not to the model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnlimits import experiments, models
from attnlimits.core import normalizers, rowstats, sinks
from attnlimits.experiments.presets import PRESETS, get_preset  # the Experiments' presets, run on every model
from attnlimits.infra import cache, provenance
from attnlimits.models import LoadedModel, registry, texts

__all__ = [
    "CONTROLS",
    "MODELS",
    "SECOND_TEXT",
    "PRESETS",
    "SeveralModels",
    "compute",
    "entropy_matched",
    "get_preset",
    "manifest_path",
    "mean_row_entropy",
    "model_entries",
    "results",
    "untrained",
    "window_facts",
    "write_manifest",
]

#: The models compared, from :data:`attnlimits.models.registry.MODELS`: each label and the name
#: :func:`attnlimits.models.load` is given (never the fallback in its place).
MODELS = {entry.label: entry.name for entry in registry.MODELS}
#: The controls each model is set beside, labelled "<model> (<control>)": the untrained network; the untrained
#: network with each head's logits scaled to the trained head's mean row entropy (it removes how sharp the
#: trained rows are as a cause); the trained model on each window's tokens shuffled (it removes the text's order);
#: the trained model on :data:`SECOND_TEXT` (it changes the text: a result it loses belongs to the first text).
CONTROLS = ("untrained", "entropy-matched", "shuffled", "second text")
#: The text of the "second text" control (:func:`attnlimits.models.texts.load`, never its fallback): narrative
#: English like the paper's novel, where the book's default text offline is the Python reference manual.
SECOND_TEXT = "kjv"
#: The controls that run the trained model itself (on other tokens).
_TRAINED_CONTROLS = ("shuffled", "second text")


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


def mean_row_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Each head's mean over its rows of the Shannon entropy (nats) of a row's weights ``(H, R, L)``: ``(H,)``."""
    w = weights.double()
    return -(w * torch.log(torch.where(w > 0, w, 1.0))).sum(-1).mean(-1)


#: The range of the logit factors :func:`entropy_matched` searches (log scale) and the steps of its bisection.
_LOG_SCALES, _BISECTIONS = (-12.0, 12.0), 60


def _matching_scales(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per head of ``logits`` ``(H, R, L)`` (masked entries -inf), the factor beta > 0 with which softmax(beta
    logits) has the mean row entropy ``target`` ``(H,)``: a bisection on log beta (the entropy falls as beta grows),
    clamped to the ends of :data:`_LOG_SCALES` where the target lies beyond what they reach."""
    lo = torch.full_like(target, _LOG_SCALES[0])
    hi = torch.full_like(target, _LOG_SCALES[1])
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        too_flat = mean_row_entropy(torch.softmax(logits * mid.exp().view(-1, 1, 1), -1)) > target
        lo, hi = torch.where(too_flat, mid, lo), torch.where(too_flat, hi, mid)
    return ((lo + hi) / 2).exp()


def _scale_queries(hf, scales: dict[int, torch.Tensor]) -> None:
    """Multiply each attention head's queries (hence its logits) in layer l by ``scales[l]`` (one factor per
    head), through forward hooks on ``hf``'s attention modules: after the query normalisation where there is one
    (Gemma 3's q_norm, whose output is (batch, heads, seq, head_dim)), else on the query projection (batch, seq,
    heads * head_dim). RoPE rotates the scaled queries as it would the others, so logit l of head h becomes
    scales[l][h] times what it was."""
    found = set()
    for module in hf.modules():
        layer = getattr(module, "layer_idx", None)
        if layer not in scales or not hasattr(module, "q_proj"):
            continue
        beta = scales[layer].to(torch.float32)
        if hasattr(module, "q_norm"):
            module.q_norm.register_forward_hook(lambda m, args, out, b=beta: out * b.view(1, -1, 1, 1).to(out.dtype))
        else:
            module.q_proj.register_forward_hook(
                lambda m, args, out, b=beta: (out.unflatten(-1, (len(b), -1)) * b.view(-1, 1).to(out.dtype)).flatten(-2)
            )
        found.add(layer)
    if found != set(scales):
        raise NotImplementedError(
            f"model: no attention module with a q_proj for layers {sorted(set(scales) - found)}; the entropy-matched "
            "control scales the queries of Llama- and Gemma-style attention"
        )


def entropy_matched(trained, text, preset="reduced", seed: int = 0):
    """The entropy-matched control of ``trained``: its untrained network (:func:`untrained` with ``seed``) with
    each attention head's logits multiplied by a factor chosen so that the head's mean row entropy
    (:func:`mean_row_entropy`) over the first window the preset reads equals the trained head's there.

    The untrained network's rows are nearly uniform; this control keeps its weights and makes its rows as sharp
    as the trained model's, head by head, so a trend it shares with the trained model needs nothing of training
    but that sharpness. The factors are installed as forward hooks on the network's query computation (a capture
    of the control sees the scaled logits); the provenance names the control and hashes its weights with them,
    and ``matched_entropy`` holds, per layer, each head's factor and the trained and matched entropies."""
    p = get_preset(preset)
    control = untrained(trained, seed)
    window = {"length": p.max_length, "count": 1, "total": p.windows}
    (target,) = experiments.capture_windows(trained, text, **window)
    scales, record = {}, {}
    # layer by layer: a layer's logits depend on the scales of the layers below it (through its inputs)
    for layer in target.layer_ids:
        (now,) = experiments.capture_windows(control, text, **window, layers=[layer])
        goal = mean_row_entropy(target.weights(layer, p.max_length))
        scales[layer] = _matching_scales(now.logits(layer, p.max_length).double(), goal)
        _scale_queries(control.model, {layer: scales[layer]})
        record[layer] = {"scale": scales[layer].tolist(), "trained_entropy": goal.tolist()}
    (matched,) = experiments.capture_windows(control, text, **window)
    for layer in target.layer_ids:
        record[layer]["matched_entropy"] = mean_row_entropy(matched.weights(layer, p.max_length)).tolist()
    digest = hashlib.sha256(control.provenance.sha256.encode())
    for layer in sorted(scales):
        digest.update(scales[layer].numpy().tobytes())
    name = trained.provenance.model_id
    provenance = dataclasses.replace(
        control.provenance,
        model_id=f"entropy-matched-seed{seed}/{name}",
        source="untrained, entropy-matched",
        reason=f"{name}'s untrained network (seed {seed}), each head's logits scaled to the trained head's mean row "
        f"entropy on the first window of the {p.name} preset",
        sha256=digest.hexdigest(),
        notes=(*control.provenance.notes, "entropy-matched control"),
    )
    out = LoadedModel(model=control.model, tokenizer=control.tokenizer, provenance=provenance)
    out.matched_entropy = record
    return out


#: The relative jitter that breaks the ties of uniform weights in :func:`window_facts` (seeded).
_JITTER = 1e-9


def window_facts(model, text, preset="reduced", *, shuffle: int | None = None, seed: int = 0) -> dict:
    """What the first window the preset reads gives beyond the experiments (at Algorithm 4's L):

    - ``mean_share``: the share of the heads' values' squared norm that lies in their mean over the window's
      tokens (the direction every token shares);
    - ``uniform_plateau``: Figure 3's plateau of :func:`attnlimits.studies.several_models.report.summary` (median
      over heads of a head's mean N_s/N, averaged over Algorithm 4's N >= 16) when every row's weights are uniform
      over its tokens, ties broken by a seeded relative jitter of :data:`_JITTER`: the separable fraction of
      weights that select nothing;
    - ``sink_rate``: per normaliser of :data:`attnlimits.core.normalizers.NORMALIZERS` applied to the model's own
      masked logits (``softmax``: the model's weights), the share of heads whose importance score of token 0
      exceeds 0.3 (:func:`attnlimits.core.sinks.sink_rate`, Gu et al.'s metric over the first 64 tokens).

    ``shuffle``: as :func:`attnlimits.experiments.capture_windows`."""
    p = get_preset(preset)
    L = p.alg4_L
    order = {} if shuffle is None else {"shuffle": shuffle}
    (cap,) = experiments.capture_windows(model, text, length=max(L, sinks.SINK_ROWS), count=1, total=p.windows, **order)
    ns = [n for n in p.alg4_N if n >= 16] or [max(p.alg4_N)]
    gen = torch.Generator().manual_seed(seed)
    means = {n: [] for n in ns}
    shared = total = 0.0
    for layer in cap.layer_ids:
        logits = cap.logits(layer, L).double()
        _, x = cap.inputs(layer, L)
        x = x.double()
        jitter = _JITTER * torch.randn(logits.shape, generator=gen, dtype=torch.float64)
        uniform = torch.softmax(torch.where(torch.isinf(logits), logits, jitter), -1)
        window = cap.window(layer, L)
        frac = rowstats.separability(uniform, x, ns, window=window)[0]
        lengths = rowstats.row_lengths(L, window=window)
        for j, n in enumerate(ns):
            means[n].extend(rowstats.row_means(frac[j], lengths, n, L)[0].tolist())
        shared += float((x.mean(1).norm(dim=-1) ** 2).sum())
        total += float((x.norm(dim=-1) ** 2).mean(1).sum())
    rows = sinks.SINK_ROWS
    rates = {
        name: sinks.sink_rate(cap.weights(layer, rows, normalizer=name) for layer in cap.layer_ids)
        for name in normalizers.NORMALIZERS
    }
    plateau = float(np.mean([np.nanmedian(means[n]) for n in ns]))
    return {"mean_share": shared / total, "uniform_plateau": plateau, "sink_rate": rates}


def manifest_path(preset="reduced", root=None) -> Path:
    """Where :func:`compute` writes its manifest: ``<results>/models-<preset>.json``."""
    return _manifest_file(get_preset(preset).name, root)


def _manifest_file(preset_name: str, root=None) -> Path:
    """``<root>/models-<preset_name>.json``; ``root``: :func:`attnlimits.infra.provenance.results_root` by default."""
    root = provenance.results_root() if root is None else root
    return Path(root) / f"models-{preset_name}.json"


def _save_manifest(manifest: dict, folder=None) -> Path:
    """Write ``manifest`` to ``<folder>/models-<preset>.json`` (:func:`_manifest_file`), whole or not at all; its
    path. What :func:`write_manifest` and :meth:`SeveralModels.save` write."""
    path = _manifest_file(manifest["preset"]["name"], folder)
    return cache.write_text(path, json.dumps(manifest, indent=2, default=str))


def _exactness(model, text) -> dict:
    from attnlimits.models.windows import windows

    info = models.facts(model)
    window = getattr(model.model.config, "sliding_window", None) or 0
    L = min(info["max_positions"] or 640, max(640, window + 128))
    ids = windows(model, text, length=L, count=1)[0]
    report = models.exactness_report(model, ids)
    return {"L": L, **report}


def compute(
    names=None,
    preset="reduced",
    *,
    controls=CONTROLS,
    seed: int = 0,
    text=None,
    root=None,
    progress: bool | str | None = None,
    n_jobs: int = 1,
) -> dict:
    """Run the experiments on every model of ``names`` (labels of :data:`MODELS`, all by default) that loads, and
    on each of its ``controls`` (names of :data:`CONTROLS`; True: all of them, False or (): none), each seeded by
    ``seed``; write and return the manifest. ``progress`` and ``n_jobs`` (windows in parallel): as in
    :func:`attnlimits.experiments.results`; neither changes the results.

    A model that does not load here (GPT-2 offline, Gemma without its wheels) is listed with the reason, and so is
    a control that cannot be made for a model (the second text where Debian's package ``bible-kjv`` is absent).
    The models run one after the other here; :func:`model_entries` runs one of them (``attnlimits results`` runs
    each in a process of its own) and :func:`write_manifest` puts their entries together.
    """
    names = list(MODELS) if names is None else list(names)
    bad = [n for n in names if n not in MODELS]
    if bad:
        raise ValueError(f"names: unknown model(s) {bad}; choose from {list(MODELS)}")

    controls = _check_controls(controls)
    text = texts.load() if text is None else text
    started = time.perf_counter()
    opts = {"controls": controls, "seed": seed, "text": text, "root": root, "progress": progress, "n_jobs": n_jobs}
    entries = [e for name in names for e in model_entries(name, preset, **opts)]
    return write_manifest(entries, preset, seed=seed, text=text, seconds=time.perf_counter() - started, root=root)


def model_entries(
    name: str,
    preset="reduced",
    *,
    controls=CONTROLS,
    seed: int = 0,
    text=None,
    root=None,
    progress: bool | str | None = None,
    n_jobs: int = 1,
) -> list[dict]:
    """The manifest entries of one model of :data:`MODELS` (its label ``name``): the model's own and one per
    control, each run through :func:`attnlimits.experiments.results` (cached); a single entry saying why when the
    model does not load. The options are those of :func:`compute`."""
    if name not in MODELS:
        raise ValueError(f"name: unknown model {name!r}; choose from {list(MODELS)}")
    controls = _check_controls(controls)
    p = get_preset(preset)
    text = texts.load() if text is None else text
    t0 = time.perf_counter()
    try:
        model = models.load(MODELS[name], allow_fallback=False)
    except (models.ModelUnavailableError, OSError, ValueError) as e:
        return [{"label": name, "present": False, "reason": f"{type(e).__name__}: {e}"}]
    load_s = time.perf_counter() - t0
    second = _second_text() if "second text" in controls else None
    run = {"root": root, "progress": progress, "n_jobs": n_jobs}
    entries = [_run_entry(name, name, None, model, text, p, load_s, **run, exactness=_exactness(model, text))]
    for control in controls:
        label = f"{name} ({control})"
        t0 = time.perf_counter()
        try:
            if control == "second text" and isinstance(second, Exception):
                raise NotImplementedError(f"{type(second).__name__}: {second}")
            m = _control(control, model, text, p, seed)
        except NotImplementedError as e:
            entries.append({"label": label, "model": name, "control": control, "present": False, "reason": str(e)})
            continue
        shuffle = seed if control == "shuffled" else None
        on = second if control == "second text" else text
        entry = _run_entry(label, name, control, m, on, p, time.perf_counter() - t0, **run, shuffle=shuffle)
        if control == "entropy-matched":
            entry["matched_entropy"] = m.matched_entropy
        entries.append(entry)
    return entries


def _check_controls(controls) -> tuple[str, ...]:
    """``controls`` as a tuple of names of :data:`CONTROLS` (True: all of them, False: none); ValueError else."""
    controls = CONTROLS if controls is True else () if controls is False else tuple(controls)
    if any(c not in CONTROLS for c in controls):
        raise ValueError(f"controls: must be names of {CONTROLS} (or True / False), got {list(controls)}")
    return controls


def write_manifest(entries: list[dict], preset="reduced", *, seed: int = 0, text=None, seconds: float, root=None):
    """Write the manifest of ``entries`` (those of :func:`model_entries`, in the order of :data:`MODELS`) to
    :func:`manifest_path` of ``preset`` under ``root``, whole or not at all; return it. ``seconds``: what the runs
    took; ``text`` and ``seed``: those the entries were run with (the default text when None)."""
    text = texts.load() if text is None else text
    manifest = {
        "preset": get_preset(preset).as_dict(),
        "text": text.provenance.as_dict() if hasattr(text, "provenance") else None,
        "seed": seed,
        "models": list(entries),
        "seconds": round(seconds, 2),
    }
    _save_manifest(manifest, root)
    return manifest


def _second_text():
    """:data:`SECOND_TEXT`, or the error that says why it cannot be read here (it has no fallback: the control
    would read the first text again)."""
    try:
        return texts.load(SECOND_TEXT, allow_fallback=False)
    except texts.TextUnavailableError as e:
        return e


def _control(control: str, model, text, p, seed: int):
    """The model a control runs: the untrained network, the entropy-matched one, or the model itself (shuffled, or on
    the second text)."""
    if control == "untrained":
        return untrained(model, seed)
    if control == "entropy-matched":
        return entropy_matched(model, text, p, seed)
    return model


def _run_entry(
    label, name, control, m, text, p, seconds, *, root, progress, n_jobs=1, shuffle=None, exactness=None
) -> dict:
    """Run the experiments on ``m`` (cached) and return its manifest entry."""
    t0 = time.perf_counter()
    res = experiments.results(m, text, p, root=root, progress=progress, shuffle=shuffle, n_jobs=n_jobs)
    return {
        "label": label,
        "model": name,
        "control": control,
        "present": True,
        "trained": control in (None, *_TRAINED_CONTROLS),
        "text": text.provenance.name,
        "model_id": m.provenance.model_id,
        "folder": str(experiments.results_folder(m, text, p, root=root, shuffle=shuffle)),
        "load_seconds": round(seconds, 2),
        "run_seconds": round(time.perf_counter() - t0, 2),
        "computed_seconds": res.provenance["seconds"]["total"],
        "exactness": exactness,
        "facts": {k: v for k, v in models.facts(m).items() if k != "parameters"},
        "window": window_facts(m, text, p, shuffle=shuffle),
    }


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

    def save(self, folder) -> Path:
        """Write the manifest to ``<folder>/models-<preset>.json`` (:func:`manifest_path`, one file per preset in
        one folder); returns ``folder``."""
        _save_manifest(self.manifest, folder)
        return Path(folder)

    @classmethod
    def load(cls, folder, preset="reduced") -> SeveralModels:
        """The manifest :meth:`save` (or :func:`compute`) wrote into ``folder`` for ``preset``, and every present
        model's results from the experiments' cache, without loading a model.

        Raises ``FileNotFoundError`` (with the command that makes them) when there are none, and ``ValueError`` when
        they were computed by other code than this checkout's.
        """
        path = manifest_path(preset, folder)
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: run {_compute_command(preset)} first")
        manifest = json.loads(path.read_text())
        wanted = get_preset(preset)
        if manifest.get("preset") != json.loads(json.dumps(wanted.as_dict())):
            run = _compute_command(preset)
            raise ValueError(f"{path} holds another grid than the {wanted.name} preset's: run {run}")
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
    controls=CONTROLS,
    seed: int = 0,
    text=None,
    root=None,
    progress: bool | str | None = False,
    n_jobs: int = 1,
) -> SeveralModels:
    """The run of ``preset`` read back from ``root`` (:meth:`SeveralModels.load`; ``root``:
    :func:`attnlimits.infra.provenance.results_root` by default), after :func:`compute` when there is nothing
    current to read (the first run only). ``names``, ``controls``, ``seed``, ``text``, ``progress`` and ``n_jobs``
    only change that computation, as in :func:`compute`."""
    folder = provenance.results_root() if root is None else root
    try:
        return SeveralModels.load(folder, preset)
    except (FileNotFoundError, ValueError, KeyError):
        opts = {"controls": controls, "seed": seed, "text": text, "root": root, "progress": progress}
        compute(names, preset, **opts, n_jobs=n_jobs)
        return SeveralModels.load(folder, preset)
