"""The Experiments on several models and on untrained controls, side by side.

:func:`compute` runs :func:`attnlimits.experiments.results` (Algorithms 1-5, cached under ``results/``) on every
model of :data:`MODELS` that loads here, and on an untrained control of each: the same architecture and
configuration with freshly initialised weights (seeded), on the same windows of the same text. It writes a manifest
(which models were present, which were not and why, load and run times, the capture's exactness on each trained
model) next to the results. :func:`collect` reads the manifest and the results back without loading any model, and
:func:`summary`/:func:`trends` set the measurements side by side.

A trend that an untrained control shows too comes from softmax and the architecture, not from training.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attnlimits import experiments
from attnlimits.experiments import paper_claims
from attnlimits.experiments.presets import get_preset
from attnlimits.infra import cache, provenance
from attnlimits.models import registry

__all__ = [
    "MODELS",
    "collect",
    "compute",
    "figure",
    "load_or_compute",
    "manifest_path",
    "overview",
    "run_id",
    "summary",
    "trained_labels",
    "trends",
    "untrained",
    "verdicts",
]

#: The models compared, from :data:`attnlimits.models.registry.MODELS`: each label and the name
#: :func:`attnlimits.models.load` is given (never the fallback in its place).
MODELS = {entry.label: entry.name for entry in registry.MODELS}


def _compute_command(preset) -> str:
    """The commands that run :func:`compute` with ``preset`` (what :func:`collect`'s errors tell the reader)."""
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
    root = provenance.results_root() if root is None else root
    return Path(root) / f"models-{get_preset(preset).name}.json"


def _exactness(model, text) -> dict:
    from attnlimits import models
    from attnlimits.models import texts

    info = models.facts(model)
    window = getattr(model.model.config, "sliding_window", None) or 0
    L = min(info["max_positions"] or 640, max(640, window + 128))
    ids = texts.windows(model, text, length=L, count=1)[0]
    report = models.exactness_report(model, ids)
    return {"L": L, **report}


def compute(names=None, preset="reduced", *, controls: bool = True, seed: int = 0, text=None, root=None) -> dict:
    """Run the experiments on every model of ``names`` (labels of :data:`MODELS`, all by default) that loads, and
    with ``controls`` on an untrained control of each; write and return the manifest.

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
            res = experiments.results(m, text, p, root=root)
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
    cache.write_text(manifest_path(p, root), json.dumps(manifest, indent=2, default=str))
    return manifest


def collect(preset="reduced", root=None) -> tuple[dict, dict]:
    """The manifest and ``{label: Results}`` of a :func:`compute` run, read back without loading a model.

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
    return manifest, out


def trained_labels(manifest: dict) -> list[str]:
    """The labels of the trained models that were present in a :func:`compute` run, in :data:`MODELS` order."""
    return [e["label"] for e in manifest["models"] if e["present"] and e["trained"]]


def run_id(manifest: dict) -> tuple[tuple[str, ...], str | None, str]:
    """What a :func:`compute` run is, as :func:`attnlimits.experiments.paper_claims.describes` reads it: (the trained
    models
    present, the text's name, the preset's name)."""
    return tuple(trained_labels(manifest)), (manifest["text"] or {}).get("name"), manifest["preset"]["name"]


# ------------------------------------------------------------------------------------------------------------------
# side by side
# ------------------------------------------------------------------------------------------------------------------
def _one_over_t_range(res) -> tuple[float, float]:
    """The T range where max-over-heads g (smallest eps, the model's logits) follows 1/T: the longest run of
    consecutive grid intervals whose log-log slope lies in [-1.2, -0.8], as ``(T_lo, T_hi)``; NaNs when none."""
    top = res.g_max()
    T, g = np.log(top.index.to_numpy(float)), np.log(top.to_numpy(float))
    ok = (np.diff(g) / np.diff(T) >= -1.2) & (np.diff(g) / np.diff(T) <= -0.8)
    best, start = (0, -1), None
    for i, flag in enumerate([*ok, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            best = max(best, (i - start, start))
            start = None
    length, first = best
    if length == 0:
        return np.nan, np.nan
    return float(top.index[first]), float(top.index[first + length])


def summary(results: dict) -> pd.DataFrame:
    """One row per model: critical N / L (median over L, KS level 0.05), the N_s/N plateau (median over heads,
    averaged over N >= 16), the growth exponent of d~(L) (median over heads, N fixed), the range of T where the
    most sensitive head's g follows 1/T, the slope of g for T < 0.1, and the attention sink's weight (median
    and largest over heads)."""
    rows = []
    for label, res in results.items():
        crit = res.critical[(res.critical.ks_level == 0.05) & (res.critical.reading == "E")].dropna(
            subset=["critical_N"]
        )
        frac = crit.critical_N.astype(float) / crit.L
        sep = res.alg4().groupby("N").ns_frac.median()
        med = res.alg1().groupby("L").d_tilde.median()
        top = res.g_max()
        low = top[top.index < 0.1]
        rows.append(
            {
                "model": label,
                "critical N / L": float(frac.median()) if len(frac) else np.nan,
                "N_s/N plateau": float(sep[sep.index >= 16].mean()),
                "d~ growth exponent": paper_claims.loglog_slope(med.index, med.values),
                "g ~ 1/T from T": _one_over_t_range(res)[0],
                "g ~ 1/T to T": _one_over_t_range(res)[1],
                "g slope (T < 0.1)": paper_claims.loglog_slope(low.index, low.values),
                "sink weight (median)": float(res.sink.sink_weight.median()),
                "sink weight (max)": float(res.sink.sink_weight.max()),
            }
        )
    return pd.DataFrame(rows).set_index("model")


def verdicts(results: dict) -> pd.DataFrame:
    """The verdict of every experimental claim of :mod:`attnlimits.experiments.paper_claims` on every model (one column
    each)."""
    return pd.DataFrame({label: paper_claims.claims(res).set_index("key").verdict for label, res in results.items()})


def trends(results: dict, manifest: dict) -> pd.DataFrame:
    """Each claim sorted by where it holds: ``every trained model and every untrained control`` (softmax itself),
    ``every trained model only`` (learned), ``some trained models`` (depends on the model) or ``no trained
    model``. "Holds" is the verdict "reproduced" ("inconclusive" does not hold: its interval does not decide)."""
    table = verdicts(results)
    trained = [e["label"] for e in manifest["models"] if e.get("present") and e.get("trained")]
    controls = [e["label"] for e in manifest["models"] if e.get("present") and not e.get("trained")]
    holds = table == paper_claims.REPRODUCED
    rows = []
    for key in table.index:
        in_trained = int(holds.loc[key, trained].sum())
        in_controls = int(holds.loc[key, controls].sum()) if controls else 0
        if in_trained == len(trained) and controls and in_controls == len(controls):
            where = "every trained model and every untrained control"
        elif in_trained == len(trained):
            where = "every trained model only" if controls else "every trained model"
        elif in_trained:
            where = "some trained models"
        else:
            where = "no trained model"
        rows.append({"claim": key, "holds in": where, "trained": f"{in_trained}/{len(trained)}",
                     "untrained": f"{in_controls}/{len(controls)}"})  # fmt: skip
    return pd.DataFrame(rows).set_index("claim")


def figure(results: dict):
    """Three panels, one line per model (untrained controls dashed): median d~ against L (N fixed), median N_s/N
    against N, and the largest g against T (smallest eps, the model's logits)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    colors = {}
    for label, res in results.items():
        base = label.removesuffix(" (untrained)")
        color = colors.setdefault(base, f"C{len(colors)}")
        style = {"color": color, "ls": "--" if base != label else "-", "marker": "o", "ms": 3, "label": label}
        p = res.preset
        med = res.alg1().groupby("L").d_tilde.median()
        axes[0].loglog(med.index, med.values, **style)
        sep = res.alg4().groupby("N").ns_frac.median()
        axes[1].semilogx(sep.index, sep.values, **style)
        top = res.g_max()
        axes[2].loglog(top.index, top.values, **style)
    axes[0].set(xlabel="L", ylabel="median d~ over heads", title=f"Figure 2a: d~ vs L (N = {p.alg1_N})")
    axes[1].set(xlabel="N", ylabel="median N_s / N over heads", title=f"Figure 3: N_s/N (L = {p.alg4_L})")
    axes[2].set(xlabel="T", ylabel="max g over heads", title="Figure 4: g(T) (smallest eps)")
    axes[0].legend(fontsize=8)
    return fig


def load_or_compute(preset="reduced", root=None) -> tuple[dict, dict]:
    """:func:`collect`, after :func:`compute` when there is nothing current to collect (the first run only)."""
    try:
        return collect(preset, root)
    except (FileNotFoundError, ValueError, KeyError):
        compute(preset=preset, root=root)
        return collect(preset, root)


def overview(manifest: dict) -> pd.DataFrame:
    """One row per model of the manifest: present or why not, its shape, load and run seconds, and on trained
    models the capture's largest difference from ``output_attentions`` and whether every masked entry is exactly
    where the layer's mask (causal, or causal and sliding) puts it."""
    rows = []
    for e in manifest["models"]:
        if not e["present"]:
            rows.append({"model": e["label"], "present": "no: " + e["reason"][:160]})
            continue
        f, x = e["facts"], e.get("exactness") or {}
        mask = next((v for k, v in x.items() if k.startswith("masked entries")), None)
        rows.append(
            {
                "model": e["label"],
                "present": "yes",
                "architecture": f["architecture"],
                "layers x heads (kv)": f"{f['n_layers']} x {f['n_heads']} ({f['n_kv_heads']})",
                "head dim": f["head_dim"],
                "positions": f["positional"],
                "load (s)": e["load_seconds"],
                "run (s)": e["computed_seconds"],
                "capture vs eager": x.get("weights vs eager output_attentions"),
                "masks exact": None if mask is None else bool(mask),
                "checked at L": x.get("L"),
            }
        )
    return pd.DataFrame(rows).set_index("model")
